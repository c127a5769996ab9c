"""RewardConfig: everything a rubric reward needs, as one YAML-shaped dataclass, for every path.

The fields map 1:1 onto a YAML file (``RewardConfig.from_yaml(path)``); the TRL plugin, the reward
service (whose ``ServeConfig`` adds a ``serve:`` section) and the OpenRLHF / verl adapters read the
same file, so one ``reward.yaml`` drives them all. Every field is typed and range-checked by the one
section reader (:mod:`rubric_reward.io.sections`), and nested sections (``scoring``, ``grading``,
``guards``, ``length_penalty``) are typed once, here. Defaults are the RL ones on every path:
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

from ..io.sections import check_fields, from_section
from .records import REWARD_FIELDS

__all__ = ["DEFAULT_SCORING", "GuardConfig", "LengthPenalty", "RewardConfig"]

log = logging.getLogger("rubric_reward.rewards")

DEFAULT_SCORING = {"abstention": "zero", "on_failure": "unscored"}  # what scoring fields not given default to
# sections other paths add to the file (ServeConfig's ``serve:``): accepted, and left to them
_OTHER_SECTIONS = frozenset({"serve"})
# fields that name input files: relative paths resolve against the YAML file's folder when they exist there
_INPUT_PATHS = ("rubric", "rubric_dir", "rubrics", "judge")


@dataclass(frozen=True)
class GuardConfig:
    """Reward-hacking guards. ``min_reward`` is the reward a guarded completion gets.

    ``degenerate``: empty / punctuation-only / bare-opener / prompt-echo completions get ``min_reward``
    without a judge call (the grader's screening). ``truncated``: completions that reached the length
    limit (``len(completion_ids) >= max_completion_length``) get ``min_reward`` without a judge call;
    off by default, and needs ``max_completion_length`` here or from the trainer's args.
    """

    degenerate: bool = field(default=True, metadata={
        "help": "degenerate completions get min_reward with no judge call (every path: the grader screens)"})
    truncated: bool = field(default=False, metadata={
        "help": "completions that reached max_completion_length get min_reward with no judge call (TRL plugin)"})
    max_completion_length: int | None = field(default=None, metadata={
        "help": "the length limit for 'truncated' (default: the trainer's)", "ge": 1})
    min_reward: float = field(default=0.0, metadata={"help": "the reward a guarded completion gets"})

    def __post_init__(self) -> None:
        check_fields(self, "RewardConfig.guards")


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

    enabled: bool = field(default=False, metadata={"help": "switch the penalty on"})
    unit: str = field(default="words", metadata={
        "help": "words (whitespace-separated) or tokens (completion_ids, else the tokenizer)",
        "choices": ("words", "tokens")})
    free: int = field(default=512, metadata={"help": "lengths up to this cost nothing (reference: fixed)", "ge": 0})
    cap: int = field(default=1024, metadata={"help": "the full penalty from this length on (reference: fixed)",
                                             "ge": 1})
    penalty: float = field(default=0.5, metadata={"help": "the largest penalty", "ge": 0})
    exponent: float = field(default=1.0, metadata={"help": "the penalty's growth between free and cap", "gt": 0})
    tokenizer: str | None = field(default=None, metadata={
        "help": "a tokenizer name or path, for unit tokens when the trainer gives no completion_ids"})
    reference: str = field(default="fixed", metadata={
        "help": "fixed (free and cap) or group (from the group's passing completions)",
        "choices": ("fixed", "group")})
    quantile: float = field(default=0.5, metadata={
        "help": "reference group: the free length is this quantile of the passing lengths", "ge": 0, "le": 1})
    pass_score: float = field(default=1.0, metadata={
        "help": "reference group: a completion passes with a judged score at least this"})
    cap_ratio: float = field(default=2.0, metadata={
        "help": "reference group: the cap is this many times the free length", "gt": 1})

    def __post_init__(self) -> None:
        check_fields(self, "RewardConfig.length_penalty")
        if not self.free < self.cap:
            raise ValueError(f"RewardConfig.length_penalty needs 0 <= free < cap, got free={self.free} cap={self.cap}")

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
    logging) are accepted everywhere and used by the TRL plugin. ``scoring`` and ``grading`` are typed
    once, when the config is built (:meth:`scoring_config`, :meth:`grading_config`).
    """

    judge: Any = field(default=None, metadata={
        "help": "a model string, a JudgeConfig mapping, a judge YAML path, or a list of them (an ensemble)",
        "raw": True})
    base_url: str | None = field(default=None, metadata={
        "help": "an OpenAI-compatible endpoint for judges given as a model string or a mapping that names none"})
    rubric: Any = field(default=None, metadata={
        "help": "the default rubric (a path, a mapping or a list of criteria), for samples that bring none",
        "raw": True})
    rubric_column: str | None = field(default="rubric", metadata={
        "help": "the dataset column holding each row's rubric (null: every row takes 'rubric')"})
    rubric_dir: str | None = field(default=None, metadata={
        "help": "where rubric ids are looked up: a folder of <id>.yaml/.yml/.json, or a library file"})
    rubrics: Any = field(default=None, metadata={
        "help": "rubric ids -> rubrics: a mapping, or a library file", "raw": True})
    scoring: Mapping[str, Any] | None = field(default_factory=lambda: dict(DEFAULT_SCORING), metadata={
        "help": "ScoringConfig fields, laid over {abstention: zero, on_failure: unscored}"})
    grading: Mapping[str, Any] | None = field(default_factory=dict, metadata={
        "help": "GradingConfig fields (seed, shuffle, reask, aggregation, screening)"})
    reward: str = field(default="score", metadata={
        "help": "which score is the reward", "choices": REWARD_FIELDS})
    strip_think: bool = field(default=True, metadata={"help": "judge only the text after the last </think>"})
    deadline_s: float | None = field(default=120.0, metadata={
        "help": "seconds for one batch (TRL), request (service) or call (per-sample adapters); null: none",
        "gt": 0})
    step_budget_s: float | None = field(default=None, metadata={
        "help": "seconds one step of a per-sample trainer may lose to failing judge calls (default: deadline_s)",
        "gt": 0})
    max_unscorable_fraction: float = field(default=1.0, metadata={
        "help": "a batch with at least this fraction unscored counts towards max_unscorable_steps",
        "gt": 0, "le": 1})
    max_unscorable_steps: int = field(default=3, metadata={
        "help": "raise after this many such batches in a row (0: never)", "ge": 0})
    guards: GuardConfig | Mapping[str, Any] = field(default_factory=GuardConfig, metadata={
        "help": "reward-hacking guards (GuardConfig)"})
    length_penalty: LengthPenalty | Mapping[str, Any] = field(default_factory=LengthPenalty, metadata={
        "help": "an optional length penalty (LengthPenalty)"})
    metric_prefix: str = field(default="rubric", metadata={"help": "prefix of the logged metrics"})
    max_criteria_metrics: int = field(default=20, metadata={
        "help": "cap on per-criterion pass-rate metrics", "ge": 0})
    log_completions: bool = field(default=True, metadata={"help": "per-completion columns through log_extra"})
    cache: str | None = field(default=None, metadata={"help": "a SQLite reply-cache file"})
    name: str = field(default="rubric", metadata={"help": "the function name TRL logs the reward under"})
    unscored_reward: float = field(default=0.0, metadata={
        "help": "the number OpenRLHF and verl get for an unscored sample (TRL gets None)"})
    _scoring: Any = field(default=None, init=False, repr=False, compare=False)
    _grading: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = type(self).__name__

        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"{where}: field {name!r} {why}")

        check_fields(self, where)
        if self.rubric_column is not None and not self.rubric_column:
            raise bad("rubric_column", f"must be a column name or null, got {self.rubric_column!r}")
        if not self.metric_prefix or "/" in self.metric_prefix.strip("/"):
            raise bad("metric_prefix", f"must be one non-empty name, got {self.metric_prefix!r}")
        # the nested Scorer sections are typed now, once, not at the first training step
        from ..grading.grader import GradingConfig
        from ..arithmetic import ScoringConfig

        object.__setattr__(self, "_scoring", from_section(ScoringConfig, self.scoring_dict(), f"{where}.scoring"))
        object.__setattr__(self, "_grading", from_section(GradingConfig, self.grading_dict(), f"{where}.grading"))

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
        """The ``scoring`` section as a ScoringConfig (built once, with the config)."""
        return self._scoring

    def grading_config(self) -> Any:
        """The ``grading`` section as a GradingConfig (built once, with the config)."""
        return self._grading

    def judge_configs(self) -> list[Any]:
        """The judges this config names, validated (judge files read, no client built)."""
        from ..judges.config import load_judges

        return load_judges(self.judge, base_url=self.base_url) if self.judge is not None else []

    def replace(self, **changes: Any) -> RewardConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
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
        known = {f.name for f in fields(cls) if f.init}
        serve = merged.get("serve")
        if isinstance(serve, Mapping) and "unscored_reward" in serve:  # where it was first documented
            if "unscored_reward" in merged:
                raise ValueError("RewardConfig: give 'unscored_reward' once, at the top level (not also under 'serve')")
            merged["unscored_reward"] = serve["unscored_reward"]
            merged["serve"] = {k: v for k, v in serve.items() if k != "unscored_reward"}
        for section in (_OTHER_SECTIONS - known) & set(merged):
            log.debug("reward config: section %r is for another path; the %s ignores it", section, cls.__name__)
            merged.pop(section)
        if base_dir is not None:
            for key in _INPUT_PATHS:
                if key in merged:
                    merged[key] = _resolve_path(merged[key], Path(base_dir), judge=key == "judge")
        return from_section(cls, merged, cls.__name__)

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
