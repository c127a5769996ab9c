"""The judge transport boundary: chat requests in, chat replies out, never an exception.

Every backend (fast OpenAI-compatible HTTP, litellm, local transformers, in-process vLLM) implements
:class:`Backend`. Errors come back as ``ChatReply.error`` so callers can record them as data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..results import JudgeError, Usage

__all__ = ["Backend", "ChatReply", "ChatRequest", "JudgeLike", "ReplyCache", "TokenLogprob"]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat completion to run. ``schema`` is the JSON schema the answer must follow."""

    messages: tuple[Mapping[str, str], ...]
    schema: Mapping[str, Any] | None = None
    max_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    sample_index: int = 0  # distinguishes repeated samples of the same request (ensembles, caching)
    # routing only (never in a cache key): requests with the same affinity go to the same replica of a pool
    # (one response's criterion calls share their prompt prefix); None: the last message decides
    affinity: str | None = None


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token with its log-probability and the top alternatives at that position."""

    token: str
    logprob: float
    top: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatReply:
    text: str | None
    error: JudgeError | None = None
    usage: Usage = Usage()
    cost: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    cached: bool = False
    logprobs: tuple[TokenLogprob, ...] | None = None
    finish_reason: str | None = None
    retry_after_s: float | None = None  # a server's Retry-After, for the retry layer

    @property
    def ok(self) -> bool:
        return self.error is None


@runtime_checkable
class Backend(Protocol):
    """Something that answers chat requests. ``complete`` must not raise."""

    name: str

    async def complete(self, request: ChatRequest) -> ChatReply: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ReplyCache(Protocol):
    """A cache of successful replies, consulted by the transport before any request is sent.

    Implementations key on everything that changes the answer (endpoint, model, sampling
    parameters, messages, schema, sample index) and never on secrets; they store only successes.
    A hit normally costs nothing new (the transport zeroes its cost); a hit returned with
    ``cached=True`` *and* a non-zero ``cost`` is billed to the caller now, once (a reply paid for
    by a killed invocation of the same run, see :class:`~rubric_reward.judges.cache.SQLiteCache`).
    """

    async def get(self, config: Any, request: ChatRequest) -> ChatReply | None: ...

    async def put(self, config: Any, request: ChatRequest, reply: ChatReply) -> None: ...


@runtime_checkable
class JudgeLike(Protocol):
    """The Judge protocol: what grading reads of a judge (:class:`~rubric_reward.judges.judge.Judge` is one).

    ``config`` is its :class:`~rubric_reward.judges.config.JudgeConfig` (samples, weight, mode, deadlines);
    ``caches`` whether replies are cached; ``limiter`` the endpoint limiter its calls take slots of (judges of
    one endpoint share one, counted once); ``nonce_salt()`` the persistent key of group-mode response ids its
    reply cache keeps (None: no such cache); ``complete`` never raises, and takes the grader's vetting as
    ``accept`` (a reply it refuses is not cached, and counts against the replica that gave it).
    """

    config: Any

    @property
    def name(self) -> str: ...

    @property
    def caches(self) -> bool: ...

    @property
    def limiter(self) -> Any: ...

    def nonce_salt(self) -> bytes | None: ...

    async def complete(self, request: ChatRequest, *, accept: Any = None) -> ChatReply: ...

    async def aclose(self) -> None: ...
