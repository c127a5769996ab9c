"""Ensembles: several votes (judges or samples) on one criterion become one verdict.

Binary criteria: ``majority``, ``weighted``, ``unanimous`` (MET only if every vote is MET) and
``any`` (MET if any vote is MET). Ordinal criteria: ``mean``, ``median`` or ``mode`` of option values,
snapped to the nearest option, with the continuous value kept as ``expected_value``. Nominal
criteria: ``mode``. Abstaining votes are left out of the vote; if every vote abstains, so does the
ensemble. A failed vote fails the ensemble verdict: nothing is renormalised over failures.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from .results import Verdict
from .rubric import Criterion, CriterionKind

__all__ = ["BINARY_METHODS", "ORDINAL_METHODS", "aggregate_votes"]

BINARY_METHODS = ("majority", "weighted", "unanimous", "any")
ORDINAL_METHODS = ("mean", "median", "mode")


def aggregate_votes(
    criterion: Criterion,
    votes: Sequence[Verdict],
    *,
    binary: str = "majority",
    ordinal: str = "mean",
    weights: Sequence[float] | None = None,
) -> Verdict:
    """Combine ``votes`` on ``criterion`` into one verdict (a single vote is returned as is)."""
    if not votes:
        raise ValueError(f"criterion {criterion.name!r}: no votes to aggregate")
    if len(votes) == 1:
        return votes[0]
    weights = list(weights) if weights is not None else [1.0] * len(votes)
    if len(weights) != len(votes):
        raise ValueError(f"criterion {criterion.name!r}: {len(weights)} weights for {len(votes)} votes")
    failed = [v for v in votes if v.error is not None]
    if failed:
        return Verdict(criterion.name, None, None, error=failed[0].error, votes=tuple(votes), judge="ensemble")
    cast = [(v, w) for v, w in zip(votes, weights, strict=True) if not v.abstained and v.value is not None]
    if not cast:
        first = votes[0]
        return Verdict(criterion.name, first.label, None, reason=first.reason, abstained=True,
                       votes=tuple(votes), agreement=1.0, judge="ensemble")

    total_w = sum(w for _, w in cast) or float(len(cast))
    mean_value = sum((v.expected_value if v.expected_value is not None else v.value) * w for v, w in cast) / total_w

    if criterion.kind is CriterionKind.BINARY:
        if binary not in BINARY_METHODS:
            raise ValueError(f"binary aggregation must be one of {BINARY_METHODS}, got {binary!r}")
        met = [v.value == 1.0 for v, _ in cast]
        if binary == "unanimous":
            value = 1.0 if all(met) else 0.0
        elif binary == "any":
            value = 1.0 if any(met) else 0.0
        else:
            use_w = [w for _, w in cast] if binary == "weighted" else [1.0] * len(cast)
            yes = sum(w for m, w in zip(met, use_w, strict=True) if m)
            no = sum(w for m, w in zip(met, use_w, strict=True) if not m)
            # A tie is resolved against the response: a positive criterion stays unmet, a penalty fires.
            value = 1.0 if yes > no or (yes == no and criterion.weight < 0) else 0.0
        label = next(o.label for o in criterion.options if o.value == value)
    else:
        method = "mode" if criterion.kind is CriterionKind.NOMINAL else ordinal
        if method not in ORDINAL_METHODS:
            raise ValueError(f"ordinal aggregation must be one of {ORDINAL_METHODS}, got {method!r}")
        if method == "mode":
            tally: dict[str, float] = {}
            for v, w in cast:
                tally[v.label] = tally.get(v.label, 0.0) + w
            best = max(tally.values())
            tied = [o for o in criterion.options if tally.get(o.label) == best]
            option = min(tied, key=lambda o: o.value) if criterion.weight >= 0 else max(tied, key=lambda o: o.value)
        else:
            target = mean_value if method == "mean" else statistics.median(v.value for v, _ in cast)
            option = min(criterion.options, key=lambda o: (abs(o.value - target), o.value))
        label, value = option.label, option.value

    agreement = sum(w for v, w in cast if v.label == label) / total_w
    reasons = [v.reason for v, _ in cast if v.label == label and v.reason]
    return Verdict(
        criterion.name, label, value, reason=reasons[0] if reasons else "", judge="ensemble",
        expected_value=mean_value, votes=tuple(votes), agreement=agreement,
    )
