"""What one sample got, on every path: :class:`RewardRecord`, and the read of the reward field."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..results import ScoreResult
    from ..rubric import Rubric

__all__ = ["REWARD_FIELDS", "RewardRecord", "criterion_passed", "failed_criteria", "reward_of"]

REWARD_FIELDS = ("score", "expected_score", "raw_score")
_EPS = 1e-9


def reward_of(result: ScoreResult, field_name: str) -> float | None:
    """The ``field_name`` score of a result as a reward: None when unscored or not finite (never NaN)."""
    if result.score is None:
        return None
    value = getattr(result, field_name)
    return float(value) if value is not None and math.isfinite(value) else None


@dataclass
class RewardRecord:
    """One sample's reward (None = unscored) and why.

    ``score`` is the reward field's value before any length penalty and ``penalty`` what was subtracted
    (the TRL plugin's); ``guard`` names the guard that decided the reward without a judge
    (``degenerate``, ``flagged``: flagged before judging, ``truncated``); ``error`` says why a sample is unscored and ``error_kinds`` how
    (judge error kinds, ``data``, ``rubric``, ``internal``); ``cost`` is the judge spend. Trainers that
    need a number for every sample take :meth:`numeric`.
    """

    reward: float | None
    result: ScoreResult | None = None
    guard: str | None = None
    error: str | None = None
    score: float | None = None
    penalty: float = 0.0
    length: int = 0
    rubric: Rubric | None = field(default=None, repr=False)
    error_kinds: tuple[str, ...] = ()
    cost: float = 0.0

    @classmethod
    def failed(cls, error: str, kind: str, rubric: Rubric | None = None) -> RewardRecord:
        """An unscored sample that never reached a judge (bad data or rubric, an internal error)."""
        return cls(None, error=f"{kind}: {error}", error_kinds=(kind,), rubric=rubric)

    @property
    def unscored(self) -> bool:
        return self.reward is None

    def numeric(self, fallback: float) -> float:
        """The reward, or ``fallback`` when unscored (for trainers that cannot take a missing reward)."""
        return fallback if self.reward is None else self.reward

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (the result in full; the rubric by name)."""
        return {
            "reward": self.reward, "score": self.score, "penalty": self.penalty, "length": self.length,
            "guard": self.guard, "error": self.error, "error_kinds": list(self.error_kinds), "cost": self.cost,
            "rubric": getattr(self.rubric, "name", None),
            "failed": failed_criteria(self.result, self.rubric) if self.reward is not None and not self.guard else [],
            "result": self.result.to_dict() if self.result is not None else None,
        }


def criterion_passed(weight: float, best: float, value: float) -> bool:
    """A criterion is passed when it reaches its best value (a penalty: when the flaw is absent)."""
    return value >= best - _EPS if weight > 0 else value <= _EPS


_TARGETS: dict[int, tuple[Any, list[tuple[str, float, float]]]] = {}


def criterion_targets(rubric: Rubric) -> list[tuple[str, float, float]]:
    """(name, weight, best value) per criterion, memoised per rubric object (best_value is a max)."""
    hit = _TARGETS.get(id(rubric))
    if hit is None or hit[0] is not rubric:
        if len(_TARGETS) > 4096:
            _TARGETS.clear()
        hit = _TARGETS[id(rubric)] = (rubric, [(c.name, c.weight, c.best_value) for c in rubric.criteria])
    return hit[1]


def failed_criteria(result: Any, rubric: Rubric | None) -> list[str]:
    """Names of criteria a scored result did not pass (abstentions and failures included)."""
    if result is None or rubric is None:
        return []
    out = []
    for (name, weight, best), v in zip(criterion_targets(rubric), result.verdicts, strict=False):
        if v.error is not None or v.value is None or not criterion_passed(weight, best, v.value):
            out.append(name)
    return out
