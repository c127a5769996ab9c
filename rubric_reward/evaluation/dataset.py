"""Evaluation datasets: rows from JSONL, CSV or a Hugging Face dataset become :class:`EvalItem` s.

Each row holds a prompt (string or messages) or a conversation, a response, a rubric (inline, or an
id into a rubric library, or the run's default rubric), optional human labels per criterion and an
optional group id (e.g. the student a response belongs to). Column names are configurable with
:class:`FieldMap`. Every error names the source, the line of a JSONL or CSV file (the row of a dataset
or a list, from 0) and the field.

Labels are given as a mapping ``{criterion: label}`` (a JSON string in CSV), or as flat columns
``<label_prefix><criterion>``. A label is an option label (case-insensitive), the abstention label,
or for binary criteria a boolean / 1 / 0 / yes / no; for option criteria an option's value also works.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..items import Item, as_messages, response_text
from ..io.rows import DataError, located_rows
from ..rubric import MET, UNMET, Criterion, CriterionKind, Rubric, RubricError, load_rubric, load_rubrics

__all__ = ["EvalItem", "FieldMap", "load_items", "normalise_label"]


@dataclass(frozen=True, slots=True)
class FieldMap:
    """Which column holds what. ``label_prefix`` enables flat label columns (``label.clarity``)."""

    id: str = "id"
    prompt: str = "prompt"
    conversation: str = "conversation"
    response: str = "response"
    rubric: str = "rubric"
    rubric_id: str = "rubric_id"
    labels: str = "labels"
    label_prefix: str | None = None
    group: str = "group"


@dataclass(frozen=True, slots=True)
class EvalItem:
    """One response to judge, with its rubric and optional human labels."""

    row: int
    item: Item
    rubric: Rubric
    labels: Mapping[str, str] = field(default_factory=dict)
    group: str | None = None
    where: str | None = None  # the row in its source, for messages: "items.jsonl: line 3"

    @property
    def id(self) -> str | None:
        return self.item.id


# ---------------------------------------------------------------------------- rows -> items
def load_items(
    source: Any,
    fields: FieldMap = FieldMap(),
    *,
    rubric: Rubric | str | Path | None = None,
    rubrics: Mapping[str, Rubric] | str | Path | None = None,
    limit: int | None = None,
) -> list[EvalItem]:
    """Read and validate every row. ``rubric`` is the default; ``rubrics`` a library for ``rubric_id``."""
    name, rows = located_rows(source)
    default = load_rubric(rubric) if rubric is not None else None
    library = load_rubrics(rubrics) if isinstance(rubrics, str | Path) else dict(rubrics or {})
    inline_cache: dict[str, Rubric] = {}
    items: list[EvalItem] = []
    seen_ids: dict[str, str] = {}
    for row_no, (at, row) in enumerate(rows):
        if limit is not None and len(items) >= limit:
            break
        where = f"{name}: {at}"
        item = _item(row, row_no, where, fields, default, library, inline_cache)
        if item.id is not None:
            if item.id in seen_ids:
                raise DataError(f"{where}: field {fields.id!r}: id {item.id!r} already used by {seen_ids[item.id]}")
            seen_ids[item.id] = at
        items.append(item)
    if not items:
        raise DataError(f"{name}: no rows")
    return items


def _item(row: Mapping[str, Any], row_no: int, where: str, f: FieldMap, default: Rubric | None,
          library: Mapping[str, Rubric], inline_cache: dict[str, Rubric]) -> EvalItem:
    def get(key: str) -> Any:
        value = row.get(key)
        return None if value is None or (isinstance(value, str) and value == "") else value

    raw_response = get(f.response)
    if raw_response is None:
        raise DataError(f"{where}: field {f.response!r} is missing or empty")
    try:
        response = response_text(_maybe_json(raw_response, list))
    except ValueError as exc:
        raise DataError(f"{where}: field {f.response!r}: {exc}") from None

    prompt: Any = get(f.prompt)
    prompt_field = f.prompt
    if prompt is None and get(f.conversation) is not None:
        prompt, prompt_field = get(f.conversation), f.conversation
    if prompt is not None:
        prompt = _maybe_json(prompt, list)
        if not isinstance(prompt, str):
            try:
                prompt = as_messages(prompt)
            except (ValueError, TypeError) as exc:
                raise DataError(f"{where}: field {prompt_field!r}: {exc}") from None

    raw_id, group = get(f.id), get(f.group)
    rubric = _rubric(get(f.rubric), get(f.rubric_id), where, f, default, library, inline_cache)
    labels = _labels(row, rubric, where, f)
    try:
        item = Item(response=response, prompt=prompt, id=None if raw_id is None else str(raw_id))
    except ValueError as exc:
        raise DataError(f"{where}: {exc}") from None
    return EvalItem(row_no, item, rubric, labels, None if group is None else str(group), where)


def _maybe_json(value: Any, want: type) -> Any:
    """CSV cells and AdvancedIF columns hold JSON as text: decode when it parses to ``want``."""
    if isinstance(value, str) and value.lstrip()[:1] in "[{":
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        return decoded if isinstance(decoded, want) else value
    return value


def _rubric(inline: Any, rubric_id: Any, where: str, f: FieldMap, default: Rubric | None,
            library: Mapping[str, Rubric], cache: dict[str, Rubric]) -> Rubric:
    if inline is not None:
        if isinstance(inline, str):
            try:
                inline = json.loads(inline)
            except json.JSONDecodeError:
                raise DataError(f"{where}: field {f.rubric!r}: not valid JSON") from None
        try:
            blob = json.dumps(inline, sort_keys=True, ensure_ascii=False)
        except TypeError:
            raise DataError(f"{where}: field {f.rubric!r}: not a JSON-like rubric") from None
        if blob not in cache:
            try:
                cache[blob] = Rubric.from_obj(inline, source=f"{where}: field {f.rubric!r}")
            except RubricError as exc:
                raise DataError(str(exc)) from None
        return cache[blob]
    if rubric_id is not None:
        if not library:
            raise DataError(f"{where}: field {f.rubric_id!r} is {rubric_id!r} but no rubric library is configured")
        rubric = library.get(str(rubric_id))
        if rubric is None:
            raise DataError(f"{where}: field {f.rubric_id!r}: unknown rubric id {rubric_id!r}; "
                            f"known: {sorted(library)[:20]}")
        return rubric
    if default is None:
        raise DataError(f"{where}: no rubric: fields {f.rubric!r} and {f.rubric_id!r} are empty and no default "
                        "rubric is configured")
    return default


def _labels(row: Mapping[str, Any], rubric: Rubric, where: str, f: FieldMap) -> dict[str, str]:
    raw: dict[str, Any] = {}
    field_of: dict[str, str] = {}
    value = row.get(f.labels)
    if value is not None and value != "":
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise DataError(f"{where}: field {f.labels!r}: not valid JSON") from None
        if not isinstance(value, Mapping):
            raise DataError(f"{where}: field {f.labels!r} must map criterion names to labels, "
                            f"got {type(value).__name__}")
        for k, v in value.items():
            raw[str(k)], field_of[str(k)] = v, f.labels
    if f.label_prefix:
        for column, v in row.items():
            if isinstance(column, str) and column.startswith(f.label_prefix):
                name = column[len(f.label_prefix):]
                raw[name], field_of[name] = v, column
    out: dict[str, str] = {}
    for name, v in raw.items():
        try:
            criterion = rubric[name]
        except KeyError:
            raise DataError(f"{where}: field {field_of[name]!r}: rubric {rubric.name!r} has no criterion {name!r}; "
                            f"criteria: {[c.name for c in rubric.criteria]}") from None
        try:
            label = normalise_label(criterion, v)
        except ValueError as exc:
            raise DataError(f"{where}: field {field_of[name]!r}: {exc}") from None
        if label is not None:
            out[name] = label
    return out


_TRUE = {"true", "yes", "y", "1", "met", "pass", "passed"}
_FALSE = {"false", "no", "n", "0", "unmet", "fail", "failed"}


def normalise_label(criterion: Criterion, raw: Any) -> str | None:
    """A human label as one of the criterion's labels; None for a missing label."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    labels = criterion.labels if criterion.is_judged else (MET, UNMET)
    if isinstance(raw, str):
        wanted = raw.strip()
        folded = [lab for lab in labels if lab.casefold() == wanted.casefold()]
        if len(folded) == 1:
            return folded[0]
    binary = criterion.kind in (CriterionKind.BINARY, CriterionKind.CHECK)
    if binary:
        if isinstance(raw, bool) or (isinstance(raw, int | float) and raw in (0, 1)):
            return MET if raw else UNMET
        if isinstance(raw, str) and raw.strip().casefold() in _TRUE | _FALSE:
            return MET if raw.strip().casefold() in _TRUE else UNMET
    elif not isinstance(raw, bool):
        number = raw
        if isinstance(raw, str):
            try:
                number = float(raw)
            except ValueError:
                number = None
        if isinstance(number, int | float):
            matches = [o.label for o in criterion.options if abs(o.value - number) < 1e-9]
            if len(matches) == 1:
                return matches[0]
    raise ValueError(f"{raw!r} is not a label of criterion {criterion.name!r}; expected one of {list(labels)}")
