"""The transport: everything between "ask this judge" and one backend attempt.

    cache -> in-flight dedupe -> per attempt: endpoint limits -> backend, under one retry policy

* **Cache** (optional, any :class:`~.base.ReplyCache`): a hit is returned with ``cached=True``,
  ``attempts=0`` and no cost. Only successful replies that the caller accepts are stored.
* **Vetting**: the caller's ``accept`` (the grader's parse) also goes to a backend that takes it, so a
  pool of replicas counts an answer nobody can use against the replica that gave it (:mod:`.replicas`).
* **Dedupe**, per request: identical requests in flight on one event loop share one backend call,
  and inside a :func:`batch_scope` so do identical requests anywhere in the batch (a successful
  reply is kept until the batch ends: rubrics that share a criterion ask it once per response); the
  others get the reply marked ``cached=True``, ``attempts=0``, ``cost=0`` (they cost nothing new).
  Identical whole items were already folded into one by ``Grader.grade_many``.
* **Limits**: every attempt takes a slot and rate budget of the endpoint's limiter; a backoff sleep
  holds neither. A 429 with Retry-After pauses the whole endpoint.
* **Retries**: :class:`~.retry.RetryPolicy`. ``attempts`` on the reply counts HTTP attempts, ``usage``
  and ``cost`` sum over them.
* **Deadlines**: ``call_deadline_s`` bounds a logical call; a batch deadline (:func:`batch_scope`,
  used by the grader, or ``JudgeConfig.batch_deadline_s``) bounds every call of a batch. A call
  cut by a deadline returns a DEADLINE error: a failure, never a hidden or invented verdict.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import inspect
import json
import logging
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..util.deadlines import earliest
from ..results import ErrorKind, JudgeError, Usage
from .base import Backend, ChatReply, ChatRequest, ReplyCache
from .http import redact
from .limits import EndpointLimiter, endpoint_limiter
from .retry import RETRYABLE, RetryPolicy

__all__ = ["Transport", "batch_scope", "request_key"]

log = logging.getLogger(__name__)
_now = time.monotonic
_NO_USAGE = Usage()

# (batch start, absolute batch deadline or None, replies of this batch by (transport, request key));
# monotonic seconds; set by batch_scope
_BATCH: contextvars.ContextVar[tuple[float, float | None, dict[tuple, ChatReply]] | None] = contextvars.ContextVar(
    "rubric_reward_batch", default=None
)


@contextmanager
def batch_scope(deadline_s: float | None = None) -> Iterator[None]:
    """Mark the calls started inside (and in tasks created inside) as one batch.

    ``deadline_s`` bounds all of them; a judge's own ``batch_deadline_s`` also counts from here.
    """
    start = _now()
    token = _BATCH.set((start, None if deadline_s is None else start + deadline_s, {}))
    try:
        yield
    finally:
        _BATCH.reset(token)


def _plain_messages(messages: Any) -> tuple[str, ...] | None:
    """Messages that are all ``{"role": str, "content": str}`` as one flat tuple ``(role, content, role, ...)``
    (one object for the key instead of one per message and item); None for any other shape."""
    flat: list[str] = []
    for m in messages:
        if type(m) is not dict or len(m) != 2:
            return None
        role, content = m.get("role"), m.get("content")
        if type(role) is not str or type(content) is not str:
            return None
        flat += (role, content)
    return tuple(flat)


def request_key(request: ChatRequest) -> tuple:
    """A hashable key of everything in ``request`` that changes the answer."""
    messages: Any = _plain_messages(request.messages)
    if messages is None:
        try:
            messages = tuple(tuple(m.items()) for m in request.messages)
            hash(messages)
        except TypeError:  # content parts (lists) inside a message
            messages = json.dumps(request.messages, sort_keys=True, default=str)
    # repr, not canonical JSON: the same construction gives the same text (a differently ordered but
    # equal schema only misses a dedupe), at a third of the cost
    schema = None if request.schema is None else repr(request.schema)
    return (messages, schema, request.max_tokens, request.logprobs, request.top_logprobs, request.sample_index)


def _final(reply: ChatReply, start: float, attempts: int, usage: Usage, cost: float, note: str = "") -> ChatReply:
    """A call's reply: the last attempt's answer with the usage and cost of all attempts."""
    err = reply.error
    if err is not None and (note or attempts > 1):
        err = JudgeError(err.kind, f"{err.message} ({note or f'gave up after {attempts} attempts'})", err.status)
    # the constructor, not dataclasses.replace: this runs once per call
    return ChatReply(reply.text, err, usage, cost, _now() - start, attempts, reply.cached, reply.logprobs,
                     reply.finish_reason, reply.retry_after_s)


def _free(reply: ChatReply, latency_s: float) -> ChatReply:
    """A reply that cost this caller nothing: served from the cache or a duplicate in flight."""
    return dataclasses.replace(reply, cost=0.0, latency_s=latency_s, attempts=0, cached=True)


class Transport:
    """Drives one backend for one judge config (see the module docstring for the layers)."""

    def __init__(self, config: Any, backend: Backend, *, cache: ReplyCache | None = None,
                 limiter: EndpointLimiter | None = None, dedupe: bool = True):
        self.config = config
        self.backend = backend
        self.cache = cache
        self.limiter = limiter if limiter is not None else endpoint_limiter(config)
        self.policy = RetryPolicy.from_config(config)
        self.dedupe = dedupe
        self._secret = config.api_key()
        try:
            params = inspect.signature(backend.complete).parameters
        except (TypeError, ValueError):
            params = {}
        self._takes_timeout = "timeout_s" in params
        self._takes_accept = "accept" in params  # the vetting hook (backends with replica pools, see complete)
        self._inflight: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, asyncio.Future]] = (
            weakref.WeakKeyDictionary()
        )

    # ------------------------------------------------------------------ cache and dedupe
    async def complete(self, request: ChatRequest,
                       accept: Callable[[ChatReply], bool] | None = None) -> ChatReply:
        """Answer ``request``; never raises (except cancellation). ``accept`` vets a reply: only one it takes
        is cached, and a replica pool counts one it refuses against its replica."""
        start = _now()
        if self.cache is not None:
            try:
                hit = await self.cache.get(self.config, request)
            except Exception as exc:  # a cache is an optimisation: a broken one is a miss
                log.warning("reply cache lookup failed: %s", redact(f"{type(exc).__name__}: {exc}", self._secret))
                hit = None
            if hit is not None and hit.error is None:
                if hit.cached and hit.cost:  # paid for earlier by this run and never billed: billed now, once
                    return dataclasses.replace(hit, latency_s=_now() - start, attempts=0, cached=False)
                return _free(hit, _now() - start)
        if not self.dedupe:
            return await self._store(request, await self._send(request, accept), accept)

        key = request_key(request)
        batch = _BATCH.get()
        memo = None if batch is None else batch[2]
        if memo is not None:
            done = memo.get((id(self), key))
            if done is not None:
                return _free(done, _now() - start)
        loop = asyncio.get_running_loop()
        table = self._inflight.get(loop)
        if table is None:
            table = self._inflight[loop] = {}
        shared = table.get(key)
        if shared is not None:
            reply = await asyncio.shield(shared)
            if reply is None:  # the first caller was cancelled: ask again ourselves
                return await self.complete(request, accept)
            return _free(reply, _now() - start)
        shared = table[key] = loop.create_future()
        reply = None
        try:
            reply = await self._send(request, accept)
        finally:
            del table[key]
            shared.set_result(reply)
        if memo is not None and reply.error is None:
            memo[(id(self), key)] = reply
        return await self._store(request, reply, accept)

    async def _store(self, request: ChatRequest, reply: ChatReply,
                     accept: Callable[[ChatReply], bool] | None) -> ChatReply:
        if self.cache is not None and reply.error is None and reply.text and (accept is None or accept(reply)):
            try:
                await self.cache.put(self.config, request, reply)
            except Exception as exc:
                log.warning("reply cache store failed: %s", redact(f"{type(exc).__name__}: {exc}", self._secret))
        return reply

    # ------------------------------------------------------------------ attempts
    def _deadline(self, start: float) -> float | None:
        """When this call is cut (monotonic): the earliest of its own deadline, the batch's, and this judge's
        own batch deadline counted from the batch's start (:mod:`rubric_reward.util.deadlines`)."""
        cfg = self.config
        call = None if cfg.call_deadline_s is None else start + cfg.call_deadline_s
        batch = _BATCH.get()
        if batch is None:
            return call
        own = earliest(None if batch[1] is None else batch[1] - batch[0], cfg.batch_deadline_s)
        return earliest(call, None if own is None else batch[0] + own)

    def _estimate_tokens(self, request: ChatRequest) -> int:
        chars = sum(len(c) if isinstance(c := m.get("content") or "", str) else len(str(c))
                    for m in request.messages)
        return chars // 4 + 1 + (request.max_tokens or self.config.max_tokens)

    async def _attempt(self, request: ChatRequest, timeout: float,
                       accept: Callable[[ChatReply], bool] | None) -> ChatReply:
        try:
            if self._takes_timeout:
                if accept is not None and self._takes_accept:
                    return await self.backend.complete(request, timeout_s=timeout, accept=accept)
                return await self.backend.complete(request, timeout_s=timeout)
            if timeout < self.config.timeout_s:
                return await asyncio.wait_for(self.backend.complete(request), timeout)
            return await self.backend.complete(request)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            return ChatReply(None, JudgeError(ErrorKind.TIMEOUT, f"no answer within {timeout:.3g}s"))
        except Exception as exc:  # Backend.complete must not raise; if one does, it is reported, not raised
            backend = type(self.backend).__name__
            log.error("backend %s raised %s", backend, redact(f"{type(exc).__name__}: {exc}", self._secret))
            msg = f"backend {backend} raised {type(exc).__name__}; details in the log"
            return ChatReply(None, JudgeError(ErrorKind.INTERNAL, msg))

    def _cut_off(self, start: float, deadline: float | None, attempts: int, last: ChatReply | None, usage: Usage,
                 cost: float) -> ChatReply:
        cfg = self.config
        which = "call" if cfg.call_deadline_s is not None and deadline == start + cfg.call_deadline_s else "batch"
        msg = f"the {which} deadline passed after {attempts} attempt(s)"
        if last is not None and last.error is not None:
            msg += f"; last error: {last.error}"
        return ChatReply(None, JudgeError(ErrorKind.DEADLINE, msg), usage=usage, cost=cost,
                         attempts=attempts, latency_s=_now() - start)

    async def _send(self, request: ChatRequest, accept: Callable[[ChatReply], bool] | None = None) -> ChatReply:
        cfg, limiter = self.config, self.limiter
        start = _now()
        deadline = self._deadline(start)
        tokens = self._estimate_tokens(request) if limiter.tpm is not None else 0
        attempts, usage, cost, retries = 0, _NO_USAGE, 0.0, 0
        last: ChatReply | None = None
        # no closures here: their cells would be a tenth of the objects each call leaves to the garbage collector
        while True:
            timeout = cfg.timeout_s
            if deadline is not None:
                left = deadline - _now()
                if left <= 0 or not await limiter.acquire(tokens, left):
                    return self._cut_off(start, deadline, attempts, last, usage, cost)
                left = deadline - _now()
                if left <= 0:
                    limiter.release(tokens, 0)
                    return self._cut_off(start, deadline, attempts, last, usage, cost)
                timeout = min(timeout, left)
            elif not await limiter.acquire(tokens, None):  # pragma: no cover - no timeout, always acquires
                return self._cut_off(start, deadline, attempts, last, usage, cost)
            used = tokens
            try:
                reply = await self._attempt(request, timeout, accept)
                if reply.usage.prompt_tokens or reply.usage.completion_tokens:
                    used = reply.usage.total_tokens
                elif reply.error is not None and reply.error.kind is ErrorKind.RATE_LIMIT:
                    used = 0
            finally:
                limiter.release(tokens, used)
            attempts += reply.attempts
            if reply.usage.prompt_tokens or reply.usage.completion_tokens:
                usage = reply.usage if usage is _NO_USAGE else usage + reply.usage  # Usage is frozen
                cost += reply.cost
            err = reply.error
            if err is None or err.kind not in RETRYABLE:
                return _final(reply, start, attempts, usage, cost)
            last = reply
            if deadline is not None and timeout < cfg.timeout_s and err.kind is ErrorKind.TIMEOUT:
                # the deadline, not the per-attempt timeout, cut this attempt
                return self._cut_off(start, deadline, attempts, last, usage, cost)
            if retries >= self.policy.max_retries:
                return _final(reply, start, attempts, usage, cost)
            retries += 1
            delay = self.policy.delay(retries, reply.retry_after_s)
            if delay is None:
                return _final(reply, start, attempts, usage, cost,
                              f"Retry-After {reply.retry_after_s:.3g}s exceeds backoff_max_s; "
                              f"gave up after {attempts} attempt(s)")
            if reply.retry_after_s and err.kind is ErrorKind.RATE_LIMIT:
                limiter.pause(reply.retry_after_s)
            if deadline is not None and _now() + delay >= deadline:
                return self._cut_off(start, deadline, attempts, last, usage, cost)
            await asyncio.sleep(delay)
