"""Guards: what is read of a response before any judge sees it.

``degenerate.py`` screens responses that are no answer (empty, punctuation, a prompt echo, a bare
master-key phrase) to the minimum score without a judge call; ``flag.py`` flags verdict-shaped text,
text addressed to the grader and forged prompt structure (a heuristic screen for common shapes, not a
boundary: docs/security.md); ``confusables.py`` reads text on confusable-character skeletons;
``memo.py`` keeps the guards' per-rubric tables.

May import: the vocabulary (``rubric``, ``items``) and ``util/``. Nothing else of the package.
"""
