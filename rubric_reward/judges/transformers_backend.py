"""Local judge on transformers (CPU or GPU), for offline use and small judges.

Two verdict modes (``JudgeConfig.verdict_mode``):

* ``"logprob"`` (default here): every allowed label (from the request's schema) is scored as a
  continuation of the forced answer prefix; label probabilities are normalised over the allowed
  labels, so any model, however small, yields a well-formed verdict plus P(label). Multi-token
  labels are exact (the sum over their tokens). Single-criterion requests only; multi-criterion
  requests fall back to generation.
* ``"generate"``: greedy (or, at temperature > 0, seeded sampling) decoding of the JSON answer, stopped at the end of the JSON object (or at
  EOS, or ``max_tokens``), parsed by the same strict parser as remote judges.

Both run on :class:`~rubric_reward.judges.token_trees.TokenTrees`: requests that share a prompt
prefix (one response's criterion calls) are one row whose shared prefix is computed once; the LM
head is applied only at label positions (or the last position, when generating); forwards hold at
most ``token_budget`` tokens (``engine_args: {token_budget: N}``, default 2048), so a long response
is split across forwards and still scored. Replies are handed back as each forward finishes.

Weights load in ``engine_args: {dtype: ...}``: ``float32``, ``bfloat16``, ``float16``, or ``auto``
(bfloat16 on a GPU, and on a CPU whose oneDNN has bfloat16 kernels, e.g. AVX-512 or AMX; float32
elsewhere). Without it: bfloat16 on a GPU, float32 on a CPU. ``describe()`` names the dtype used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from ..results import Usage
from .base import ChatReply, ChatRequest
from .config import JudgeConfig, check_transformers_engine_args
from .local import ANSWER_PREFIX, BatchingBackend, allowed_labels, label_reply
from .token_trees import ForwardStats, TokenTrees, group_by_prefix, pack_rows, shared_prefix_len

__all__ = ["DEFAULT_TOKEN_BUDGET", "TransformersBackend", "json_object_end", "resolve_dtype"]

DEFAULT_TOKEN_BUDGET = 2048

Report = Callable[[int, ChatReply], None]


def resolve_dtype(name: str | None, device: str) -> str:
    """The weights' dtype for an ``engine_args.dtype`` value (None: bfloat16 on a GPU, float32 on a CPU)."""
    if name not in (None, "auto"):
        return name
    if device == "cuda":
        return "bfloat16"
    if name is None:
        return "float32"
    import torch

    try:  # oneDNN's own test: AVX-512 (BW, VL, DQ) or AMX
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch without it: assume no bfloat16 kernels
        native = False
    return "bfloat16" if native else "float32"


def json_object_end(text: str) -> int | None:
    """End index (exclusive) of the first complete JSON object in ``text``, or None if unfinished."""
    depth, in_string, escaped = 0, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"' and depth:
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                return i + 1
    return None


class TransformersBackend(BatchingBackend):
    """Judge with a local causal LM; see the module docstring."""

    def __init__(self, config: JudgeConfig, *, max_batch: int = 256, model: Any = None, tokenizer: Any = None,
                 token_budget: int | None = None):
        super().__init__(config, max_batch=max_batch)
        budget = check_transformers_engine_args(config, token_budget)
        self.token_budget = budget if budget is not None else DEFAULT_TOKEN_BUDGET
        self.stats = ForwardStats()
        self._model = model
        self._tokenizer = tokenizer
        self._label_ids: dict[str, list[int]] = {}

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise ImportError(
                "the transformers judge needs torch and transformers: pip install 'rubric-reward[train]'"
            ) from exc
        from ..io.models import resolve_model

        path = resolve_model(self.config.model)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = getattr(torch, resolve_dtype(self.config.engine_args.get("dtype"), device))
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

    def _ids(self, text: str) -> list[int]:
        return self._tokenizer(text, add_special_tokens=False)["input_ids"]

    def _label(self, label: str) -> list[int]:
        ids = self._label_ids.get(label)
        if ids is None:
            ids = self._label_ids[label] = self._ids(label + '"')
        return ids

    def _batches(self, prompts: list[list[int]]) -> list[list[list[int]]]:
        """Request indices as forwards (lists of rows), each row sharing a prefix."""
        rows = group_by_prefix(prompts, self.token_budget)
        sizes = [len(prompts[row[0]])
                 + sum(len(prompts[i]) - shared_prefix_len(prompts[row[0]], prompts[i]) for i in row[1:])
                 for row in rows]
        return [[rows[j] for j in batch] for batch in pack_rows(sizes, self.token_budget)]

    def _trees(self, n_rows: int) -> TokenTrees:
        return TokenTrees(self._model, n_rows, pad_id=self._tokenizer.pad_token_id, token_budget=self.token_budget)

    # ------------------------------------------------------------------ logprob verdicts
    def _sampler(self, requests: list[ChatRequest]) -> Callable[[Any, list[int]], list[int]]:
        """Next-token choice for the requests at ``order`` (indices into ``requests``): greedy at temperature
        0; else temperature / top-p sampling from one generator per request, seeded by the config seed and
        the request (messages and sample index), so K candidates differ and each one is the same whatever
        else shares its batch."""
        import torch

        if self.config.temperature <= 0:
            return lambda logprobs, order: torch.argmax(logprobs, dim=-1).tolist()
        temperature, top_p = self.config.temperature, self.config.top_p or 1.0
        generators: dict[int, Any] = {}

        def generator(i: int) -> Any:
            if i not in generators:
                r = requests[i]
                blob = repr((self.config.seed, r.sample_index, r.messages)).encode()
                seed = int.from_bytes(hashlib.blake2b(blob, digest_size=4).digest(), "big")
                generators[i] = torch.Generator().manual_seed(seed)
            return generators[i]

        def pick(logprobs: Any, order: list[int]) -> list[int]:
            probs = torch.softmax(logprobs.float().cpu() / temperature, dim=-1)
            if top_p < 1.0:
                sorted_p, ranks = torch.sort(probs, dim=-1, descending=True)
                keep = (sorted_p.cumsum(-1) - sorted_p) < top_p
                probs = torch.zeros_like(probs).scatter(-1, ranks, sorted_p * keep)
            return [int(torch.multinomial(row, 1, generator=generator(i))) for row, i in zip(probs, order, strict=True)]

        return pick

    def score_labels(self, requests: list[ChatRequest], report: Report | None = None) -> list[ChatReply]:
        """Score every allowed label as a continuation of the forced answer prefix."""
        prompts = [self._ids(self._prompt_text(r) + ANSWER_PREFIX) for r in requests]
        replies: list[ChatReply | None] = [None] * len(requests)
        for rows in self._batches(prompts):
            trees = self._trees(len(rows))
            # (request, label, [(row, column predicting the token), token id] ...)
            targets: list[tuple[int, str, list[tuple[tuple[int, int], int]]]] = []
            for r, row in enumerate(rows):
                for i in row:
                    cols = trees.insert(r, prompts[i])
                    for label in allowed_labels(requests[i].schema) or ():
                        ids = self._label(label)
                        label_cols = trees.insert(r, ids, parent=cols[-1])
                        before = [cols[-1], *label_cols[:-1]]
                        targets.append((i, label, [((r, c), t) for c, t in zip(before, ids, strict=True)]))
            want = sorted({key for _, _, pairs in targets for key, _ in pairs})
            hidden = trees.run(want)
            logprobs = trees.logprobs([hidden[k] for k in want])
            index = {k: j for j, k in enumerate(want)}
            totals: dict[int, dict[str, float]] = {}
            for i, label, pairs in targets:
                totals.setdefault(i, {})[label] = sum(float(logprobs[index[k], t]) for k, t in pairs)
            self.stats.add(trees.stats)
            del trees
            for row in rows:
                for i in row:
                    replies[i] = label_reply(totals[i], len(prompts[i]))
                    if report is not None:
                        report(i, replies[i])
        return replies  # type: ignore[return-value]

    # ------------------------------------------------------------------ generated verdicts
    def _stop_ids(self) -> set[int]:
        tok = self._tokenizer
        stop = {tok.eos_token_id} if tok.eos_token_id is not None else set()
        eos = getattr(getattr(self._model, "generation_config", None), "eos_token_id", None)
        stop.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        return stop

    def generate(self, requests: list[ChatRequest], report: Report | None = None) -> list[ChatReply]:
        """Decoding from the shared-prefix trees (greedy, or seeded sampling at temperature > 0), stopped
        at the end of the JSON object when the request has a schema."""
        tok = self._tokenizer
        stop = self._stop_ids()
        pick = self._sampler(requests)
        prompts = [self._ids(self._prompt_text(r)) for r in requests]
        replies: list[ChatReply | None] = [None] * len(requests)
        for rows in self._batches(prompts):
            trees = self._trees(len(rows))
            last: dict[int, tuple[int, int]] = {}  # request -> (row, column of its last token)
            for r, row in enumerate(rows):
                for i in row:
                    last[i] = (r, trees.insert(r, prompts[i])[-1])
            budget = {i: requests[i].max_tokens or self.config.max_tokens for i in last}
            generated: dict[int, list[int]] = {i: [] for i in last}
            finish: dict[int, str] = {}
            texts: dict[int, str] = {}
            while last:
                order = list(last)
                hidden = trees.run(last.values())
                logprobs = trees.logprobs([hidden[last[i]] for i in order])
                nxt = pick(logprobs, order)
                for i, t in zip(order, nxt, strict=True):
                    ended = None
                    if t in stop:
                        ended = "stop"
                    else:
                        generated[i].append(t)
                        text = tok.decode(generated[i], skip_special_tokens=True)
                        end = json_object_end(text) if requests[i].schema is not None else None
                        if end is not None:
                            text, ended = text[:end], "stop"
                        elif len(generated[i]) >= budget[i]:
                            ended = "length"
                        texts[i] = text
                    if ended is None:
                        r, c = last[i]
                        last[i] = (r, trees.append(r, t, c))
                    else:
                        finish[i] = ended
                        del last[i]
            self.stats.add(trees.stats)
            del trees
            for row in rows:
                for i in row:
                    replies[i] = ChatReply(texts.get(i, ""), usage=Usage(len(prompts[i]), len(generated[i])),
                                           finish_reason=finish[i])
                    if report is not None:
                        report(i, replies[i])
        return replies  # type: ignore[return-value]

    def describe(self) -> Mapping[str, Any]:
        """Token budget and what has gone through the model so far (for benchmarks and tests)."""
        dtype = str(self._model.dtype).removeprefix("torch.") if self._model is not None else None
        return {"token_budget": self.token_budget, "dtype": dtype, **vars(self.stats)}
