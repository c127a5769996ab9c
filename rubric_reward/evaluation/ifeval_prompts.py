"""Load IFEval prompts, pair them with responses, and express them as checks or as a rubric of checks.

The 541 prompts ship with the package (``rubric_reward/data/ifeval``), so IFEval
runs offline; a JSONL path with the same fields or the Hugging Face name
``"google/IFEval"`` also work.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks.ifeval import get_checker
from ..io.rows import numbered_jsonl_rows
from ..rubric import Rubric

__all__ = [
    "HF_DATASET",
    "PACKAGED_PATH",
    "IFEvalRow",
    "ifeval_row_to_checks",
    "ifeval_row_to_rubric",
    "load_ifeval",
    "match_responses",
]

HF_DATASET = "google/IFEval"
PACKAGED_PATH = Path(__file__).resolve().parent.parent / "data" / "ifeval" / "ifeval_input_data.jsonl"


@dataclass(frozen=True)
class IFEvalRow:
    """One IFEval prompt; ``kwargs[i]`` (``None`` values dropped) goes with ``instruction_id_list[i]``."""

    key: int
    prompt: str
    instruction_id_list: tuple[str, ...]
    kwargs: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSONL input-row form."""
        return {
            "key": self.key,
            "prompt": self.prompt,
            "instruction_id_list": list(self.instruction_id_list),
            "kwargs": [dict(k) for k in self.kwargs],
        }


def _parse_row(obj: Any, where: str) -> IFEvalRow:
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    for name in ("key", "prompt", "instruction_id_list", "kwargs"):
        if name not in obj:
            raise ValueError(f"{where}: missing field {name!r}")
    key, prompt, ids, kwargs = obj["key"], obj["prompt"], obj["instruction_id_list"], obj["kwargs"]
    if not isinstance(key, int) or isinstance(key, bool):
        raise ValueError(f"{where}: field 'key' must be an integer, got {key!r}")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"{where}: field 'prompt' must be a non-empty string")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{where}: field 'instruction_id_list' must be a list of strings")
    if not isinstance(kwargs, list) or len(kwargs) != len(ids):
        raise ValueError(
            f"{where}: field 'kwargs' must be a list with one entry per instruction id ({len(ids)})"
        )
    cleaned = []
    for index, (instruction_id, entry) in enumerate(zip(ids, kwargs)):
        if entry is not None and not isinstance(entry, Mapping):
            raise ValueError(f"{where}: field 'kwargs[{index}]' must be an object or null")
        entry = {k: v for k, v in (entry or {}).items() if v is not None}
        try:
            get_checker(instruction_id).validate(entry, prompt)
        except ValueError as exc:
            raise ValueError(f"{where}: field 'instruction_id_list[{index}]'/'kwargs[{index}]': {exc}") from None
        cleaned.append(entry)
    return IFEvalRow(key=key, prompt=prompt, instruction_id_list=tuple(ids), kwargs=tuple(cleaned))


def _load_hub(name: str) -> list[tuple[str, Any]]:
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise ImportError(
            f"loading {name!r} from the Hugging Face hub needs the 'datasets' package "
            "(pip install 'rubric-reward[train]'); call load_ifeval() with no argument "
            "for the packaged copy"
        ) from exc
    try:
        dataset = load_dataset(name, split="train")
    except Exception as exc:  # offline, missing, or auth: one clear message
        raise RuntimeError(
            f"could not load {name!r} from the Hugging Face hub ({type(exc).__name__}: {exc}); "
            "call load_ifeval() with no argument for the packaged copy"
        ) from exc
    return [(f"{name} row {index}", record) for index, record in enumerate(dataset)]


def load_ifeval(path_or_name: str | os.PathLike[str] | None = None) -> list[IFEvalRow]:
    """Load and validate IFEval rows.

    ``None``: the packaged 541 prompts.  ``"google/IFEval"``: the hub dataset
    (needs ``datasets`` and a network).  Anything else: a JSONL file with
    fields ``key``, ``prompt``, ``instruction_id_list``, ``kwargs``.  Errors name
    the line (or row) and field; keys must be unique.
    """
    if path_or_name is None:
        path_or_name = PACKAGED_PATH
    if str(path_or_name) == HF_DATASET:
        records = _load_hub(HF_DATASET)
    else:
        path = Path(path_or_name)
        if not path.is_file():
            raise FileNotFoundError(f"no IFEval JSONL file at {path}")
        records = [(f"{path}: line {n}", obj) for n, obj in numbered_jsonl_rows(path)]
    rows: list[IFEvalRow] = []
    seen: dict[int, str] = {}
    for where, obj in records:
        row = _parse_row(obj, where)
        if row.key in seen:
            raise ValueError(f"{where}: duplicate key {row.key} (first at {seen[row.key]})")
        seen[row.key] = where
        rows.append(row)
    if not rows:
        raise ValueError(f"no IFEval rows in {path_or_name}")
    return rows


def match_responses(
    rows: Iterable[IFEvalRow],
    responses: Iterable[Mapping[str, Any]] | str | os.PathLike[str],
    *,
    allow_missing: bool = False,
) -> list[tuple[IFEvalRow, str]]:
    """Pair each input row with its response, in input order.

    ``responses`` holds ``{"key", "response"}`` or ``{"prompt", "response"}``
    records (or is a JSONL path of them).  A record is matched by ``key`` when it
    has one, else by exact prompt text.  Raises ``ValueError`` for a record that
    matches no row, two records for one row, or (unless ``allow_missing``) a row
    without a response.
    """
    rows = list(rows)
    by_key = {row.key: row for row in rows}
    by_prompt = {row.prompt: row for row in rows}
    if isinstance(responses, (str, os.PathLike)):
        path = Path(responses)
        records: Iterable[tuple[str, Any]] = [(f"{path}: line {n}", o) for n, o in numbered_jsonl_rows(path)]
    else:
        records = ((f"response record {i}", o) for i, o in enumerate(responses))

    matched: dict[int, str] = {}
    for where, record in records:
        if not isinstance(record, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(record).__name__}")
        response = record.get("response")
        if not isinstance(response, str):
            raise ValueError(f"{where}: field 'response' must be a string")
        key, prompt = record.get("key"), record.get("prompt")
        if key is not None:
            row = by_key.get(key)
            if row is None:
                raise ValueError(f"{where}: key {key!r} matches no IFEval row")
            if prompt is not None and prompt != row.prompt:
                raise ValueError(f"{where}: prompt differs from the prompt of key {key!r}")
        elif prompt is not None:
            row = by_prompt.get(prompt)
            if row is None:
                raise ValueError(f"{where}: prompt matches no IFEval row: {prompt[:80]!r}")
        else:
            raise ValueError(f"{where}: needs a 'key' or a 'prompt' field")
        if row.key in matched:
            raise ValueError(f"{where}: a second response for key {row.key}")
        matched[row.key] = response

    missing = [row.key for row in rows if row.key not in matched]
    if missing and not allow_missing:
        raise ValueError(f"{len(missing)} IFEval row(s) have no response, e.g. keys {missing[:5]}")
    return [(row, matched[row.key]) for row in rows if row.key in matched]


def ifeval_row_to_checks(row: IFEvalRow | Mapping[str, Any]) -> list[dict[str, Any]]:
    """One ``{"check": "ifeval:<instruction_id>", "kwargs": {...}}`` per instruction (``None`` kwargs dropped)."""
    if isinstance(row, Mapping):
        ids = list(row["instruction_id_list"])
        kwargs = list(row.get("kwargs") or [{}] * len(ids))
    else:
        ids, kwargs = list(row.instruction_id_list), list(row.kwargs)
    if len(kwargs) != len(ids):
        raise ValueError(f"{len(ids)} instruction ids but {len(kwargs)} kwargs entries")
    return [
        {"check": f"ifeval:{instruction_id}", "kwargs": {k: v for k, v in (entry or {}).items() if v is not None}}
        for instruction_id, entry in zip(ids, kwargs)
    ]


def ifeval_row_to_rubric(row: IFEvalRow | Mapping[str, Any], *, loose: bool = False,
                         extra_criteria: Sequence[Mapping[str, Any]] = ()) -> Rubric:
    """A rubric with one check criterion per IFEval instruction of ``row`` (plus any extra criteria)."""
    checks = ifeval_row_to_checks(row)
    family = "ifeval_loose" if loose else "ifeval"
    names = [c["check"].split(":", 1)[1] for c in checks]
    criteria = [
        {"name": name if names.count(name) == 1 else f"{name}#{i + 1}",
         "check": c["check"].replace("ifeval:", f"{family}:", 1), "kwargs": c["kwargs"]}
        for i, (name, c) in enumerate(zip(names, checks, strict=True))
    ]
    key = row["key"] if isinstance(row, Mapping) else getattr(row, "key", "ifeval")
    return Rubric.from_obj({"name": f"ifeval-{key}", "criteria": [*criteria, *extra_criteria]})
