"""The reward service config (``reward.yaml``): the reward core's ``RewardConfig`` plus a ``serve:`` section.

Every top-level field is a :class:`~rubric_reward.rewards.config.RewardConfig` field and means the
same on every path (one file drives the TRL plugin, the service and the adapters, with the same
defaults); settings only a server or a number-only trainer needs live under ``serve:``. Fields only
the TRL plugin uses (``guards.truncated``, ``length_penalty``, the unscorable streak, metrics) are
accepted; when one is switched on, the service says once that it does not apply here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..rewards.config import RewardConfig
from ..rewards.records import REWARD_FIELDS

__all__ = ["REWARD_FIELDS", "ServeConfig", "ServerSettings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """The ``serve:`` section: where to listen, request limits, auth, shutdown.

    ``auth_token_env`` names the environment variable that holds the bearer token (the token itself
    never goes in a file). (``unscored_reward``, once here, is a top-level field now; it is still
    read from this section.) ``shutdown_timeout_s`` bounds how long SIGTERM waits for accepted requests (default: the
    request deadline plus 10 s).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 16 * 1024 * 1024
    max_batch_items: int = 1024
    auth_token_env: str | None = None
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


@dataclass(frozen=True)
class ServeConfig(RewardConfig):
    """What the reward service runs: every :class:`RewardConfig` field, plus ``serve`` (:class:`ServerSettings`).

    ``deadline_s`` applies per request (a request may lower it); unfinished verdicts become explicit
    DEADLINE failures. ``rubric`` is the default for items that bring none.
    """

    serve: ServerSettings | Mapping[str, Any] | None = field(default_factory=ServerSettings)

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.serve, Mapping):
            known = {f.name for f in fields(ServerSettings)}
            unknown = set(self.serve) - known
            if unknown:
                raise ValueError(f"serve config: unknown field(s) {sorted('serve.' + k for k in unknown)}; "
                                 f"known: {sorted(known)}")
            object.__setattr__(self, "serve", ServerSettings(**self.serve))
        elif self.serve is None:
            object.__setattr__(self, "serve", ServerSettings())
        elif not isinstance(self.serve, ServerSettings):
            raise ValueError(f"serve config: field 'serve' must be a mapping, got {type(self.serve).__name__}")

    def trainer_only_settings(self) -> list[str]:
        """The trainer-side settings switched on here, which the service does not apply."""
        on = []
        if self.guards.truncated:
            on.append("guards.truncated")
        if self.length_penalty.enabled:
            on.append("length_penalty")
        return on

    @property
    def shutdown_timeout_s(self) -> float:
        if self.serve.shutdown_timeout_s is not None:
            return float(self.serve.shutdown_timeout_s)
        return (self.deadline_s or 300.0) + 10.0

    @classmethod
    def load(cls, source: ServeConfig | RewardConfig | Mapping[str, Any] | str | Path | None) -> ServeConfig:
        return cls.coerce(source)
