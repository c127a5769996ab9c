"""RewardConfig: everything a rubric reward needs, as one YAML-shaped dataclass, for every path.

The fields map 1:1 onto a YAML file (``RewardConfig.from_yaml(path)``); the TRL plugin, the reward
service (whose ``ServeConfig`` adds a ``serve:`` section) and the OpenRLHF / verl adapters read the
same file, so one ``reward.yaml`` drives them all. Nested sections (``scoring``, ``grading``,
``guards``, ``length_penalty``) are validated here. Defaults are the RL ones on every path:
abstention ``zero`` (under ``skip`` a policy raises its reward by making criteria unassessable),
judge failures unscored (``None``); ``scoring`` fields given are laid over them, so
``{all_or_nothing: true}`` keeps abstention ``zero``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .records import REWARD_FIELDS

__all__ = ["DEFAULT_SCORING", "GuardConfig", "LengthPenalty", "RewardConfig"]

log = logging.getLogger("rubric_reward.rewards")

DEFAULT_SCORING = {"abstention": "zero", "on_failure": "unscored"}  # what scoring fields not given default to
# sections other paths add to the file (ServeConfig's ``serve:``): accepted, and left to them
_OTHER_SECTIONS = frozenset({"serve"})
# fields that name input files: relative paths resolve against the YAML file's folder when they exist there
_INPUT_PATHS = ("rubric", "rubric_dir", "rubrics", "judge")


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

    degenerate: bool = True  # applies on every path (the grader screens before judging)
    truncated: bool = False  # the TRL plugin only (it needs completion_ids)
    max_completion_length: int | None = None
    min_reward: float = 0.0

    def __post_init__(self) -> None:
        if self.max_completion_length is not None and self.max_completion_length < 1:
            raise ValueError(f"RewardConfig.guards.max_completion_length must be >= 1, got {self.max_completion_length}")


@dataclass(frozen=True)
class LengthPenalty:
    """An optional length penalty, subtracted from the judged score and recorded separately (TRL plugin).

    ``reference: fixed``: lengths up to ``free`` cost nothing; beyond it the penalty grows as
    ``penalty * ((length - free) / (cap - free)) ** exponent`` and stays at ``penalty`` from ``cap`` on.
    ``reference: group``: the free length is the ``quantile`` of the lengths of the group's passing
    completions (judged score >= ``pass_score``; a group is a prompt's completions) and the cap
    ``cap_ratio`` times it; a group with no passing completion is not penalised
    (:func:`~rubric_reward.rewards.length.length_penalties`). ``unit``: ``words``
    (whitespace-separated) or ``tokens`` (``completion_ids``; a ``tokenizer`` name or path is used when
    the trainer gives no ids).
    """

    enabled: bool = False
    unit: str = "words"
    free: int = 512
    cap: int = 1024
    penalty: float = 0.5
    exponent: float = 1.0
    tokenizer: str | None = None
    reference: str = "fixed"
    quantile: float = 0.5
    pass_score: float = 1.0
    cap_ratio: float = 2.0

    def __post_init__(self) -> None:
        if self.unit not in ("words", "tokens"):
            raise ValueError(f"RewardConfig.length_penalty.unit must be 'words' or 'tokens', got {self.unit!r}")
        if self.reference not in ("fixed", "group"):
            raise ValueError(f"RewardConfig.length_penalty.reference must be 'fixed' or 'group', got {self.reference!r}")
        if not 0 <= self.free < self.cap:
            raise ValueError(f"RewardConfig.length_penalty needs 0 <= free < cap, got free={self.free} cap={self.cap}")
        if self.penalty < 0 or self.exponent <= 0:
            raise ValueError("RewardConfig.length_penalty: penalty must be >= 0 and exponent > 0")
        if not 0.0 <= self.quantile <= 1.0:
            raise ValueError(f"RewardConfig.length_penalty.quantile must be in [0, 1], got {self.quantile}")
        if not self.cap_ratio > 1.0:
            raise ValueError(f"RewardConfig.length_penalty.cap_ratio must be > 1, got {self.cap_ratio}")

    def __call__(self, length: int, free: float | None = None, cap: float | None = None) -> float:
        """The penalty for ``length`` (``free``/``cap``: a group's own reference, else the fixed ones)."""
        free = self.free if free is None else free
        cap = self.cap if cap is None else cap
        if not self.enabled or length <= free:
            return 0.0
        frac = min(1.0, (length - free) / (cap - free))
        return self.penalty * frac**self.exponent


@dataclass(frozen=True)
class RewardConfig:
    """How rubric scores become rewards (see docs/rewards.md for every field).

    ``judge`` takes anything ``Scorer`` takes (model string, JudgeConfig mapping, judge YAML path, or a
    list: an ensemble); a top-level ``base_url`` applies to model strings and judge mappings that name
    none. ``rubric`` is the default rubric, for samples that bring none (``rubric_column: null``: for
    every row of a TRL batch, whatever its columns). A sample's own rubric (a dataset's
    ``rubric_column``, a service item's ``rubric``/``label``, OpenRLHF's label, verl's ground truth) is
    read by :class:`~rubric_reward.rewards.rubrics.RubricResolver`, ids from ``rubrics`` (a mapping or
    a library file) and ``rubric_dir`` (a folder of ``<id>.yaml``/``.yml``/``.json``, or a library
    file). ``deadline_s`` bounds one batch (TRL), one request (the service) or one call (the per-sample
    adapters), and stays under the clients' timeouts (OpenRLHF gives up after 180 s);
    ``step_budget_s`` (default: ``deadline_s``) bounds what one training step of a per-sample trainer
    (verl) may lose to failing judge calls (:mod:`rubric_reward.rewards.budget`). ``unscored_reward``
    is the number trainers that cannot take a missing reward (OpenRLHF, verl) get for an unscored
    sample, flagged unscored next to it; TRL gets ``None``.
    Trainer-only fields (guards.truncated, length_penalty, the unscorable streak, metrics and
    logging) are accepted everywhere and used by the TRL plugin.
    """

    judge: Any = None
    base_url: str | None = None
    rubric: Any = None
    rubric_column: str | None = "rubric"
    rubric_dir: str | None = None
    rubrics: Any = None
    scoring: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_SCORING))
    grading: Mapping[str, Any] = field(default_factory=dict)
    reward: str = "score"
    strip_think: bool = True
    deadline_s: float | None = 120.0
    step_budget_s: float | None = None
    max_unscorable_fraction: float = 1.0
    max_unscorable_steps: int = 3
    guards: GuardConfig | Mapping[str, Any] = field(default_factory=GuardConfig)
    length_penalty: LengthPenalty | Mapping[str, Any] = field(default_factory=LengthPenalty)
    metric_prefix: str = "rubric"
    max_criteria_metrics: int = 20
    log_completions: bool = True
    cache: str | None = None
    name: str = "rubric"
    unscored_reward: float = 0.0

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"RewardConfig: field {name!r} {why}")

        for name, cls in (("guards", GuardConfig), ("length_penalty", LengthPenalty)):
            value = getattr(self, name)
            if isinstance(value, Mapping):
                _check_keys(name, value, cls)
                object.__setattr__(self, name, cls(**value))
            elif not isinstance(value, cls):
                raise bad(name, f"must be a mapping, got {type(value).__name__}")
        if self.reward not in REWARD_FIELDS:
            raise bad("reward", f"must be one of {', '.join(REWARD_FIELDS)}, got {self.reward!r}")
        deadline = self.deadline_s
        if deadline is not None and (isinstance(deadline, bool) or not isinstance(deadline, int | float) or deadline <= 0):
            raise bad("deadline_s", f"must be a positive number or null, got {self.deadline_s!r}")
        if self.step_budget_s is not None and (isinstance(self.step_budget_s, bool)
                                               or not isinstance(self.step_budget_s, int | float)
                                               or not self.step_budget_s > 0):
            raise bad("step_budget_s", f"must be a positive number or null, got {self.step_budget_s!r}")
        for name in ("strip_think", "log_completions"):
            if not isinstance(getattr(self, name), bool):
                raise bad(name, f"must be true or false, got {getattr(self, name)!r}")
        if self.rubric_column is not None and (not isinstance(self.rubric_column, str) or not self.rubric_column):
            raise bad("rubric_column", f"must be a column name or null, got {self.rubric_column!r}")
        for name in ("base_url", "rubric_dir", "cache"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str | Path):
                raise bad(name, f"must be a string or null, got {type(getattr(self, name)).__name__}")
        if isinstance(self.unscored_reward, bool) or not isinstance(self.unscored_reward, int | float):
            raise bad("unscored_reward", f"must be a number, got {self.unscored_reward!r}")
        if not 0.0 < self.max_unscorable_fraction <= 1.0:
            raise bad("max_unscorable_fraction", f"must be in (0, 1], got {self.max_unscorable_fraction}")
        if self.max_unscorable_steps < 0:
            raise bad("max_unscorable_steps", f"must be >= 0 (0 disables), got {self.max_unscorable_steps}")
        if self.max_criteria_metrics < 0:
            raise bad("max_criteria_metrics", "must be >= 0")
        if not isinstance(self.metric_prefix, str) or not self.metric_prefix or "/" in self.metric_prefix.strip("/"):
            raise bad("metric_prefix", f"must be one non-empty name, got {self.metric_prefix!r}")
        # the nested Scorer sections are validated now, not at the first training step
        for name, build in (("scoring", self.scoring_config), ("grading", self.grading_config)):
            if not isinstance(getattr(self, name) or {}, Mapping):
                raise bad(name, f"must be a mapping, got {type(getattr(self, name)).__name__}")
            try:
                build()
            except (TypeError, ValueError) as exc:
                raise ValueError(f"RewardConfig: field {name!r}: {exc}") from None

    # ------------------------------------------------------------------ derived
    def scoring_dict(self) -> dict[str, Any]:
        """ScoringConfig fields: the ones given, over the defaults (abstention zero, failures unscored)."""
        return {**DEFAULT_SCORING, **dict(self.scoring or {})}

    def grading_dict(self) -> dict[str, Any]:
        """GradingConfig fields: the ones given; ``screen_degenerate`` follows ``guards.degenerate``."""
        d = dict(self.grading or {})
        d.setdefault("screen_degenerate", self.guards.degenerate)
        return d

    @property
    def step_budget(self) -> float | None:
        """The per-step budget in seconds: ``step_budget_s``, else ``deadline_s`` (None: unbounded)."""
        return self.step_budget_s if self.step_budget_s is not None else self.deadline_s

    def scoring_config(self) -> Any:
        from ..scoring import ScoringConfig

        return ScoringConfig(**self.scoring_dict())

    def grading_config(self) -> Any:
        from ..grader import GradingConfig

        return GradingConfig(**self.grading_dict())

    def judge_configs(self) -> list[Any]:
        """The judges this config names, validated (judge files read, no client built)."""
        from ..judges.config import load_judges

        return load_judges(self.judge, base_url=self.base_url) if self.judge is not None else []

    def replace(self, **changes: Any) -> RewardConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in d.items():
            if dataclasses.is_dataclass(value):
                d[name] = dataclasses.asdict(value)
        d["scoring"], d["grading"] = dict(self.scoring or {}), dict(self.grading or {})
        return d

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base_dir: str | Path | None = None, **overrides: Any) -> RewardConfig:
        """Build from a parsed mapping; relative input paths resolve against ``base_dir`` when they exist there."""
        if not isinstance(d, Mapping):
            raise ValueError(f"RewardConfig: expected a mapping of fields, got {type(d).__name__}")
        merged = {**dict(d), **overrides}
        known = {f.name for f in fields(cls)}
        serve = merged.get("serve")
        if isinstance(serve, Mapping) and "unscored_reward" in serve:  # where it was first documented
            if "unscored_reward" in merged:
                raise ValueError("RewardConfig: give 'unscored_reward' once, at the top level (not also under 'serve')")
            merged["unscored_reward"] = serve["unscored_reward"]
            merged["serve"] = {k: v for k, v in serve.items() if k != "unscored_reward"}
        for section in (_OTHER_SECTIONS - known) & set(merged):
            log.debug("reward config: section %r is for another path; the %s ignores it", section, cls.__name__)
            merged.pop(section)
        _check_keys("", merged, cls)
        if base_dir is not None:
            for key in _INPUT_PATHS:
                merged[key] = _resolve_path(merged.get(key), Path(base_dir), judge=key == "judge")
        return cls(**merged)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> RewardConfig:
        import yaml

        path = Path(path)
        try:
            obj = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            raise ValueError(f"{path}: no such reward config file") from None
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not UTF-8 text") from None
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML: {exc}") from None
        if not isinstance(obj, Mapping):
            raise ValueError(f"{path}: a reward config must be a mapping of RewardConfig fields")
        try:
            return cls.from_dict(obj, base_dir=path.parent, **overrides)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def coerce(cls, source: Any = None, **overrides: Any) -> RewardConfig:
        """A config of this class from a config, a mapping, a YAML path, or None (defaults)."""
        if source is None:
            return cls.from_dict({}, **overrides)
        if isinstance(source, cls):
            return dataclasses.replace(source, **overrides) if overrides else source
        if isinstance(source, RewardConfig):  # a RewardConfig given where a subclass is wanted
            return cls.from_dict(source.to_dict(), **overrides)
        if isinstance(source, Mapping):
            return cls.from_dict(source, **overrides)
        if isinstance(source, str | Path):
            return cls.from_yaml(source, **overrides)
        raise TypeError(f"cannot make a {cls.__name__} from a {type(source).__name__}")


def _resolve_path(value: Any, base: Path, *, judge: bool = False) -> Any:
    if isinstance(value, list) and judge:
        return [_resolve_path(v, base, judge=True) for v in value]
    if not isinstance(value, str) or Path(value).is_absolute() or "\n" in value:
        return value
    if judge and not value.endswith((".yaml", ".yml", ".json")):
        return value  # a model name, not a file
    candidate = base / value
    return os.path.normpath(candidate) if candidate.exists() else value
