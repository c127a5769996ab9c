"""Few-shot calibration: labelled exemplars per criterion, balanced so no base rate shows.

A :class:`FewShotSampler` is built from labelled rows ``(response, criterion, label, reason)`` and
is called as ``sampler(criterion, judge_name)`` (the grader's ``exemplars=`` accepts it). For each
(criterion, judge) it draws once, deterministically from (seed, criterion, judge):

* only labels the criterion offers count (rows with other labels are ignored when the criterion is
  known), and at least two distinct labels must be present, else no exemplars are shown;
* every present label gets the same number of exemplars: ``k // n_labels`` (at least one), lowered
  to the scarcest label's count, so the judge cannot read a base rate off the prompt;
* exemplars are sampled without replacement within a label and shown in a shuffled order.

Use labelled examples held out from what is being judged.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..rubric import Criterion
from .criterion_prompt import Exemplar

__all__ = ["FewShotSampler", "LabelledExample"]


@dataclass(frozen=True, slots=True)
class LabelledExample:
    response: str
    criterion: str
    label: str
    reason: str = ""


def _as_example(row: Any, i: int) -> LabelledExample:
    if isinstance(row, LabelledExample):
        return row
    if isinstance(row, Mapping):
        missing = [f for f in ("response", "criterion", "label") if f not in row]
        if missing:
            raise ValueError(f"labelled example {i}: missing field(s) {missing}")
        return LabelledExample(str(row["response"]), str(row["criterion"]), str(row["label"]),
                               str(row.get("reason") or ""))
    if isinstance(row, Sequence) and not isinstance(row, str) and len(row) in (3, 4):
        return LabelledExample(*(str(x) for x in row))
    raise ValueError(f"labelled example {i}: expected (response, criterion, label[, reason]) or a mapping")


class FewShotSampler:
    """Balanced, deterministic exemplars per (criterion, judge); see the module docstring."""

    def __init__(self, examples: Iterable[Any], *, k: int = 4, seed: int = 0):
        if k < 1:
            raise ValueError(f"FewShotSampler: k must be >= 1, got {k}")
        self.k = k
        self.seed = seed
        self._by_criterion: dict[str, dict[str, list[LabelledExample]]] = {}
        for i, row in enumerate(examples):
            ex = _as_example(row, i)
            self._by_criterion.setdefault(ex.criterion, {}).setdefault(ex.label, []).append(ex)
        self._drawn: dict[tuple[str, str], tuple[Exemplar, ...]] = {}

    def __call__(self, criterion: Criterion | str, judge: str = "") -> tuple[Exemplar, ...]:
        name = criterion if isinstance(criterion, str) else criterion.name
        key = (name, judge)
        drawn = self._drawn.get(key)
        if drawn is None:
            allowed = None if isinstance(criterion, str) else set(criterion.labels)
            drawn = self._drawn[key] = self._draw(name, judge, allowed)
        return drawn

    def _draw(self, name: str, judge: str, allowed: set[str] | None) -> tuple[Exemplar, ...]:
        pools = {label: rows for label, rows in self._by_criterion.get(name, {}).items()
                 if allowed is None or label in allowed}
        if len(pools) < 2:
            return ()
        digest = hashlib.blake2b(f"{self.seed}\x1f{name}\x1f{judge}".encode(), digest_size=8).digest()
        rng = random.Random(int.from_bytes(digest, "big"))
        per_label = min(max(1, self.k // len(pools)), *(len(rows) for rows in pools.values()))
        chosen = [ex for label in sorted(pools) for ex in rng.sample(pools[label], per_label)]
        rng.shuffle(chosen)
        return tuple(Exemplar(ex.response, ex.label, ex.reason) for ex in chosen)

    def labels(self, criterion: str) -> dict[str, int]:
        """How many labelled examples each label has for ``criterion``."""
        return {label: len(rows) for label, rows in self._by_criterion.get(criterion, {}).items()}
