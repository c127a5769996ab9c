"""The seeded, stratified, disjoint train / selection / report split of prompt rows.

**train**: the policy learns on it. **selection**: the checkpoint monitor scores it and picks the best
checkpoint. **report**: the final base-vs-best comparison, never used for picking.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .rows import PromptRows

__all__ = ["SPLITS", "Size", "Splits", "split_rows"]

SPLITS = ("train", "selection", "report")
Size = int | float | str


@dataclass(frozen=True)
class Splits:
    """Disjoint train / selection / report rows, with the settings that made them.

    ``unused`` holds rows left over when no size was ``"rest"``; ``source`` describes the rows split
    (:meth:`PromptRows.describe`) when known.
    """

    train: list[dict[str, Any]]
    selection: list[dict[str, Any]]
    report: list[dict[str, Any]]
    seed: int = 0
    stratify: str | None = "benchmark"
    unused: list[dict[str, Any]] = field(default_factory=list)
    source: str | None = None

    def __getitem__(self, name: str) -> list[dict[str, Any]]:
        if name not in SPLITS:
            raise KeyError(f"no split {name!r}; splits are {SPLITS}")
        return getattr(self, name)

    def ids(self, name: str) -> list[str]:
        return [r["id"] for r in self[name]]

    def counts(self) -> dict[str, dict[str, int]]:
        """Rows per split and per stratum: ``{"train": {"bench": n, ...}, ...}``."""
        key = self.stratify
        return {s: dict(sorted(Counter(str(r.get(key)) if key else "all" for r in self[s]).items())) for s in SPLITS}

    def describe(self) -> str:
        sizes = " / ".join(f"{len(self[s])} {s}" for s in SPLITS)
        text = f"{sizes} (seed {self.seed}, stratified by {self.stratify or 'nothing'})" + (
            f", {len(self.unused)} unused" if self.unused else "")
        return text + (f" of {self.source}" if self.source else "")

    def manifest(self) -> dict[str, Any]:
        """JSON-able record of the split (ids per split, counts, seed) for the run folder."""
        return {"seed": self.seed, "stratify": self.stratify, "source": self.source, "counts": self.counts(),
                **{f"{s}_ids": self.ids(s) for s in SPLITS}, "unused_ids": [r["id"] for r in self.unused]}

    def write_manifest(self, path: str | Path) -> Path:
        from ....io.journal import write_atomic

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(self.manifest(), indent=2, ensure_ascii=False) + "\n")
        return path


def split_rows(
    rows: Sequence[Mapping[str, Any]],
    *,
    train: Size = "rest",
    selection: Size = 81,
    report: Size = 81,
    seed: int = 0,
    stratify: str | Callable[[Mapping[str, Any]], Any] | None = "benchmark",
) -> Splits:
    """Seeded, stratified, disjoint, deterministic train / selection / report split.

    Sizes are counts (int), fractions of all rows (float in (0, 1), rounded), or ``"rest"`` (at most one).
    Each size is shared out over the strata (``stratify``: a row key, a function of the row, or None)
    in proportion to the rows each has left (largest remainder, ties by stratum name). Within a stratum the rows
    are ordered by id and shuffled with a generator seeded by ``(seed, stratum)``; selection takes the
    first rows, report the next, train the ones after. So the result does not depend on row order, and
    changing the train size never changes the selection or report rows. Rows need unique ``id`` s.
    Raises ValueError when the sizes do not fit.
    """
    rows_in, rows = rows, list(rows)
    n = len(rows)
    if n == 0:
        raise ValueError("split_rows: no rows")
    ids = [r.get("id") for r in rows]
    if any(i is None for i in ids) or len(set(ids)) != n:
        dup = [i for i, c in Counter(ids).items() if c > 1][:3]
        raise ValueError(f"split_rows: every row needs a unique 'id' (missing or repeated, e.g. {dup})")
    requested = {"selection": selection, "report": report, "train": train}
    rest = [s for s, v in requested.items() if v == "rest"]
    if len(rest) > 1:
        raise ValueError(f"split_rows: only one size may be 'rest', got {rest}")
    counts = {s: _count(s, v, n) for s, v in requested.items() if v != "rest"}
    if sum(counts.values()) > n:
        raise ValueError(f"split_rows: sizes {counts} add up to {sum(counts.values())}, more than the {n} rows")

    key_of = _stratum_key(stratify)
    strata: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        strata.setdefault(key_of(r), []).append(r)
    for name, members in strata.items():
        members.sort(key=lambda r: str(r["id"]))
        random.Random(_stratum_seed(seed, name)).shuffle(members)

    available = {name: len(members) for name, members in strata.items()}
    taken: dict[str, dict[str, int]] = {}
    for s in ("selection", "report", "train"):
        if s in counts:
            taken[s] = _allocate(counts[s], available)
            for name, k in taken[s].items():
                available[name] -= k
    out: dict[str, list[dict[str, Any]]] = {s: [] for s in (*SPLITS, "unused")}
    for name in sorted(strata):
        members, start = strata[name], 0
        for s in ("selection", "report", "train"):
            k = available[name] if s in rest else taken.get(s, {}).get(name, 0)
            out[s] += [dict(r) for r in members[start:start + k]]
            start += k
        out["unused"] += [dict(r) for r in members[start:]]
    stratify_name = stratify if isinstance(stratify, str) or stratify is None else getattr(stratify, "__name__", "fn")
    source = rows_in.describe() if isinstance(rows_in, PromptRows) else None
    return Splits(out["train"], out["selection"], out["report"], seed, stratify_name, out["unused"], source)


def _count(name: str, value: Size, n: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"split_rows: {name} must be a count, a fraction or 'rest', got {value!r}")
    if isinstance(value, float):
        if not 0 < value < 1:
            raise ValueError(f"split_rows: {name} fraction must be in (0, 1), got {value}")
        return int(math.floor(value * n + 0.5))
    if value < 0:
        raise ValueError(f"split_rows: {name} must not be negative, got {value}")
    return value


def _stratum_key(stratify: str | Callable[[Mapping[str, Any]], Any] | None) -> Callable[[Mapping[str, Any]], str]:
    if stratify is None:
        return lambda r: "all"
    if callable(stratify):
        return lambda r: str(stratify(r))
    return lambda r: str(r.get(stratify))


def _stratum_seed(seed: int, stratum: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}\0{stratum}".encode()).digest()[:8], "big")


def _allocate(k: int, available: Mapping[str, int]) -> dict[str, int]:
    """Share ``k`` over strata in proportion to the rows each still has (largest remainder)."""
    total = sum(available.values())
    if k > total:
        raise ValueError(f"split_rows: cannot take {k} rows, only {total} left")
    quota = {name: k * a / max(total, 1) for name, a in available.items()}
    alloc = {name: min(int(math.floor(q)), available[name]) for name, q in quota.items()}
    order = sorted(available, key=lambda name: (-(quota[name] - math.floor(quota[name])), name))
    while sum(alloc.values()) < k:
        progressed = False
        for name in order:
            if sum(alloc.values()) >= k:
                break
            if alloc[name] < available[name]:
                alloc[name] += 1
                progressed = True
        if not progressed:  # cannot happen: k <= total
            raise ValueError("split_rows: allocation failed")
    return alloc
