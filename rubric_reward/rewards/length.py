"""Length penalties per sample: the fixed one, and the group-relative one (a group's passing lengths).

A group-relative penalty asks each completion to be no longer than what the passing completions of its
own prompt needed: the reference is the ``quantile`` of their lengths, and the penalty grows from there
to ``penalty`` at ``cap_ratio`` times the reference. A group where nothing passes has no reference and
is not penalised (shortening a wrong answer is not the lesson); unscored and guarded completions are
neither penalised nor counted as passing.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from .config import LengthPenalty

__all__ = ["length_penalties", "quantile"]


def quantile(xs: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (linear interpolation between order statistics)."""
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def length_penalties(config: LengthPenalty, lengths: Sequence[int], scores: Sequence[float | None],
                     groups: Sequence[Hashable]) -> list[float]:
    """The penalty of each sample: ``scores`` are the judged scores (None: unscored or guarded, never
    penalised), ``groups`` a key per sample (the prompt)."""
    if not config.enabled:
        return [0.0] * len(lengths)
    if config.reference == "fixed":
        return [0.0 if s is None else config(n) for n, s in zip(lengths, scores, strict=True)]
    passing: dict[Hashable, list[int]] = {}
    for n, s, g in zip(lengths, scores, groups, strict=True):
        if s is not None and s >= config.pass_score - 1e-9:
            passing.setdefault(g, []).append(n)
    out = []
    for n, s, g in zip(lengths, scores, groups, strict=True):
        if s is None or g not in passing:
            out.append(0.0)
            continue
        free = max(1.0, quantile(passing[g], config.quantile))
        out.append(config(n, free=free, cap=free * config.cap_ratio))
    return out
