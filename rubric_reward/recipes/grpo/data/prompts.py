"""Prompt rows from any source with a prompt and a rubric, a bundled prompt set, and the TRL dataset."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ....data import PROMPT_SETS, prompt_set_path
from .rows import (BadRow, OnBadRow, PromptRows, bad_row, benchmark_filter, check_found, content_id, conversation,
                   decode, open_source, opt_str, source_rows)

__all__ = ["load_prompt_rows", "rows_from_dataset", "to_dataset"]


def load_prompt_rows(
    source: str | Path | Any,
    *,
    prompt_field: str = "prompt",
    rubric_field: str = "rubric",
    id_field: str = "id",
    benchmark_field: str = "benchmark",
    benchmarks: Iterable[str] | str | None = None,
    on_bad_row: OnBadRow = "error",
    validate: bool = True,
    limit: int | None = None,
) -> PromptRows:
    """Rows with a prompt and a rubric from JSONL / CSV / a ``save_to_disk`` folder / a Dataset / mappings.

    A name in ``rubric_reward.data.PROMPT_SETS`` gives a bundled prompt set: ``"offline"`` (12 prompts whose
    rubrics mix judged criteria with checks, benchmark ``"offline"``) or ``"offline-instructions"`` (240
    prompts, one verifiable instruction each, benchmark = the instruction type).
    The prompt is a string (one user turn) or messages (maybe a JSON string) ending on a user turn. The
    rubric is an inline rubric mapping, a list of criteria or questions, either as a JSON string (decoded,
    twice if needed) or a multi-line YAML string, or a rubric id (a plain string, looked up by the reward's ``rubric_dir``). Inline
    rubrics are validated with ``Rubric.from_obj`` unless ``validate=False``. Missing ids become content hashes.
    Bad rows: as in :func:`load_advancedif`.
    """
    bundled = isinstance(source, str) and source in PROMPT_SETS
    if bundled:
        source = Path(str(prompt_set_path(source)))
    name, rows = open_source(source)
    if bundled:
        name = f"bundled prompt set {source.parent.name!r}"
    wanted = benchmark_filter(benchmarks)
    out = PromptRows(source=name)
    seen: dict[str, int] = {}
    for row_no, raw, benchmark in source_rows(rows, out, benchmark_field, wanted, limit):
        try:
            prompt = conversation(raw.get(prompt_field), prompt_field)
            rubric = _generic_rubric(raw.get(rubric_field), rubric_field, validate)
        except BadRow as bad:
            bad_row(out, name, row_no, bad, on_bad_row)
            continue
        row_id = opt_str(raw.get(id_field)) or content_id(prompt, rubric, benchmark)
        if row_id in seen:
            bad_row(out, name, row_no, BadRow(id_field, f"field {id_field!r}: id {row_id!r} already used by row "
                                                      f"{seen[row_id]}"), on_bad_row)
            continue
        seen[row_id] = row_no
        out.append({"id": row_id, "prompt": prompt, "rubric": rubric, "benchmark": benchmark})
    check_found(out, name, wanted)
    return out


def rows_from_dataset(dataset: Any, *, rubric_field: str = "rubric") -> PromptRows:
    """Rows back from a :func:`to_dataset` dataset (or any with ``prompt``/``rubric`` columns)."""
    return load_prompt_rows(dataset, rubric_field=rubric_field, validate=False)


def _generic_rubric(value: Any, field_name: str, validate: bool) -> Any:
    if value is None or value == "" or value == [] or value == {}:
        raise BadRow(field_name, f"field {field_name!r} is missing or empty")
    if isinstance(value, str) and "\n" in value.strip() and value.lstrip()[:1] not in ("[", "{", '"'):
        value = _yaml(value, field_name)
    elif isinstance(value, str) and value.lstrip()[:1] not in ("[", "{", '"'):
        return value.strip()  # a rubric id
    value = decode(value, field_name, (list, Mapping))
    if isinstance(value, Mapping):
        value = dict(value)
    if validate:
        from ....rubric import Rubric, RubricError

        try:
            Rubric.from_obj(value, source=f"field {field_name!r}")
        except RubricError as exc:
            raise BadRow(field_name, str(exc)) from None
    return value


def _yaml(text: str, field_name: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadRow(field_name, f"field {field_name!r}: not valid YAML: {str(exc).splitlines()[0]}") from None


def to_dataset(rows: Iterable[Mapping[str, Any]], *, extra_columns: Sequence[str] = ("id", "benchmark")) -> Any:
    """A ``datasets.Dataset`` with ``prompt`` (messages), ``rubric`` (JSON text, or the rubric id) and the
    ``extra_columns`` (TRL passes them to reward functions as keyword arguments)."""
    import datasets

    records = []
    for r in rows:
        rubric = r["rubric"]
        record = {"prompt": [dict(m) for m in r["prompt"]],
                  "rubric": rubric if isinstance(rubric, str) else json.dumps(rubric, ensure_ascii=False)}
        for column in extra_columns:
            value = r.get(column)
            record[column] = None if value is None else str(value)
        records.append(record)
    if not records:
        raise ValueError("to_dataset: no rows")
    return datasets.Dataset.from_list(records)
