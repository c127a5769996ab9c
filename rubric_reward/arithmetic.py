"""Scoring: pure arithmetic from verdicts to a score. No I/O, no judges.

score = clip(sum(weight * value) / sum(positive weights), 0, 1); a penalty-only rubric starts at 1:
score = clip(1 + sum(weight * value) / sum(|negative weights|), 0, 1).

Abstentions (CANNOT_ASSESS / N/A) follow the configured strategy. A *failed* verdict (judge error,
unparseable answer) is not an abstention: by default the whole result is unscored; the
``worst_case`` policy scores it as the worst outcome instead. Nothing is renormalised silently.

Weights here are :attr:`~rubric_reward.rubric.Criterion.reward_weight`: a monitor criterion (``monitor: true``
or weight 0) counts 0, so it never moves a score, and its failure never unscores one. :func:`score_terms`
splits a score into each criterion's term (plus the penalty-only base and the clip), summing to it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from .results import ErrorKind, JudgeError, ScoreResult, Verdict
from .rubric import Criterion, Rubric

__all__ = ["Abstention", "OnFailure", "ScoringConfig", "counted_value", "score_terms", "score_verdicts"]

BASE_TERM = "_base"  # score_terms: the 1 a penalty-only rubric starts from
CLIP_TERM = "_clip"  # score_terms: what clipping to [0, 1] took off (or float rounding added)
ALL_OR_NOTHING_TERM = "_all_or_nothing"  # score_terms: the whole pass/fail score

_EPS = 1e-9


class Abstention(StrEnum):
    SKIP = "skip"  # drop the criterion from numerator and denominator
    ZERO = "zero"  # keep it in the denominator with value 0
    PARTIAL = "partial"  # positive criteria get `partial_credit`; penalties do not fire
    FAIL = "fail"  # worst case by the weight's sign (positive -> worst option, penalty -> fires)


class OnFailure(StrEnum):
    UNSCORED = "unscored"  # the whole result has score None, with the failures named
    WORST_CASE = "worst_case"  # a failed verdict counts as the worst outcome for its criterion


@dataclass(frozen=True, slots=True)
class ScoringConfig:
    """How verdicts become a score."""

    abstention: Abstention = field(default=Abstention.SKIP, metadata={
        "help": "what an abstained verdict (CANNOT_ASSESS / N/A) counts as: skip, zero, partial or fail"})
    partial_credit: float = field(default=0.5, metadata={
        "help": "abstention partial: the credit of a positive criterion, in [0, 1]"})
    all_or_nothing: bool = field(default=False, metadata={
        "help": "1.0 only when every positive criterion is met and no penalty fires, else 0.0"})
    on_failure: OnFailure = field(default=OnFailure.UNSCORED, metadata={
        "help": "a failed verdict makes the result unscored (None, failures named) or counts as its worst case"})

    def __post_init__(self) -> None:
        for name, enum in (("abstention", Abstention), ("on_failure", OnFailure)):
            raw = getattr(self, name)
            try:
                object.__setattr__(self, name, enum(raw))
            except ValueError:
                choices = ", ".join(e.value for e in enum)
                raise ValueError(f"ScoringConfig.{name}: {raw!r} is not one of {choices}") from None
        if not 0.0 <= self.partial_credit <= 1.0:
            raise ValueError(f"ScoringConfig.partial_credit must be in [0, 1], got {self.partial_credit}")


def score_verdicts(
    rubric: Rubric,
    verdicts: Iterable[Verdict] | Mapping[str, Verdict],
    config: ScoringConfig = ScoringConfig(),
) -> ScoreResult:
    """Score one response from its verdicts (one per criterion of ``rubric``)."""
    ordered = _ordered(rubric, verdicts)
    failed = [v for c, v in zip(rubric.criteria, ordered, strict=True) if v.error is not None and not c.is_monitor]
    if failed and config.on_failure is OnFailure.UNSCORED:
        detail = "; ".join(f"{v.criterion} ({v.error})" for v in failed)
        return ScoreResult(None, ordered, error=f"{len(failed)} verdict(s) failed: {detail}")
    terms, why = _terms(rubric, ordered, config)
    if why is not None:
        return ScoreResult(None, ordered, error=why)

    if config.all_or_nothing:
        score, expected = _all_or_nothing(terms)
        return ScoreResult(score, ordered, raw_score=score, expected_score=expected)

    has_positive = any(c.reward_weight > 0 for c in rubric.criteria)
    raw = _normalise([(c.reward_weight, val) for c, val, _ in terms], has_positive)
    raw_expected = _normalise([(c.reward_weight, exp) for c, _, exp in terms], has_positive)
    if not (math.isfinite(raw) and math.isfinite(raw_expected)):  # never a NaN or inf reward
        return ScoreResult(None, ordered, error=f"the score is not finite ({raw}); check the rubric's weights")
    return ScoreResult(_clip(raw), ordered, raw_score=raw, expected_score=_clip(raw_expected))


def score_terms(rubric: Rubric, verdicts: Iterable[Verdict] | Mapping[str, Verdict],
                config: ScoringConfig = ScoringConfig(), field: str = "score") -> dict[str, float] | None:
    """The ``field`` score (``score``, ``expected_score`` or ``raw_score``) of these verdicts as a sum of terms:
    each criterion's ``reward_weight x value / normaliser`` by name (0 for a monitor, and for a criterion left
    out), :data:`BASE_TERM` (1 for a penalty-only rubric), and :data:`CLIP_TERM`, what clipping took off (it also
    takes float rounding: the terms sum to the score to rounding). Under ``all_or_nothing`` the score is one term,
    :data:`ALL_OR_NOTHING_TERM`. None when the verdicts leave the result unscored."""
    result = score_verdicts(rubric, verdicts, config)
    target = getattr(result, field)
    if result.score is None or target is None:
        return None
    out = {c.name: 0.0 for c in rubric.criteria}
    if config.all_or_nothing:
        return {**out, ALL_OR_NOTHING_TERM: float(target)}
    terms, _ = _terms(rubric, result.verdicts, config)
    has_positive = any(c.reward_weight > 0 for c in rubric.criteria)
    if has_positive:
        denominator = sum(c.reward_weight for c, _, _ in terms if c.reward_weight > 0)
        base = 0.0
    else:
        denominator = sum(-c.reward_weight for c, _, _ in terms if c.reward_weight < 0)
        base = 1.0
    for c, value, expected in terms:
        if denominator and c.reward_weight:
            out[c.name] = c.reward_weight * (expected if field == "expected_score" else value) / denominator
    out[BASE_TERM] = base
    out[CLIP_TERM] = float(target) - math.fsum(out.values())
    return out


def _ordered(rubric: Rubric, verdicts: Iterable[Verdict] | Mapping[str, Verdict]) -> tuple[Verdict, ...]:
    by_name = dict(verdicts) if isinstance(verdicts, Mapping) else {v.criterion: v for v in verdicts}
    return tuple(
        by_name.get(c.name)
        or Verdict(c.name, None, None, error=JudgeError(ErrorKind.INTERNAL, "no verdict was produced"))
        for c in rubric.criteria
    )


def _terms(rubric: Rubric, ordered: tuple[Verdict, ...], config: ScoringConfig
           ) -> tuple[list[tuple[Criterion, float, float]], str | None]:
    """(criterion, value, expected value) of each criterion that counts, or why nothing is left to score."""
    terms: list[tuple[Criterion, float, float]] = []
    for c, v in zip(rubric.criteria, ordered, strict=True):
        if c.is_monitor:
            continue
        counted = counted_value(c, v, config)
        if counted is not None:
            terms.append((c, *counted))
    has_positive = any(c.reward_weight > 0 for c in rubric.criteria)
    if has_positive and not any(c.reward_weight > 0 for c, _, _ in terms):
        return terms, "every positive criterion abstained; nothing left to score (SKIP)"
    if not terms:
        return terms, "every criterion abstained; nothing left to score (SKIP)"
    return terms, None


def _all_or_nothing(terms: list[tuple[Criterion, float, float]]) -> tuple[float, float]:
    passed = all((val >= c.best_value - _EPS) if c.reward_weight > 0 else (val <= _EPS) for c, val, _ in terms)
    expected = 1.0
    for c, _, exp in terms:
        if c.reward_weight > 0:
            expected *= exp / c.best_value if c.best_value > 0 else 1.0
        elif c.reward_weight < 0:
            expected *= 1.0 - exp
    score = 1.0 if passed else 0.0
    return score, _clip(expected)


def counted_value(c: Criterion, v: Verdict, config: ScoringConfig = ScoringConfig()) -> tuple[float, float] | None:
    """(value, expected value) that criterion ``c`` counts with in the score given verdict ``v``, or None when
    it is left out (an abstention under ``skip``): the one rule for failures and abstentions."""
    if v.error is not None:
        value = _worst(c)
    elif v.abstained or v.value is None:
        match config.abstention:
            case Abstention.SKIP:
                return None
            case Abstention.ZERO:
                value = 0.0
            case Abstention.PARTIAL:
                value = config.partial_credit if c.weight > 0 else 0.0
            case Abstention.FAIL:
                value = _worst(c)
    else:
        value = v.value
    expected = v.expected_value if (v.expected_value is not None and v.error is None and not v.abstained) else value
    return value, expected


def _worst(c: Criterion) -> float:
    return c.worst_value if c.weight > 0 else c.best_value


def _normalise(terms: list[tuple[float, float]], has_positive: bool) -> float:
    total = sum(w * v for w, v in terms)
    if has_positive:
        return total / sum(w for w, _ in terms if w > 0)
    negative = sum(-w for w, _ in terms if w < 0)
    return 1.0 + total / negative if negative else 1.0


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))
