"""Local judge on transformers (CPU or GPU), for offline use and small judges.

Two verdict modes (``JudgeConfig.verdict_mode``):

* ``"logprob"`` (default here): the answer is forced to ``{"reason": "", "verdict": "`` and every
  allowed label (from the request's schema) is scored as a continuation, closing quote included, in
  one batched forward pass. The label probabilities are normalised over the allowed labels, so any
  model, however small, yields a well-formed verdict plus P(label). Single-criterion requests only;
  multi-criterion requests fall back to generation.
* ``"generate"``: greedy generation of the JSON answer, parsed by the same strict parser as remote
  judges.

Concurrent requests are collected into batches (left padding) and run in a worker thread, so the
event loop stays free. The reply has the same shape as a remote judge's, logprobs included.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Mapping
from typing import Any

from ..results import ErrorKind, JudgeError, Usage
from .base import ChatReply, ChatRequest, TokenLogprob
from .config import JudgeConfig

__all__ = ["ANSWER_PREFIX", "TransformersBackend", "allowed_labels"]

ANSWER_PREFIX = '{"reason": "", "verdict": "'


def allowed_labels(schema: Mapping[str, Any] | None) -> list[str] | None:
    """The verdict labels a single-criterion request allows, or None for other schemas."""
    try:
        return list(schema["properties"]["verdict"]["enum"])  # type: ignore[index]
    except (KeyError, TypeError):
        return None


class TransformersBackend:
    """Judge with a local causal LM; see the module docstring for the two verdict modes."""

    def __init__(self, config: JudgeConfig, *, max_batch: int = 16, model: Any = None, tokenizer: Any = None):
        self.config = config
        self.name = config.name
        self.max_batch = max_batch
        self._model = model
        self._tokenizer = tokenizer
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None
        self._load_lock: asyncio.Lock | None = None

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise ImportError(
                "the transformers judge needs torch and transformers: pip install 'rubric-reward[train]'"
            ) from exc
        from ..models import resolve_model

        path = resolve_model(self.config.model)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        self._tokenizer = AutoTokenizer.from_pretrained(path)
        self._model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()

    def _prepare(self) -> None:
        if self._model is None:
            self._load()
        self._tokenizer.padding_side = "left"
        if self._tokenizer.pad_token is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token

    async def _ensure_worker(self) -> None:
        if self._load_lock is None:
            self._load_lock = asyncio.Lock()
        async with self._load_lock:
            await asyncio.to_thread(self._prepare)
            if self._queue is None or self._worker is None or self._worker.done():
                self._queue = asyncio.Queue()
                self._worker = asyncio.create_task(self._run_batches())

    # ------------------------------------------------------------------ batching
    async def complete(self, request: ChatRequest) -> ChatReply:
        start = time.perf_counter()
        try:
            await self._ensure_worker()
        except Exception as exc:
            return ChatReply(None, JudgeError(ErrorKind.CLIENT, f"could not load {self.config.model!r}: {exc}"))
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        await self._queue.put((request, future))
        reply: ChatReply = await future
        return ChatReply(reply.text, reply.error, reply.usage, latency_s=time.perf_counter() - start,
                         logprobs=reply.logprobs, finish_reason=reply.finish_reason)

    async def _run_batches(self) -> None:
        while True:
            batch = [await self._queue.get()]
            await asyncio.sleep(0)  # let concurrent callers enqueue before the batch is cut
            while len(batch) < self.max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                replies = await asyncio.to_thread(self.run_batch, [r for r, _ in batch])
            except Exception as exc:  # a model error fails this batch's calls, not the worker
                err = JudgeError(ErrorKind.INTERNAL, f"{type(exc).__name__}: {exc}")
                replies = [ChatReply(None, err) for _ in batch]
            for (_, fut), reply in zip(batch, replies, strict=True):
                if not fut.done():
                    fut.set_result(reply)

    def run_batch(self, requests: list[ChatRequest]) -> list[ChatReply]:
        """Answer a batch synchronously (also usable without an event loop)."""
        self._prepare()
        mode = self.config.verdict_mode
        replies: list[ChatReply | None] = [None] * len(requests)
        scored = [i for i, r in enumerate(requests) if mode == "logprob" and allowed_labels(r.schema)]
        generated = [i for i in range(len(requests)) if i not in set(scored)]
        if scored:
            for i, reply in zip(scored, self._score_labels([requests[i] for i in scored]), strict=True):
                replies[i] = reply
        if generated:
            for i, reply in zip(generated, self._generate([requests[i] for i in generated]), strict=True):
                replies[i] = reply
        return replies  # type: ignore[return-value]

    def _prompt_text(self, request: ChatRequest) -> str:
        return self._tokenizer.apply_chat_template(list(request.messages), tokenize=False, add_generation_prompt=True)

    def _generate(self, requests: list[ChatRequest]) -> list[ChatReply]:
        import torch

        tok = self._tokenizer
        texts = [self._prompt_text(r) for r in requests]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self._model.device)
        max_new = max(r.max_tokens or self.config.max_tokens for r in requests)
        with torch.inference_mode():
            out = self._model.generate(**enc, max_new_tokens=max_new, do_sample=False, pad_token_id=tok.pad_token_id)
        new = out[:, enc["input_ids"].shape[1]:]
        replies = []
        for row, mask in zip(new, enc["attention_mask"], strict=True):
            ids = [t for t in row.tolist() if t != tok.pad_token_id]
            if tok.eos_token_id in ids:
                ids = ids[: ids.index(tok.eos_token_id)]
            text = tok.decode(ids, skip_special_tokens=True)
            replies.append(ChatReply(text, usage=Usage(int(mask.sum()), len(ids)), finish_reason="stop"))
        return replies

    def _score_labels(self, requests: list[ChatRequest]) -> list[ChatReply]:
        """Score every allowed label as a continuation of the forced answer prefix, in one batch."""
        import torch

        tok = self._tokenizer
        rows: list[tuple[int, str, list[int], int]] = []  # (request index, label, ids, label start)
        for i, r in enumerate(requests):
            prefix_ids = tok(self._prompt_text(r) + ANSWER_PREFIX, add_special_tokens=False)["input_ids"]
            for label in allowed_labels(r.schema) or ():
                label_ids = tok(label + '"', add_special_tokens=False)["input_ids"]
                rows.append((i, label, prefix_ids + label_ids, len(prefix_ids)))
        width = max(len(ids) for _, _, ids, _ in rows)
        pad = tok.pad_token_id
        input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for j, (_, _, ids, _) in enumerate(rows):  # left padding
            input_ids[j, width - len(ids):] = torch.tensor(ids)
            attention[j, width - len(ids):] = 1
        position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
        device = self._model.device
        with torch.inference_mode():
            logits = self._model(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                                 position_ids=position_ids.to(device)).logits.float()
        logprobs = torch.log_softmax(logits, dim=-1).cpu()

        totals: dict[int, dict[str, float]] = {}
        prompt_tokens: dict[int, int] = {}
        for j, (i, label, ids, start) in enumerate(rows):
            offset = width - len(ids)
            # the token at position p is predicted by the logits at p - 1
            lp = sum(float(logprobs[j, offset + p - 1, ids[p]]) for p in range(start, len(ids)))
            totals.setdefault(i, {})[label] = lp
            prompt_tokens[i] = start
        replies = []
        for i in range(len(requests)):
            scores = totals[i]
            norm = math.log(sum(math.exp(v) for v in scores.values()))
            probs = {label: v - norm for label, v in scores.items()}
            best = max(probs, key=probs.__getitem__)
            reason = "logprob verdict: " + ", ".join(f"P({k})={math.exp(v):.3f}" for k, v in probs.items())
            text = json.dumps({"reason": reason, "verdict": best})
            tokens = (
                TokenLogprob(ANSWER_PREFIX, 0.0, {ANSWER_PREFIX: 0.0}),
                TokenLogprob(best, probs[best], probs),
                TokenLogprob('"}', 0.0, {'"}': 0.0}),
            )
            replies.append(ChatReply(text, usage=Usage(prompt_tokens[i], 1), logprobs=tokens, finish_reason="stop"))
        return replies

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except (asyncio.CancelledError, Exception):
                pass
        self._worker = self._queue = None
        self._load_lock = None
