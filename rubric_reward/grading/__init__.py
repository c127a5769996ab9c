"""Grading: rubric + item -> judge requests -> verdicts.

The grader (``grader.py``) schedules one response's judge calls (one per criterion, k per call, all at
once, or one group call for a prompt's responses), runs every call through the one judge-call loop
(``calls.py``: send, strict parse, one re-ask, usage, record), settles ensembles and repeated samples
(``ensemble.py``) and hands the verdicts to :mod:`rubric_reward.arithmetic`. Prompts are rendered and
answers parsed by ``criterion_prompt.py`` (per-criterion and per-item calls) and ``group_prompt.py``
(group calls); ``quotes.py`` refuses a verdict the judge quoted from the response; ``logprobs.py`` reads
label probabilities; ``fewshot.py`` picks exemplars.

May import: the vocabulary (``rubric``, ``items``, ``results``, ``arithmetic``), ``guards/``, ``judges/``
(its protocol and transport scope), ``checks/``, ``util/``. Never a consumer (``rewards/``, ``rl/``,
``serve/``, ``integrations/``, ``evaluation/``, ``generation/``, ``recipes/``, ``cli/``).
"""
