"""The one judge-call loop: send a rendered call, read the answer strictly, re-ask once, record the call.

Per-criterion, per-item and group calls all run through :func:`run_call`. What differs between them is
how an answer is read: a *reading* (:class:`Reading`) says whether the answer gave everything the call
asked for and, if not, what is still unusable. The loop never raises. A transport failure or a
deadline is the call's error; an answer still unusable after the one re-ask is a ``parse`` error naming
what was wrong. Every request carries the reading as its ``accept``: a reply cache stores a reply only if
its reading is complete, a replica pool counts an unusable answer against the replica that gave it (the
re-ask goes elsewhere), and the reading is reused (the answer is read once).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from ..judges.base import ChatReply, ChatRequest, JudgeLike
from ..results import CallRecord, ErrorKind, JudgeError

__all__ = ["CallOutcome", "Reading", "RenderedCall", "run_call"]

Messages = tuple[Mapping[str, str], ...]


class RenderedCall(Protocol):
    """What a rendered call carries for the loop (:class:`~.criterion_prompt.JudgeCall`,
    :class:`~.group_prompt.GroupCall`)."""

    messages: Messages
    schema: Mapping[str, Any]
    criteria: Sequence[Any]
    affinity: str | None


class Reading(Protocol):
    """One answer as read for its call."""

    @property
    def complete(self) -> bool:
        """Whether the answer gave every verdict the call asked for."""
        ...

    def unresolved(self, earlier: Sequence[Any]) -> str | None:
        """What is still unusable with this reading and the ``earlier`` readings of the same call, or None."""
        ...


R = TypeVar("R", bound=Reading)


@dataclass(frozen=True, slots=True)
class CallOutcome(Generic[R]):
    """A finished call: each usable answer with its reading (the first, then the re-ask's), and its record."""

    readings: tuple[tuple[ChatReply, R], ...]
    record: CallRecord

    @property
    def error(self) -> JudgeError | None:
        return self.record.error


async def run_call(judge: JudgeLike, call: RenderedCall, *, sample: int, read: Callable[[str | None], R],
                   reask: Callable[[str | None, R], Messages] | None,
                   on_call: Callable[[CallRecord], Any] | None = None) -> CallOutcome[R]:
    """Run ``call`` on ``judge``: one request, ``read`` its answer, and when the reading is incomplete and
    ``reask`` is given, one more request with ``reask(answer, reading)`` as its messages."""
    cfg = judge.config
    request = ChatRequest(call.messages, schema=call.schema, logprobs=cfg.logprobs,
                          top_logprobs=cfg.top_logprobs if cfg.logprobs else 0, sample_index=sample,
                          affinity=call.affinity)
    vetted = _Vetted(read)  # vets for the cache and for replica health (an unusable answer counts against it)
    start = time.perf_counter()
    reply = await judge.complete(request, accept=vetted)
    usage, cost, attempts, cached, error = reply.usage, reply.cost, reply.attempts, reply.cached, reply.error
    readings: list[tuple[ChatReply, R]] = []
    if error is None:
        first = vetted.read_again(reply.text)
        readings.append((reply, first))
        if not first.complete and reask is not None:
            again = replace(request, messages=reask(reply.text, first))
            retry = await judge.complete(again, accept=vetted)
            usage, cost, attempts = usage + retry.usage, cost + retry.cost, attempts + retry.attempts
            cached = cached and retry.cached
            if retry.error is None:
                readings.append((retry, vetted.read_again(retry.text)))
            else:
                error = retry.error
    if error is None:
        why = readings[-1][1].unresolved([r for _, r in readings[:-1]])
        if why is not None:
            error = JudgeError(ErrorKind.PARSE, why + (" (after one re-ask)" if len(readings) > 1 else ""))
    record = CallRecord(judge=judge.name, criteria=tuple(c.name for c in call.criteria), usage=usage, cost=cost,
                        latency_s=time.perf_counter() - start, attempts=attempts, cached=cached, error=error)
    if on_call is not None:
        on_call(record)
    return CallOutcome(tuple(readings), record)


class _Vetted:
    """A call's ``accept``: a reply is accepted (cached, counted healthy) only if its reading is complete, and
    the reading is kept, so the loop reads the same reply once (not once to vet it and again for its verdicts)."""

    __slots__ = ("read", "text", "reading")

    def __init__(self, read: Callable[[str | None], Any]):
        self.read, self.text, self.reading = read, None, None

    def __call__(self, reply: ChatReply) -> bool:
        return bool(self.read_again(reply.text).complete)

    def read_again(self, text: str | None) -> Any:
        """The reading of ``text``: the kept one when it is the text last read (the pool and the cache vet the
        same reply), else a new one, kept."""
        if self.reading is None or text is not self.text:
            self.text, self.reading = text, self.read(text)
        return self.reading
