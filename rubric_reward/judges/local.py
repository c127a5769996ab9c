"""Shared machinery of in-process judges (transformers, vLLM): micro-batching and label scoring.

Concurrent ``complete`` calls are queued and cut into batches that run in a worker thread, so the
event loop stays free and the model sees whole batches. In ``logprob`` verdict mode the answer is
forced to ``{"reason": "", "verdict": "`` and each allowed label (closing quote included) is scored as
a continuation; :func:`label_reply` turns the label log-likelihoods into a reply shaped like a remote
judge's, with the normalised label log-probabilities on the verdict token.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..results import ErrorKind, JudgeError, Usage
from .base import ChatReply, ChatRequest, TokenLogprob
from .config import JudgeConfig

__all__ = ["ANSWER_PREFIX", "BatchingBackend", "allowed_labels", "label_reply"]

log = logging.getLogger(__name__)

ANSWER_PREFIX = '{"reason": "", "verdict": "'


def allowed_labels(schema: Mapping[str, Any] | None) -> list[str] | None:
    """The verdict labels a single-criterion request allows, or None for other schemas."""
    try:
        return list(schema["properties"]["verdict"]["enum"])  # type: ignore[index]
    except (KeyError, TypeError):
        return None


def label_reply(scores: Mapping[str, float], prompt_tokens: int) -> ChatReply:
    """A reply choosing the most likely label, with label probabilities normalised over the labels."""
    norm = math.log(math.fsum(math.exp(v) for v in scores.values()))
    probs = {label: v - norm for label, v in scores.items()}
    best = max(probs, key=probs.__getitem__)
    reason = "logprob verdict: " + ", ".join(f"P({k})={math.exp(v):.3f}" for k, v in probs.items())
    tokens = (
        TokenLogprob(ANSWER_PREFIX, 0.0, {ANSWER_PREFIX: 0.0}),
        TokenLogprob(best, probs[best], probs),
        TokenLogprob('"}', 0.0, {'"}': 0.0}),
    )
    return ChatReply(json.dumps({"reason": reason, "verdict": best}), usage=Usage(prompt_tokens, 1),
                     logprobs=tokens, finish_reason="stop")


Report = Callable[[int, ChatReply], None]


def _settle(future: asyncio.Future, reply: ChatReply) -> None:
    if not future.done():
        future.set_result(reply)


class BatchingBackend:
    """Base for in-process judges: subclasses implement :meth:`prepare`, :meth:`score_labels` and
    :meth:`generate`; :meth:`prepare` must be cheap once loaded."""

    def __init__(self, config: JudgeConfig, *, max_batch: int = 256):
        self.config = config
        self.name = config.name
        self.max_batch = max_batch
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None
        self._lock: asyncio.Lock | None = None

    def prepare(self) -> None:
        """Load the model (called once, in a worker thread)."""

    def score_labels(self, requests: list[ChatRequest], report: Report | None = None) -> list[ChatReply]:
        """Answer single-criterion requests by scoring each allowed label (``logprob`` mode).
        ``report(i, reply)``, if given, may be called as soon as request ``i`` is answered."""
        raise NotImplementedError

    def generate(self, requests: list[ChatRequest], report: Report | None = None) -> list[ChatReply]:
        """Answer requests by generating the JSON answer (``report`` as for :meth:`score_labels`)."""
        raise NotImplementedError

    def run_batch(self, requests: list[ChatRequest], report: Report | None = None) -> list[ChatReply]:
        """Answer a batch synchronously (also usable without an event loop); ``report(i, reply)`` is
        called once per request as soon as its reply is ready."""
        self.prepare()
        scored = [i for i, r in enumerate(requests)
                  if self.config.verdict_mode == "logprob" and allowed_labels(r.schema)]
        taken = set(scored)
        generated = [i for i in range(len(requests)) if i not in taken]
        replies: list[ChatReply | None] = [None] * len(requests)

        def reporter(indices: list[int]) -> Report:
            def done(j: int, reply: ChatReply) -> None:
                if replies[indices[j]] is None:
                    replies[indices[j]] = reply
                    if report is not None:
                        report(indices[j], reply)
            return done

        for indices, answer in ((scored, self.score_labels), (generated, self.generate)):
            if indices:
                done = reporter(indices)
                for j, reply in enumerate(answer([requests[i] for i in indices], done)):
                    done(j, reply)
        return replies  # type: ignore[return-value]

    async def _ensure_worker(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._worker is None or self._worker.done():
                await asyncio.to_thread(self.prepare)
                self._queue = asyncio.Queue()
                self._worker = asyncio.create_task(self._run_batches())

    async def complete(self, request: ChatRequest) -> ChatReply:
        start = time.perf_counter()
        try:
            await self._ensure_worker()
        except Exception as exc:
            log.error("could not load %r: %s: %s", self.config.model, type(exc).__name__, exc)
            return ChatReply(None, JudgeError(ErrorKind.CLIENT, f"could not load {self.config.model!r} "
                                              f"({type(exc).__name__}); details in the log"))
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        await self._queue.put((request, future))
        reply: ChatReply = await future
        return dataclasses.replace(reply, latency_s=time.perf_counter() - start)

    async def _run_batches(self) -> None:
        while True:
            batch = [await self._queue.get()]
            await asyncio.sleep(0)  # let concurrent callers enqueue before the batch is cut
            while len(batch) < self.max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            loop = asyncio.get_running_loop()

            def resolve(i: int, reply: ChatReply) -> None:  # in the worker thread, as replies come
                loop.call_soon_threadsafe(_settle, batch[i][1], reply)

            try:
                replies = await asyncio.to_thread(self.run_batch, [r for r, _ in batch], resolve)
            except Exception as exc:  # a model error fails this batch's unanswered calls, not the worker
                log.error("local model batch failed: %s: %s", type(exc).__name__, exc)
                err = JudgeError(ErrorKind.INTERNAL, f"the local model raised {type(exc).__name__}; details in the log")
                replies = [ChatReply(None, err) for _ in batch]
            for (_, fut), reply in zip(batch, replies, strict=True):
                _settle(fut, reply)

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except (asyncio.CancelledError, Exception):
                pass
        self._worker = self._queue = self._lock = None
