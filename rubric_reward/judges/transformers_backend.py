"""Local judge on transformers (CPU or GPU), for offline use and small judges.

Two verdict modes (``JudgeConfig.verdict_mode``):

* ``"logprob"`` (default here): every allowed label (from the request's schema) is scored as a
  continuation of the forced answer prefix, in one batched forward pass; label probabilities are
  normalised over the allowed labels, so any model, however small, yields a well-formed verdict plus
  P(label). Single-criterion requests only; multi-criterion requests fall back to generation.
* ``"generate"``: greedy generation of the JSON answer, parsed by the same strict parser as remote
  judges.

Batching (left padding, worker thread) comes from :class:`~rubric_reward.judges.local.BatchingBackend`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..results import Usage
from .base import ChatReply, ChatRequest
from .config import JudgeConfig
from .local import ANSWER_PREFIX, BatchingBackend, allowed_labels, label_reply

__all__ = ["TransformersBackend"]


class TransformersBackend(BatchingBackend):
    """Judge with a local causal LM; see the module docstring for the two verdict modes."""

    def __init__(self, config: JudgeConfig, *, max_batch: int = 16, model: Any = None, tokenizer: Any = None):
        super().__init__(config, max_batch=max_batch)
        self._model = model
        self._tokenizer = tokenizer

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

    def prepare(self) -> None:
        if self._model is None:
            self._load()
        self._tokenizer.padding_side = "left"
        if self._tokenizer.pad_token is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token

    def _prompt_text(self, request: ChatRequest) -> str:
        return self._tokenizer.apply_chat_template(list(request.messages), tokenize=False, add_generation_prompt=True)

    def generate(self, requests: list[ChatRequest]) -> list[ChatReply]:
        import torch

        tok = self._tokenizer
        texts = [self._prompt_text(r) for r in requests]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self._model.device)
        max_new = max(r.max_tokens or self.config.max_tokens for r in requests)
        sampling: dict[str, Any] = {"do_sample": False}
        if self.config.temperature > 0:  # e.g. K candidate rubrics; greedy otherwise
            sampling = {"do_sample": True, "temperature": self.config.temperature, "top_p": self.config.top_p or 1.0}
            # seeded per batch (config seed + the batch's requests and sample indexes): reproducible when
            # the same requests are batched together; the global RNG is restored afterwards
            blob = repr([(self.config.seed, r.sample_index, r.messages) for r in requests]).encode()
            batch_seed = int.from_bytes(hashlib.blake2b(blob, digest_size=4).digest(), "big")
        with torch.inference_mode(), torch.random.fork_rng(devices=[]):
            if sampling["do_sample"]:
                torch.manual_seed(batch_seed)
            out = self._model.generate(**enc, max_new_tokens=max_new, pad_token_id=tok.pad_token_id, **sampling)
        new = out[:, enc["input_ids"].shape[1]:]
        replies = []
        for row, mask in zip(new, enc["attention_mask"], strict=True):
            ids = [t for t in row.tolist() if t != tok.pad_token_id]
            if tok.eos_token_id in ids:
                ids = ids[: ids.index(tok.eos_token_id)]
            text = tok.decode(ids, skip_special_tokens=True)
            replies.append(ChatReply(text, usage=Usage(int(mask.sum()), len(ids)), finish_reason="stop"))
        return replies

    def score_labels(self, requests: list[ChatRequest]) -> list[ChatReply]:
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
        return [label_reply(totals[i], prompt_tokens[i]) for i in range(len(requests))]
