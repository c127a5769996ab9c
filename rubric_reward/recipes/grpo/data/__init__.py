"""Training prompts for rubric-reward RL: where rows come from, and the three-way split.

* :mod:`.rows`: the row model (:class:`PromptRows` of ``{"id", "prompt", "rubric", "benchmark"}`` dicts) and
  the parsing every loader shares (one-line errors naming source, row and field; bad rows skipped or fatal);
* :mod:`.advancedif`: AdvancedIF from the hub or a local copy, and its default 240 / 81 / 81 split;
* :mod:`.prompts`: rows from any file or dataset with a prompt and a rubric, the bundled prompt sets
  (``"offline"``, ``"offline-instructions"``), and :func:`to_dataset`, the ``datasets.Dataset`` TRL trains on;
* :mod:`.split`: :func:`split_rows`, the seeded, stratified, disjoint train / selection / report split.
"""

from __future__ import annotations

from ....io.rows import DataError
from .advancedif import (ADVANCEDIF, ADVANCEDIF_BENCHMARKS, ADVANCEDIF_DEFAULT_SPLIT, MULTI_TURN, SINGLE_TURN,
                         SYSTEM_STEERABILITY, load_advancedif, load_advancedif_splits)
from .prompts import load_prompt_rows, rows_from_dataset, to_dataset
from .rows import PromptRows, SkippedRow
from .split import SPLITS, Splits, split_rows

__all__ = ["ADVANCEDIF", "ADVANCEDIF_BENCHMARKS", "ADVANCEDIF_DEFAULT_SPLIT", "MULTI_TURN", "SINGLE_TURN", "SPLITS",
           "SYSTEM_STEERABILITY", "DataError", "PromptRows", "SkippedRow", "Splits", "load_advancedif",
           "load_advancedif_splits", "load_prompt_rows", "rows_from_dataset", "split_rows", "to_dataset"]
