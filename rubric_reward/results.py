"""Value objects that flow out of judging: errors, verdicts, call records and score results.

Failures are data. A verdict that could not be obtained carries a :class:`JudgeError` and no value;
it is never an abstention and never silently turned into a number.
"""

from __future__ import annotations

import math

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["CallRecord", "ErrorKind", "JudgeError", "ScoreResult", "Usage", "Verdict"]


class ErrorKind(StrEnum):
    """Why a verdict could not be obtained."""

    PARSE = "parse"  # the judge answered, but not with exactly one on-menu verdict (after the re-ask)
    RATE_LIMIT = "rate_limit"  # 429 after every retry
    SERVER = "server"  # 5xx after every retry
    TIMEOUT = "timeout"  # per-call timeout after every retry
    CONNECTION = "connection"  # could not connect after every retry
    DEADLINE = "deadline"  # the batch deadline passed before this verdict arrived
    CLIENT = "client"  # 4xx other than 429: bad request, auth, unknown model (not retried)
    CONTENT_FILTER = "content_filter"  # the provider refused to answer
    BUDGET = "budget"  # the run's cost cap was reached
    CHECK = "check"  # a programmatic check raised
    INTERNAL = "internal"  # a bug on our side, reported instead of raised


@dataclass(frozen=True, slots=True)
class JudgeError:
    kind: ErrorKind
    message: str
    status: int | None = None

    def __post_init__(self) -> None:
        # every failure is stored and printed through here: no credential survives in its text
        from .util.redaction import redact

        object.__setattr__(self, "message", redact(self.message))

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "message": self.message, "status": self.status}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JudgeError:
        return cls(ErrorKind(d["kind"]), d["message"], d.get("status"))


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One logical judge call (possibly several HTTP attempts) and what it cost.

    ``share`` is the part of the call this result carries: a group call judging N responses is on
    each of their results with ``share = 1/N`` and ``cost`` its share of the bill (``usage``
    describes the whole answer), so shares and costs sum to one call over the group.
    """

    judge: str
    criteria: tuple[str, ...]
    usage: Usage = Usage()
    cost: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    cached: bool = False
    error: JudgeError | None = None
    share: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["criteria"] = list(self.criteria)
        d["error"] = self.error.to_dict() if self.error else None
        return d


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judgement of one criterion for one response.

    ``label`` is the chosen option (``MET``/``UNMET``/``CANNOT_ASSESS`` for binary criteria);
    ``value`` its value in [0, 1], or None when the judge abstained or the verdict failed.
    ``expected_value`` is a continuous alternative (probability-weighted, or an ensemble mean)
    when one is available; ``probabilities`` maps labels to probabilities (logprob verdicts).
    """

    criterion: str
    label: str | None
    value: float | None
    reason: str = ""
    abstained: bool = False
    error: JudgeError | None = None
    judge: str = ""
    expected_value: float | None = None
    probabilities: Mapping[str, float] | None = None
    votes: tuple[Verdict, ...] = ()
    agreement: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "criterion": self.criterion,
            "label": self.label,
            "value": self.value,
            "reason": self.reason,
            "abstained": self.abstained,
            "error": self.error.to_dict() if self.error else None,
        }
        if self.judge:
            d["judge"] = self.judge
        if self.expected_value is not None:
            d["expected_value"] = self.expected_value
        if self.probabilities is not None:
            d["probabilities"] = dict(self.probabilities)
        if self.votes:
            d["votes"] = [v.to_dict() for v in self.votes]
            d["agreement"] = self.agreement
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        return cls(
            criterion=d["criterion"],
            label=d.get("label"),
            value=d.get("value"),
            reason=d.get("reason", ""),
            abstained=d.get("abstained", False),
            error=JudgeError.from_dict(d["error"]) if d.get("error") else None,
            judge=d.get("judge", ""),
            expected_value=d.get("expected_value"),
            probabilities=d.get("probabilities"),
            votes=tuple(cls.from_dict(v) for v in d.get("votes", ())),
            agreement=d.get("agreement"),
        )


@dataclass(frozen=True, slots=True)
class ScoreResult:
    """A scored response: the score (None when unscored), every verdict, and what it cost.

    ``score`` is the clipped, normalised score in [0, 1]; ``raw_score`` is before clipping;
    ``expected_score`` uses continuous verdict values where available (denser rewards).
    """

    score: float | None
    verdicts: tuple[Verdict, ...]
    raw_score: float | None = None
    expected_score: float | None = None
    error: str | None = None
    calls: tuple[CallRecord, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("score", "raw_score", "expected_score"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ValueError(f"ScoreResult.{name} must be finite or None, got {v}")

    @property
    def ok(self) -> bool:
        return self.score is not None

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.calls if not c.cached)

    @property
    def judge_calls(self) -> float:
        """Judge calls this result paid for (cached and duplicate calls excluded; a group call counts
        its share)."""
        return sum(c.share for c in self.calls if not c.cached)

    @property
    def usage(self) -> Usage:
        total = Usage()
        for c in self.calls:
            total = total + c.usage
        return total

    def verdict(self, criterion: str) -> Verdict:
        for v in self.verdicts:
            if v.criterion == criterion:
                return v
        raise KeyError(criterion)

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "raw_score": self.raw_score,
            "expected_score": self.expected_score,
            "error": self.error,
            "cost": self.cost,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "calls": [c.to_dict() for c in self.calls],
            **({"metadata": dict(self.metadata)} if self.metadata else {}),
        }
