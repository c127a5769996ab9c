"""The reward service config (``reward.yaml``): a dataclass that maps one-to-one onto the YAML.

Top-level fields mean the same as in the TRL plugin's ``RewardConfig`` (judge, base_url, rubric,
rubric_dir, scoring, grading, reward, strip_think, deadline_s, cache), so one file can drive both;
settings only a server or a number-only trainer needs live under ``serve:``. Trainer-side fields of
``RewardConfig`` (rubric_column, guards, ...) are accepted and ignored here, with a log line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["REWARD_FIELDS", "ServeConfig", "ServerSettings"]

log = logging.getLogger(__name__)

REWARD_FIELDS = ("score", "expected_score", "raw_score")
# RewardConfig fields that only matter inside a trainer process (accepted so one file serves both).
_TRAINER_ONLY = frozenset({
    "rubric_column", "max_unscorable_fraction", "max_unscorable_steps", "guards", "length_penalty",
    "metric_prefix",
})


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """The ``serve:`` section: where to listen, request limits, auth, and the unscored fallback.

    ``auth_token_env`` names the environment variable that holds the bearer token (the token itself
    never goes in a file). ``unscored_reward`` is the number sent to trainers that cannot take a
    missing reward (OpenRLHF, verl); the entry is still marked unscored next to it.
    ``shutdown_timeout_s`` bounds how long SIGTERM waits for accepted requests (default: the
    request deadline plus 10 s).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 16 * 1024 * 1024
    max_batch_items: int = 1024
    auth_token_env: str | None = None
    unscored_reward: float = 0.0
    shutdown_timeout_s: float | None = None

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"serve config: field 'serve.{name}' {why}")

        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise bad("port", f"must be an integer in 0..65535, got {self.port!r}")
        for name in ("max_body_bytes", "max_batch_items"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise bad(name, f"must be a positive integer, got {v!r}")
        if self.auth_token_env is not None and not str(self.auth_token_env).replace("_", "").isalnum():
            raise bad("auth_token_env", "must name an environment variable (the token itself never goes in a file)")
        if isinstance(self.unscored_reward, bool) or not isinstance(self.unscored_reward, int | float):
            raise bad("unscored_reward", f"must be a number, got {self.unscored_reward!r}")
        if self.shutdown_timeout_s is not None and self.shutdown_timeout_s < 0:
            raise bad("shutdown_timeout_s", f"must be >= 0, got {self.shutdown_timeout_s}")

    def auth_token(self) -> str | None:
        """The bearer token, read from the named environment variable (None when auth is off)."""
        if not self.auth_token_env:
            return None
        token = os.environ.get(self.auth_token_env, "")
        if not token:
            raise ValueError(f"serve config: 'serve.auth_token_env' names {self.auth_token_env}, "
                             "but that environment variable is empty or unset")
        return token


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """What the reward service (and the verl / OpenRLHF adapters judging locally) runs.

    ``judge``: anything ``Scorer`` takes (model string, JudgeConfig mapping, list = ensemble, judge
    YAML path); None serves programmatic-check rubrics only. ``rubric``: the default rubric for items
    that bring none. ``rubric_dir``: a folder of ``<id>.yaml|.yml|.json`` files, or one YAML file
    mapping ids to rubrics, for rubrics named by id. ``reward``: which score becomes the reward.
    ``deadline_s``: per request; unfinished verdicts become explicit DEADLINE failures.
    ``cache``: a SQLite reply-cache path, or None.
    """

    judge: Any = None
    base_url: str | None = None
    rubric: Any = None
    rubric_dir: str | None = None
    scoring: Mapping[str, Any] = field(default_factory=lambda: {"abstention": "zero", "on_failure": "unscored"})
    grading: Mapping[str, Any] = field(default_factory=dict)
    reward: str = "score"
    strip_think: bool = True
    deadline_s: float | None = 300.0
    cache: str | None = None
    serve: ServerSettings = ServerSettings()

    def __post_init__(self) -> None:
        from ..grader import GradingConfig
        from ..scoring import ScoringConfig

        if self.reward not in REWARD_FIELDS:
            raise ValueError(f"serve config: field 'reward' must be one of {', '.join(REWARD_FIELDS)}, "
                             f"got {self.reward!r}")
        if self.deadline_s is not None and (isinstance(self.deadline_s, bool) or not self.deadline_s > 0):
            raise ValueError(f"serve config: field 'deadline_s' must be a positive number or null, got {self.deadline_s!r}")
        if not isinstance(self.strip_think, bool):
            raise ValueError("serve config: field 'strip_think' must be true or false")
        for name, cls in (("scoring", ScoringConfig), ("grading", GradingConfig)):
            value = getattr(self, name)
            if isinstance(value, cls):
                continue
            if not isinstance(value, Mapping):
                raise ValueError(f"serve config: field {name!r} must be a mapping, got {type(value).__name__}")
            try:
                cls(**value)
            except TypeError as exc:
                raise ValueError(f"serve config: field {name!r}: {exc}") from None
            except ValueError as exc:
                raise ValueError(f"serve config: field {name!r}: {exc}") from None
        if isinstance(self.serve, Mapping):
            known = {f.name for f in fields(ServerSettings)}
            unknown = set(self.serve) - known
            if unknown:
                raise ValueError(f"serve config: unknown field(s) {sorted('serve.' + k for k in unknown)}; "
                                 f"known: {sorted(known)}")
            object.__setattr__(self, "serve", ServerSettings(**self.serve))
        elif self.serve is None:
            object.__setattr__(self, "serve", ServerSettings())

    # ------------------------------------------------------------------ built objects
    def scoring_config(self) -> Any:
        from ..scoring import ScoringConfig

        return self.scoring if isinstance(self.scoring, ScoringConfig) else ScoringConfig(**self.scoring)

    def grading_config(self) -> Any:
        from ..grader import GradingConfig

        return self.grading if isinstance(self.grading, GradingConfig) else GradingConfig(**self.grading)

    @property
    def shutdown_timeout_s(self) -> float:
        if self.serve.shutdown_timeout_s is not None:
            return float(self.serve.shutdown_timeout_s)
        return (self.deadline_s or 300.0) + 10.0

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base_dir: str | Path | None = None) -> ServeConfig:
        """Build from a parsed mapping; relative input paths resolve against ``base_dir``."""
        if not isinstance(d, Mapping):
            raise ValueError(f"serve config: expected a mapping, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        ignored = sorted(set(d) & _TRAINER_ONLY)
        if ignored:
            log.info("serve config: trainer-side field(s) %s are ignored by the service", ignored)
        unknown = set(d) - known - _TRAINER_ONLY
        if unknown:
            raise ValueError(f"serve config: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        d = {k: v for k, v in d.items() if k in known}
        if base_dir is not None:
            base = Path(base_dir)

            def resolve(p: Any) -> Any:
                if isinstance(p, str) and not Path(p).is_absolute() and (base / p).exists():
                    return os.path.normpath(base / p)
                return p

            for key in ("rubric", "rubric_dir"):
                d[key] = resolve(d.get(key))
            judge = d.get("judge")
            if isinstance(judge, str) and judge.endswith((".yaml", ".yml", ".json")):
                d["judge"] = resolve(judge)
        return cls(**d)

    @classmethod
    def from_yaml(cls, path: str | Path) -> ServeConfig:
        import yaml

        path = Path(path)
        if not path.exists():
            raise ValueError(f"{path}: no such config file")
        try:
            obj = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML: {exc}") from None
        try:
            return cls.from_dict(obj or {}, base_dir=path.parent)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def load(cls, source: ServeConfig | Mapping[str, Any] | str | Path | None) -> ServeConfig:
        if isinstance(source, ServeConfig):
            return source
        if source is None:
            return cls()
        if isinstance(source, Mapping):
            return cls.from_dict(source)
        return cls.from_yaml(source)
