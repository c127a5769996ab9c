"""Ensembles: several votes (judges or samples) on one criterion become one verdict.

Binary criteria: ``majority`` (one vote each), ``weighted`` (judge weights), ``unanimous`` (MET
only if every vote is MET) and ``any`` (MET if any vote is MET); a tie goes against the response
(a positive criterion stays UNMET, a penalty fires). Ordinal criteria: weighted ``mean``, weighted
``median`` or weighted ``mode`` of option values, snapped to the nearest option (a tie again goes
against the response), with the continuous mean kept as ``expected_value``. Nominal criteria:
``mode``. A vote's continuous value (logprob ``expected_value``) feeds the mean where present.
Judges of weight 0 are observers: their votes are recorded but not counted (unless all are 0).

Abstaining votes are left out of the vote; if every vote abstains, so does the ensemble.
``agreement`` is the weight share of all votes (abstentions included) that chose the final label.
A failed vote fails the ensemble verdict: nothing is renormalised over failures.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..results import Verdict
from ..rubric import Criterion, CriterionKind

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
    if binary not in BINARY_METHODS:
        raise ValueError(f"binary aggregation must be one of {BINARY_METHODS}, got {binary!r}")
    if ordinal not in ORDINAL_METHODS:
        raise ValueError(f"ordinal aggregation must be one of {ORDINAL_METHODS}, got {ordinal!r}")
    if not votes:
        raise ValueError(f"criterion {criterion.name!r}: no votes to aggregate")
    if len(votes) == 1:
        return votes[0]
    weights = list(weights) if weights is not None else [1.0] * len(votes)
    if len(weights) != len(votes):
        raise ValueError(f"criterion {criterion.name!r}: {len(weights)} weights for {len(votes)} votes")
    if any(w < 0 for w in weights):
        raise ValueError(f"criterion {criterion.name!r}: judge weights must be >= 0")
    if not any(weights):
        weights = [1.0] * len(votes)  # all-zero weights: count the votes equally
    failed = [v for v in votes if v.error is not None]
    if failed:
        return Verdict(criterion.name, None, None, error=failed[0].error, votes=tuple(votes), judge="ensemble")
    cast = [(v, w) for v, w in zip(votes, weights, strict=True) if not v.abstained and v.value is not None]
    if not cast:
        first = votes[0]
        return Verdict(criterion.name, first.label, None, reason=first.reason, abstained=True,
                       votes=tuple(votes), agreement=1.0, judge="ensemble")

    if any(w for _, w in cast):
        cast = [(v, w) for v, w in cast if w > 0]  # zero-weight judges are observers: recorded, not counted
    else:  # only zero-weight judges voted: count them equally
        cast = [(v, 1.0) for v, _ in cast]
        weights = [1.0] * len(votes)
    total_w = sum(w for _, w in cast)
    mean_value = sum((v.expected_value if v.expected_value is not None else v.value) * w for v, w in cast) / total_w
    against = criterion.weight < 0  # ties go against the response: towards the higher value for a penalty

    if criterion.kind is CriterionKind.BINARY:
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
            value = 1.0 if yes > no or (yes == no and against) else 0.0
        label = next(o.label for o in criterion.options if o.value == value)
    else:
        method = "mode" if criterion.kind is CriterionKind.NOMINAL else ordinal
        if method == "mode":
            tally: dict[str, float] = {}
            for v, w in cast:
                tally[v.label] = tally.get(v.label, 0.0) + w
            best = max(tally.values())
            tied = [o for o in criterion.options if tally.get(o.label) == best]
            option = max(tied, key=lambda o: o.value) if against else min(tied, key=lambda o: o.value)
        else:
            target = mean_value if method == "mean" else _weighted_median([(v.value, w) for v, w in cast])
            sign = -1.0 if against else 1.0
            option = min(criterion.options, key=lambda o: (round(abs(o.value - target), 12), sign * o.value))
        label, value = option.label, option.value

    agreement = sum(w for v, w in zip(votes, weights, strict=True) if v.label == label) / sum(weights)
    reasons = [v.reason for v, _ in cast if v.label == label and v.reason]
    return Verdict(
        criterion.name, label, value, reason=reasons[0] if reasons else "", judge="ensemble",
        expected_value=mean_value, votes=tuple(votes), agreement=agreement,
    )


def _weighted_median(pairs: list[tuple[float, float]]) -> float:
    """The weighted median (the midpoint when the weight splits exactly between two values)."""
    pairs = sorted(pairs)
    total = sum(w for _, w in pairs)
    acc = 0.0
    for i, (value, w) in enumerate(pairs):
        acc += w
        if acc > total / 2 + 1e-12:
            return value
        if abs(acc - total / 2) <= 1e-12:
            nxt = next((v for v, x in pairs[i + 1:] if x > 0), value)
            return (value + nxt) / 2
    return pairs[-1][0]
