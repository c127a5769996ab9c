"""AdvancedIF (``facebook/AdvancedIF``, CC-BY-NC-4.0: downloaded at run time, never bundled) as prompt rows.

One CSV of 1,645 rows: ``conversation_history`` (JSON messages), ``prompt_metadata`` (JSON object whose
``rubrics`` is usually a JSON string of a list of yes/no questions: decoded twice), ``benchmark_name``.

The paper's split. Autorubric trains on "402 AdvancedIF prompts" and validates on 81; the single-turn
benchmark (``complex_if_single_turn_v5``) has exactly 402 rows and 81 = ceil(0.2 x 402), so its validation
set was most likely a fifth of those 402 and it picked and reported on that same set. 402 train + 81
selection + a separate report split cannot all come from 402 rows, so the default
(:data:`ADVANCEDIF_DEFAULT_SPLIT`) keeps the paper's subset and its 81-prompt selection split, adds an equally
sized report split, and trains on the rest: **240 train / 81 selection / 81 report** of the 402 single-turn
rows. For the paper's exact 402 training prompts, pass ``benchmarks=None`` (all 1,645 rows, three
benchmarks) with ``train=402``: the splits are then stratified over the three benchmarks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .rows import (BadRow, OnBadRow, PromptRows, bad_row, benchmark_filter, check_found, content_id, conversation,
                   decode, open_source, source_rows, unique_id)
from .split import Splits, split_rows

__all__ = ["ADVANCEDIF", "ADVANCEDIF_BENCHMARKS", "ADVANCEDIF_DEFAULT_SPLIT", "MULTI_TURN", "SINGLE_TURN",
           "SYSTEM_STEERABILITY", "load_advancedif", "load_advancedif_splits"]

ADVANCEDIF = "facebook/AdvancedIF"
SINGLE_TURN = "complex_if_single_turn_v5"
MULTI_TURN = "carried_context_multi_turn_eval_v5"
SYSTEM_STEERABILITY = "system_steerability_v2"
ADVANCEDIF_BENCHMARKS = (SINGLE_TURN, MULTI_TURN, SYSTEM_STEERABILITY)

#: Default split of AdvancedIF (see the module docstring): the single-turn subset, 81 selection, 81 report,
#: the rest (240) for training.
ADVANCEDIF_DEFAULT_SPLIT: Mapping[str, Any] = {
    "benchmarks": (SINGLE_TURN,), "train": "rest", "selection": 81, "report": 81, "seed": 0,
}


def load_advancedif(
    source: str | Path | Any = ADVANCEDIF,
    *,
    benchmarks: Iterable[str] | str | None = None,
    on_bad_row: OnBadRow = "error",
    split: str = "train",
    revision: str | None = None,
    limit: int | None = None,
) -> PromptRows:
    """AdvancedIF rows from the hub (``datasets.load_dataset``) or a local CSV / JSONL / ``save_to_disk`` folder.

    ``source``: a hub id (default ``facebook/AdvancedIF``), a local path (an existing file or folder is
    always read locally), a ``datasets.Dataset`` or an iterable of mappings with the AdvancedIF columns.
    ``benchmarks``: keep only these ``benchmark_name`` values (None: all). ``on_bad_row``: ``"error"``
    raises :class:`DataError` naming the source, the row (from 0, header excluded) and the field of the
    first bad row (missing or undecodable rubric, undecodable conversation, a conversation not ending on a
    user turn); ``"skip"`` drops such rows and records them in ``PromptRows.skipped``. ``limit`` stops
    after that many kept rows. Ids are content hashes (``advif-<12 hex>``), so they do not depend on row order.
    """
    name, rows = open_source(source, split=split, revision=revision)
    wanted = benchmark_filter(benchmarks)
    out = PromptRows(source=name)
    seen: dict[str, int] = {}
    for row_no, raw, benchmark in source_rows(rows, out, "benchmark_name", wanted, limit):
        try:
            prompt = conversation(raw.get("conversation_history"), "conversation_history")
            rubric = _advancedif_rubric(raw.get("prompt_metadata"))
        except BadRow as bad:
            bad_row(out, name, row_no, bad, on_bad_row)
            continue
        out.append({"id": unique_id(content_id(prompt, rubric, benchmark), seen), "prompt": prompt,
                    "rubric": rubric, "benchmark": benchmark})
    check_found(out, name, wanted)
    return out


def load_advancedif_splits(source: str | Path | Any = ADVANCEDIF, *, on_bad_row: OnBadRow = "error",
                           **overrides: Any) -> Splits:
    """Load AdvancedIF and split it with :data:`ADVANCEDIF_DEFAULT_SPLIT` (240 / 81 / 81 single-turn rows).

    ``overrides`` replace any of its keys (``benchmarks``, ``train``, ``selection``, ``report``, ``seed``)
    and may add ``split``/``revision``/``limit`` for the loader and ``stratify`` for :func:`split_rows`.
    ``Splits.source`` then says what was loaded (rows per benchmark, bad rows skipped).
    """
    settings = {**ADVANCEDIF_DEFAULT_SPLIT, **overrides}
    load_keys = ("benchmarks", "split", "revision", "limit")
    rows = load_advancedif(source, on_bad_row=on_bad_row, **{k: settings.pop(k) for k in load_keys if k in settings})
    return split_rows(rows, **settings)


def _advancedif_rubric(metadata: Any) -> list[str]:
    field_name = "prompt_metadata"
    if metadata is None or metadata == "":
        raise BadRow(field_name, f"field {field_name!r} is missing or empty")
    meta = decode(metadata, field_name, Mapping)
    questions = meta.get("rubrics", meta.get("rubric"))
    return _questions(questions, f"{field_name}.rubrics")


def _questions(value: Any, field_name: str) -> list[str]:
    if value is None or value == "" or value == []:
        raise BadRow(field_name, f"field {field_name!r} is missing or empty")
    value = decode(value, field_name, list)
    if not value:
        raise BadRow(field_name, f"field {field_name!r} is an empty list")
    out = []
    for i, q in enumerate(value):
        if not isinstance(q, str) or not q.strip():
            raise BadRow(field_name, f"field {field_name!r}: item {i} is not a non-empty question string: {q!r:.60}")
        out.append(q.strip())
    return out
