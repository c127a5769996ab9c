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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..rewards.config import RewardConfig
from ..rewards.records import REWARD_FIELDS
from ..io.sections import check_fields

__all__ = ["REWARD_FIELDS", "ServeConfig", "ServerSettings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """The ``serve:`` section: where to listen, request limits, auth, shutdown.

    ``auth_token_env`` names the environment variable that holds the bearer token (the token itself
    never goes in a file; the header is checked before a body is read). ``read_timeout_s`` and
    ``max_connections`` bound what slow, idle or half-open clients can hold. (``unscored_reward``, once here, is a top-level field now; it is still
    read from this section.) ``shutdown_timeout_s`` bounds how long SIGTERM waits for accepted requests (default: the
    request deadline plus 10 s).
    """

    host: str = field(default="127.0.0.1", metadata={"help": "the address to listen on"})
    port: int = field(default=8000, metadata={"help": "the port to listen on", "ge": 0, "le": 65535})
    max_body_bytes: int = field(default=16 * 1024 * 1024, metadata={"help": "larger bodies get 413", "ge": 1})
    max_batch_items: int = field(default=1024, metadata={"help": "more items per request get 413", "ge": 1})
    auth_token_env: str | None = field(default=None, metadata={
        "help": "the environment variable holding the bearer token (the token never goes in a file)"})
    shutdown_timeout_s: float | None = field(default=None, metadata={
        "help": "how long SIGTERM waits for accepted requests (default: deadline_s + 10)", "ge": 0})
    read_timeout_s: float = field(default=15.0, metadata={"gt": 0, "help": (
        "seconds a connection has to send a complete request head, from connecting or from its previous "
        "answer (an idle keep-alive connection is closed then too), and a request's body, from its head "
        "(a late body gets 408); slow or half-open clients are closed")})
    max_connections: int | None = field(default=None, metadata={"ge": 1, "help": (
        "open connections at most (default: 1024, or a quarter of the open-file limit when that is lower: the "
        "judges' connections and a burst of new ones need the rest); a new connection past it closes the oldest "
        "one with no request in progress, or is refused (503) when every one is busy")})

    def __post_init__(self) -> None:
        check_fields(self, "serve")
        if self.auth_token_env is not None and not str(self.auth_token_env).replace("_", "").isalnum():
            raise ValueError("serve: field 'auth_token_env' must name an environment variable (the token itself "
                             "never goes in a file)")

    def connection_cap(self) -> int:
        """``max_connections``, or its default: 1024, at most a quarter of the process's open-file limit."""
        if self.max_connections is not None:
            return self.max_connections
        try:
            import resource

            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        except (ImportError, OSError, ValueError):  # no such limit here (Windows)
            return 1024
        return 1024 if soft == resource.RLIM_INFINITY else max(8, min(1024, soft // 4))

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

    serve: ServerSettings | Mapping[str, Any] | None = field(default_factory=ServerSettings, metadata={
        "help": "where to listen, request limits, auth, shutdown (ServerSettings)"})

    def __post_init__(self) -> None:
        super().__post_init__()  # types every field, the serve: section included
        if self.serve is None:
            object.__setattr__(self, "serve", ServerSettings())

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
