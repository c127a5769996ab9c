"""Command line: ``rubric-reward validate | score | eval | report | compare | serve | generate | dpo-loop |
eval-generator`` (also ``python -m rubric_reward.cli``).

One module per command group (``score``, ``evaluation``, ``serve``, ``generation``), each with a
``register(subparsers)``; ``main`` assembles them. Exit status: 0 success; 1 some items unscored or failed
(``score`` without ``--allow-failures``, ``eval``: rerun to retry them), or some files invalid
(``validate``); 2 a usage, configuration or data error (one line naming the file, entry and field); 3
``eval`` stopped at the cost cap; 130 interrupted.
"""

from __future__ import annotations

from .main import build_parser, main

__all__ = ["build_parser", "main"]
