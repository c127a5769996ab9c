"""Prompts to write rubrics for: :class:`PromptRow` and :func:`load_prompts` (a JSONL file or a list)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .templates import task_text

__all__ = ["PromptRow", "load_prompts"]


@dataclass(frozen=True, slots=True)
class PromptRow:
    """One prompt to write a rubric for: ``prompt`` is a string or chat messages. ``labels`` (optional):
    labelled response pairs ``{"response_a", "response_b", "winner"}`` for the outcome meta-judge.
    ``instructions`` (optional): the prompt's verifiable instructions as checks ``{"check", "kwargs"}``."""

    id: str
    prompt: Any
    labels: tuple[Mapping[str, Any], ...] = ()
    instructions: tuple[Mapping[str, Any], ...] = ()


def load_prompts(source: str | Path | Sequence[Any]) -> list[PromptRow]:
    """Prompts from a JSONL file (field ``prompt``, ``conversation`` or ``messages``; optional ``id``)
    or from a list of strings / mappings. Errors name the file and line."""
    from ..io.rows import DataError, numbered_jsonl_rows

    where = str(source) if isinstance(source, str | Path) else "prompts"
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such prompts file")
        try:
            rows = list(numbered_jsonl_rows(path))
        except DataError as exc:
            raise ValueError(str(exc)) from None
        label = "line"
    else:
        rows = [(n, {"prompt": r} if isinstance(r, str) else
                 {"id": r.id, "prompt": r.prompt, "labels": list(r.labels), "instructions": list(r.instructions)}
                 if isinstance(r, PromptRow) else r)
                for n, r in enumerate(source, 1)]
        bad = next((n for n, r in rows if not isinstance(r, Mapping)), None)
        if bad is not None:
            raise ValueError(f"prompts: row {bad}: expected a string, a PromptRow or a mapping with 'prompt'")
        label = "row"
    out, seen = [], set()
    for k, (n, row) in enumerate(rows, 1):  # n: the line (file) or row; k numbers default ids
        prompt = next((row[f] for f in ("prompt", "conversation", "messages") if row.get(f) not in (None, "", [])),
                      None)
        if prompt is None:
            raise ValueError(f"{where}: {label} {n}: no prompt (expected a non-empty field 'prompt', "
                             "'conversation' or 'messages')")
        try:
            task_text(prompt)
        except ValueError as exc:
            raise ValueError(f"{where}: {label} {n}: {exc}") from None
        pid = str(row.get("id", f"row{k}"))
        if pid in seen:
            raise ValueError(f"{where}: {label} {n}: duplicate id {pid!r}")
        seen.add(pid)
        labels = row.get("labels") or ()
        if not isinstance(labels, list | tuple) or not all(isinstance(x, Mapping) for x in labels):
            raise ValueError(f"{where}: {label} {n}: field 'labels' must be a list of labelled response pairs")
        instructions = row.get("instructions") or ()
        if not isinstance(instructions, list | tuple) or not all(isinstance(x, Mapping) and "check" in x
                                                                 for x in instructions):
            raise ValueError(f"{where}: {label} {n}: field 'instructions' must be a list of {{check, kwargs}}")
        out.append(PromptRow(pid, prompt, tuple(labels), tuple(instructions)))
    if not out:
        raise ValueError(f"{where}: no prompts")
    return out


