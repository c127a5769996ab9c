"""The jobs a user runs and may fork, each a folder built only on the library's doors.

* :mod:`.grpo`: ``train/grpo.py``, LoRA GRPO with rubric rewards, checkpoint monitoring and a final report;
* :mod:`.generator_dpo`: ``rubric-reward dpo-loop`` and ``rubric-reward eval-generator``, the rubric-generator
  training loop and its evaluation.

The library (what these import: :mod:`rubric_reward.rl`, :mod:`rubric_reward.rewards`,
:mod:`rubric_reward.generation`, ...) is kept stable; a recipe's modules may change between releases.
"""
