"""RewardConfig: everything a rubric reward needs, as one YAML-shaped dataclass.

The fields map 1:1 onto a YAML file (``RewardConfig.from_yaml(path)``); nested sections
(``scoring``, ``grading``, ``guards``, ``length_penalty``) are plain mappings validated here, so a
config stays picklable and printable. Defaults are the RL ones: abstention ``zero`` (under ``skip``
a policy raises its reward by making criteria unassessable), judge failures unscored (``None``);
``scoring`` fields given are laid over them, so ``{all_or_nothing: true}`` keeps abstention ``zero``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["GuardConfig", "LengthPenalty", "RewardConfig"]

_REWARD_FIELDS = ("score", "expected_score", "raw_score")
RL_SCORING = {"abstention": "zero", "on_failure": "unscored"}  # what scoring fields not given default to


def _check_keys(section: str, given: Mapping[str, Any], cls: type) -> None:
    known = {f.name for f in fields(cls)}
    unknown = set(given) - known
    if unknown:
        where = f"RewardConfig.{section}" if section else "RewardConfig"
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")


@dataclass(frozen=True)
class GuardConfig:
    """Reward-hacking guards. ``min_reward`` is the reward a guarded completion gets.

    ``degenerate``: empty / punctuation-only / bare-opener / prompt-echo completions get ``min_reward``
    without a judge call (the grader's screening). ``truncated``: completions that reached the length
    limit (``len(completion_ids) >= max_completion_length``) get ``min_reward`` without a judge call;
    off by default, and needs ``max_completion_length`` here or from the trainer's args.
    """

    degenerate: bool = True
    truncated: bool = False
    max_completion_length: int | None = None
    min_reward: float = 0.0

    def __post_init__(self) -> None:
        if self.max_completion_length is not None and self.max_completion_length < 1:
            raise ValueError(f"RewardConfig.guards.max_completion_length must be >= 1, got {self.max_completion_length}")


@dataclass(frozen=True)
class LengthPenalty:
    """An optional length penalty, subtracted from the judged score and recorded separately.

    Lengths up to ``free`` cost nothing; beyond it the penalty grows as
    ``penalty * ((length - free) / (cap - free)) ** exponent`` and stays at ``penalty`` from ``cap`` on.
    ``unit``: ``words`` (whitespace-separated) or ``tokens`` (``completion_ids``; a ``tokenizer``
    name or path is used when the trainer gives no ids).
    """

    enabled: bool = False
    unit: str = "words"
    free: int = 512
    cap: int = 1024
    penalty: float = 0.5
    exponent: float = 1.0
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        if self.unit not in ("words", "tokens"):
            raise ValueError(f"RewardConfig.length_penalty.unit must be 'words' or 'tokens', got {self.unit!r}")
        if not 0 <= self.free < self.cap:
            raise ValueError(f"RewardConfig.length_penalty needs 0 <= free < cap, got free={self.free} cap={self.cap}")
        if self.penalty < 0 or self.exponent <= 0:
            raise ValueError("RewardConfig.length_penalty: penalty must be >= 0 and exponent > 0")

    def __call__(self, length: int) -> float:
        if not self.enabled or length <= self.free:
            return 0.0
        frac = min(1.0, (length - self.free) / (self.cap - self.free))
        return self.penalty * frac**self.exponent


@dataclass(frozen=True)
class RewardConfig:
    """How rubric scores become rewards (see docs/rewards.md for every field).

    ``judge`` takes anything ``Scorer`` takes (model string, JudgeConfig mapping, judge YAML path, or a
    list: an ensemble). ``rubric`` is one fixed rubric (path or inline); when None each row's
    ``rubric_column`` holds an inline rubric (mapping, YAML/JSON string), an AdvancedIF question list
    (possibly JSON-encoded) or a rubric id looked up in ``rubrics`` (a mapping or a library file) and
    then ``rubric_dir`` (files ``<id>.yaml``/``.yml``/``.json``).
    """

    judge: Any = None
    base_url: str | None = None
    rubric: Any = None
    rubric_column: str = "rubric"
    rubric_dir: str | None = None
    rubrics: Any = None
    scoring: Mapping[str, Any] = field(default_factory=lambda: dict(RL_SCORING))
    grading: Mapping[str, Any] = field(default_factory=dict)
    reward: str = "score"
    strip_think: bool = True
    deadline_s: float | None = 300.0
    max_unscorable_fraction: float = 1.0
    max_unscorable_steps: int = 3
    guards: GuardConfig | Mapping[str, Any] = field(default_factory=GuardConfig)
    length_penalty: LengthPenalty | Mapping[str, Any] = field(default_factory=LengthPenalty)
    metric_prefix: str = "rubric"
    max_criteria_metrics: int = 20
    log_completions: bool = True
    cache: str | None = None
    name: str = "rubric"

    def __post_init__(self) -> None:
        if isinstance(self.guards, Mapping):
            _check_keys("guards", self.guards, GuardConfig)
            object.__setattr__(self, "guards", GuardConfig(**self.guards))
        if isinstance(self.length_penalty, Mapping):
            _check_keys("length_penalty", self.length_penalty, LengthPenalty)
            object.__setattr__(self, "length_penalty", LengthPenalty(**self.length_penalty))
        if self.reward not in _REWARD_FIELDS:
            raise ValueError(f"RewardConfig.reward must be one of {', '.join(_REWARD_FIELDS)}, got {self.reward!r}")
        if self.deadline_s is not None and self.deadline_s <= 0:
            raise ValueError(f"RewardConfig.deadline_s must be positive or null, got {self.deadline_s}")
        if not 0.0 < self.max_unscorable_fraction <= 1.0:
            raise ValueError(f"RewardConfig.max_unscorable_fraction must be in (0, 1], got {self.max_unscorable_fraction}")
        if self.max_unscorable_steps < 0:
            raise ValueError(f"RewardConfig.max_unscorable_steps must be >= 0 (0 disables), got {self.max_unscorable_steps}")
        if self.max_criteria_metrics < 0:
            raise ValueError("RewardConfig.max_criteria_metrics must be >= 0")
        if not self.metric_prefix or "/" in self.metric_prefix.strip("/"):
            raise ValueError(f"RewardConfig.metric_prefix must be one non-empty name, got {self.metric_prefix!r}")
        # validate the nested Scorer sections now, not at the first training step
        from ..grader import GradingConfig
        from ..scoring import ScoringConfig

        ScoringConfig(**self.scoring_dict())
        GradingConfig(**self.grading_dict())

    # ------------------------------------------------------------------ derived
    def scoring_dict(self) -> dict[str, Any]:
        """ScoringConfig fields: the ones given, over the RL defaults (abstention zero, failures unscored)."""
        return {**RL_SCORING, **dict(self.scoring or {})}

    def grading_dict(self) -> dict[str, Any]:
        d = dict(self.grading or {})
        d.setdefault("screen_degenerate", self.guards.degenerate)
        return d

    def replace(self, **changes: Any) -> RewardConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["guards"] = dataclasses.asdict(self.guards)
        d["length_penalty"] = dataclasses.asdict(self.length_penalty)
        d["scoring"], d["grading"] = dict(self.scoring or {}), dict(self.grading or {})
        return d

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_dict(cls, d: Mapping[str, Any], **overrides: Any) -> RewardConfig:
        merged = {**dict(d), **overrides}
        _check_keys("", merged, cls)
        return cls(**merged)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> RewardConfig:
        import yaml

        path = Path(path)
        try:
            obj = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            raise ValueError(f"{path}: no such reward config file") from None
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML: {exc}") from None
        if not isinstance(obj, Mapping):
            raise ValueError(f"{path}: a reward config must be a mapping of RewardConfig fields")
        try:
            return cls.from_dict(obj, **overrides)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def coerce(cls, source: Any = None, **overrides: Any) -> RewardConfig:
        """A RewardConfig from a RewardConfig, a mapping, a YAML path, or None (defaults)."""
        if source is None:
            return cls.from_dict({}, **overrides)
        if isinstance(source, RewardConfig):
            return dataclasses.replace(source, **overrides) if overrides else source
        if isinstance(source, Mapping):
            return cls.from_dict(source, **overrides)
        if isinstance(source, str | Path):
            return cls.from_yaml(source, **overrides)
        raise TypeError(f"cannot make a RewardConfig from a {type(source).__name__}")
