"""The straightforward local-judge computation, kept as a reference for equality tests and the benchmark.

This is the transformers judge as it was before token trees: one full left-padded row per (request,
allowed label), full-vocabulary log-softmax at every position, and ``model.generate`` for the JSON
answer. Slow and memory-hungry, but obviously right.
"""

from __future__ import annotations

from typing import Any

from rubric_reward.judges.base import ChatReply, ChatRequest
from rubric_reward.judges.local import ANSWER_PREFIX, allowed_labels, label_reply
from rubric_reward.judges.transformers_backend import TransformersBackend
from rubric_reward.results import Usage


def reference_label_logprobs(model: Any, tok: Any, prompt_text: str, labels: list[str]) -> dict[str, float]:
    """Sum of log P(label token | everything before) for each label after ``prompt_text`` + the answer prefix,
    each label in its own full forward pass (no batching, no padding)."""
    import torch

    prefix = tok(prompt_text + ANSWER_PREFIX, add_special_tokens=False)["input_ids"]
    out = {}
    for label in labels:
        ids = prefix + tok(label + '"', add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            logprobs = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits.float(), dim=-1)[0]
        out[label] = sum(float(logprobs[p - 1, ids[p]]) for p in range(len(prefix), len(ids)))
    return out


class ReferenceTransformersBackend(TransformersBackend):
    """The old batched implementation (one row per label, left padding, full logits), counting token slots."""

    def __init__(self, config: Any, *, max_batch: int = 16, **kw: Any):
        super().__init__(config, max_batch=max_batch, **kw)
        self.token_slots = 0

    def score_labels(self, requests: list[ChatRequest], report: Any = None) -> list[ChatReply]:
        import torch

        tok = self._tokenizer
        rows: list[tuple[int, str, list[int], int]] = []
        for i, r in enumerate(requests):
            prefix_ids = tok(self._prompt_text(r) + ANSWER_PREFIX, add_special_tokens=False)["input_ids"]
            for label in allowed_labels(r.schema) or ():
                label_ids = tok(label + '"', add_special_tokens=False)["input_ids"]
                rows.append((i, label, prefix_ids + label_ids, len(prefix_ids)))
        width = max(len(ids) for _, _, ids, _ in rows)
        input_ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for j, (_, _, ids, _) in enumerate(rows):
            input_ids[j, width - len(ids):] = torch.tensor(ids)
            attention[j, width - len(ids):] = 1
        position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
        self.token_slots += input_ids.numel()
        with torch.inference_mode():
            logits = self._model(input_ids=input_ids, attention_mask=attention,
                                 position_ids=position_ids).logits.float()
        logprobs = torch.log_softmax(logits, dim=-1)
        totals: dict[int, dict[str, float]] = {}
        prompt_tokens: dict[int, int] = {}
        for j, (i, label, ids, start) in enumerate(rows):
            offset = width - len(ids)
            totals.setdefault(i, {})[label] = sum(float(logprobs[j, offset + p - 1, ids[p]])
                                                  for p in range(start, len(ids)))
            prompt_tokens[i] = start
        return [label_reply(totals[i], prompt_tokens[i]) for i in range(len(requests))]

    def generate(self, requests: list[ChatRequest], report: Any = None) -> list[ChatReply]:
        import torch

        tok = self._tokenizer
        texts = [self._prompt_text(r) for r in requests]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        max_new = max(r.max_tokens or self.config.max_tokens for r in requests)
        with torch.inference_mode():
            out = self._model.generate(**enc, max_new_tokens=max_new, do_sample=False, pad_token_id=tok.pad_token_id)
        self.token_slots += out.numel()
        new = out[:, enc["input_ids"].shape[1]:]
        replies = []
        for row, mask in zip(new, enc["attention_mask"], strict=True):
            ids = [t for t in row.tolist() if t != tok.pad_token_id]
            if tok.eos_token_id in ids:
                ids = ids[: ids.index(tok.eos_token_id)]
            replies.append(ChatReply(tok.decode(ids, skip_special_tokens=True), usage=Usage(int(mask.sum()), len(ids)),
                                     finish_reason="stop"))
        return replies
