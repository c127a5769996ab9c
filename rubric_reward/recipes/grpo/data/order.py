"""The order the trainer meets its training prompts in: TRL's seeded shuffle, or strata taken in turn.

With a handful of prompts per step and a few dozen steps, a plain shuffle gives one run eight prompts of a type
and the next run three, and the gain per type follows that draw. :func:`balanced_order` deals the prompts like
cards: each round takes one prompt of every stratum (instruction type, benchmark) in a seeded order, so every
prefix of the order, and so every run however short, sees the strata in equal shares (to within one round).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from .split import _stratum_key, _stratum_seed

__all__ = ["TRAIN_ORDERS", "balanced_order"]

TRAIN_ORDERS = ("shuffle", "balanced")


def balanced_order(rows: Sequence[Mapping[str, Any]], *, stratify: str | None, seed: int) -> list[Mapping[str, Any]]:
    """``rows`` reordered round-robin over strata (the row key ``stratify``): within a stratum the rows are
    shuffled with a generator seeded by ``(seed, stratum)``, and each round visits the strata still holding rows
    in an order drawn from ``seed``. Deterministic for the same rows and seed; every row appears once."""
    key = _stratum_key(stratify)
    members: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: str(r.get("id"))):
        members[key(row)].append(row)
    for name, group in members.items():
        random.Random(_stratum_seed(seed, name)).shuffle(group)
    rounds = random.Random(seed)
    out: list[Mapping[str, Any]] = []
    while any(members.values()):
        live = sorted(name for name, group in members.items() if group)
        rounds.shuffle(live)
        out.extend(members[name].pop() for name in live)
    return out
