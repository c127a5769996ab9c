"""What a judge is qualified on: responses grouped as a GRPO step groups them, with optional gold labels.

A :class:`QualifyRow` is one response with its rubric, its group (the responses GRPO compares: one prompt's
completions) and its gold labels per criterion. :func:`load_rows` reads them from JSONL: each line has ``prompt``
(or ``conversation``) and ``response`` (or ``responses``, a list: one group per line), optional ``group`` (default:
the prompt, so repeated prompts form a group), ``id`` and ``labels`` (gold labels, the ``eval`` format).
:func:`match_gold` adds labels from a separate gold file (the ``eval`` format: rows with ``response``, ``prompt``
and ``labels``, matched by ``id``, else by prompt and response). :func:`sample_rows` asks a policy for the
responses instead: ``per_prompt`` sampled completions of each prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...io.rows import DataError, numbered_jsonl_rows
from ...items import Item, as_messages, prompt_key, response_text
from ...rubric import Rubric

__all__ = ["QualifyRow", "load_rows", "match_gold", "sample_rows"]


@dataclass(frozen=True)
class QualifyRow:
    """One response to judge: its rubric, item, group and gold labels (``{criterion: label}``)."""

    rubric: Rubric
    item: Item
    group: str
    gold: Mapping[str, str] = field(default_factory=dict)


def _prompt(row: Mapping[str, Any], where: str) -> Any:
    prompt = row.get("prompt", row.get("conversation"))
    if prompt is None or isinstance(prompt, str):
        return prompt
    try:
        return as_messages(prompt)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{where}: field 'prompt': {exc}") from None


def _gold(rubric: Rubric, raw: Any, where: str) -> dict[str, str]:
    from ..dataset import normalise_label

    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise DataError(f"{where}: field 'labels' must map criterion names to labels")
    out = {}
    for name, value in raw.items():
        try:
            label = normalise_label(rubric[str(name)], value)
        except KeyError:
            raise DataError(f"{where}: field 'labels': rubric {rubric.name!r} has no criterion {name!r}") from None
        except ValueError as exc:
            raise DataError(f"{where}: field 'labels': {exc}") from None
        if label is not None:
            out[str(name)] = label
    return out


def load_rows(source: str | Path | Iterable[Mapping[str, Any]], rubric: Rubric) -> list[QualifyRow]:
    """The responses of a JSONL file, or of mappings of the same fields (see the module docstring), judged against
    ``rubric``."""
    rows: list[QualifyRow] = []
    if isinstance(source, str | Path):
        numbered, name, what = numbered_jsonl_rows(Path(source)), str(source), "line"
    else:
        numbered, name, what = enumerate(source, 1), "responses", "row"
    for n, row in numbered:
        where = f"{name}: {what} {n}"
        prompt = _prompt(row, where)
        texts = row.get("responses", [row["response"]] if "response" in row else None)
        if not isinstance(texts, list) or not texts:
            raise DataError(f"{where}: each row needs a 'response', or 'responses' (a non-empty list)")
        if "responses" in row and "labels" in row:
            raise DataError(f"{where}: field 'labels' goes with one 'response', not with 'responses'")
        group = row.get("group")
        if group is None:
            group = prompt_key(prompt) if prompt is not None else f"{what} {n}"
        if "responses" in row and row.get("group") is None:
            group = f"{what} {n}"
        gold = _gold(rubric, row.get("labels"), where)
        for j, text in enumerate(texts):
            try:
                response = response_text(text)
            except ValueError as exc:
                raise DataError(f"{where}: field 'response': {exc}") from None
            rid = row.get("id")
            rid = None if rid is None else str(rid) if len(texts) == 1 else f"{rid}-{j}"
            rows.append(QualifyRow(rubric, Item(response=response, prompt=prompt, id=rid), str(group), gold))
    if not rows:
        raise DataError(f"{name}: no rows")
    return rows


def match_gold(rows: Sequence[QualifyRow], path: str | Path, rubric: Rubric) -> tuple[list[QualifyRow], int]:
    """``rows`` with the gold labels of an ``eval``-format file added, and how many gold rows matched none."""
    from ..dataset import load_items

    by_id: dict[str, Mapping[str, str]] = {}
    by_text: dict[tuple[str, str], Mapping[str, str]] = {}
    gold_items = load_items(str(path), rubric=rubric)
    for g in gold_items:
        if g.item.id is not None:
            by_id[g.item.id] = g.labels
        by_text[(prompt_key(g.item.prompt) or "", g.item.response)] = g.labels
    out, used = [], set()
    for r in rows:
        labels = by_id.get(r.item.id) if r.item.id is not None else None
        key = (prompt_key(r.item.prompt) or "", r.item.response)
        if labels is None:
            labels = by_text.get(key)
        if labels is not None:
            used.add(id(labels))
            r = replace(r, gold={**r.gold, **labels})
        out.append(r)
    if not used:
        raise DataError(f"{path}: no gold row matches a response (by id, or by prompt and response)")
    return out, sum(1 for g in gold_items if id(g.labels) not in used)


def sample_rows(prompts: Sequence[Mapping[str, Any]], rubric: Rubric | None, *, policy: str, per_prompt: int,
                temperature: float = 1.0, max_new_tokens: int = 256, seed: int = 0, backend: str = "transformers",
                base_url: str | None = None, batch_size: int = 8, dtype: str | None = None,
                progress: bool = True) -> list[QualifyRow]:
    """``per_prompt`` completions of each prompt sampled from ``policy`` at ``temperature``; ``prompts`` are rows
    with ``prompt`` and, when ``rubric`` is None, their own ``rubric``."""
    from ..rollouts import generate_responses

    if per_prompt < 2:
        raise ValueError("sampling responses from a policy needs at least 2 completions per prompt (a group)")
    asked = [p["prompt"] for p in prompts for _ in range(per_prompt)]
    texts = generate_responses(asked, model=policy, backend=backend, base_url=base_url, max_new_tokens=max_new_tokens,
                               batch_size=batch_size, seed=seed, progress=progress, dtype=dtype,
                               temperature=temperature)
    rows = []
    for i, p in enumerate(prompts):
        own = rubric if rubric is not None else p["rubric"]
        own = own if isinstance(own, Rubric) else Rubric.from_obj(own, source=f"prompt {i}: field 'rubric'")
        prompt = p["prompt"] if isinstance(p["prompt"], str) else as_messages(p["prompt"])
        for j in range(per_prompt):
            text = texts[i * per_prompt + j] or ""
            rows.append(QualifyRow(own, Item(response=text, prompt=prompt, id=f"{p.get('id', i)}-{j}"),
                                   str(p.get("id", i))))
    return rows
