"""Greedy response generation for evaluation and training recipes.

``generate_responses(prompts, model=..., backend=...)`` answers each prompt (a string, sent as one user
turn, or a list of chat messages) with the model's own chat template and greedy decoding, stopping at
end of sequence; ``temperature`` > 0 samples instead, seeded by ``seed`` (a prompt asked twice gets two
draws: the judge card's groups of completions). Three backends:

* ``"transformers"``: in-process on CPU or GPU, left-padded batches; an optional LoRA adapter is loaded
  with peft (merged into the weights with ``merge_adapter=True``). When the adapter folder holds its own
  tokenizer (TRL checkpoints do), that tokenizer and chat template are used.
* ``"vllm"``: in-process ``vllm.LLM`` with ``temperature=0``; an adapter goes through
  ``enable_lora=True`` and a ``LoRARequest``. Needs the ``vllm`` extra.
* ``"openai"``: any OpenAI-compatible ``/chat/completions`` endpoint (``base_url``), concurrent requests
  bounded by ``batch_size``. ``adapter``, when given, is the name the server serves the adapter under
  (vLLM's ``--lora-modules NAME=PATH``) and is sent as the ``model`` field.

Reasoning models (Qwen3) open their answer with a ``<think>...</think>`` block. It is stripped from the
returned texts unless ``keep_think=True``, by the reward core's rule (:func:`~rubric_reward.rewards.text.strip_think`:
the text after the last ``</think>``; nothing when a ``<think>`` is never closed).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

__all__ = ["BACKENDS", "VLLM_INSTALL_HINT", "Prompt", "generate_responses", "greedy_batch_order", "strip_think",
           "to_messages"]

from ..io.models import resolve_model as _resolve  # hub ids, local folders, the bundled default model
from ..util.progress import Progress
from ..util.think import strip_think

Prompt = str | Sequence[Mapping[str, Any]]
Backend = Literal["transformers", "vllm", "openai"]
BACKENDS = ("transformers", "vllm", "openai")
VLLM_INSTALL_HINT = "pip install 'rubric-reward[vllm]'"
_TRAIN_HINT = "pip install 'rubric-reward[train]'"

def to_messages(prompt: Prompt) -> list[dict[str, Any]]:
    """A prompt as chat messages: a string becomes one user turn."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    messages = [dict(m) for m in prompt]
    if not messages or not all("role" in m and "content" in m for m in messages):
        raise ValueError("a prompt must be a string or a non-empty list of {'role', 'content'} messages")
    return messages


def generate_responses(
    prompts: Sequence[Prompt],
    *,
    model: str,
    adapter: str | None = None,
    backend: Backend = "transformers",
    base_url: str | None = None,
    max_new_tokens: int = 512,
    batch_size: int = 8,
    seed: int = 0,
    progress: bool = True,
    keep_think: bool = False,
    merge_adapter: bool = False,
    api_key: str | None = None,
    timeout_s: float = 600.0,
    dtype: str | None = None,
    until: Callable[[], bool] | None = None,
    temperature: float = 0.0,
) -> list[str]:
    """Greedy responses to ``prompts``, in order (see the module docstring for the backends).

    ``batch_size`` is the generation batch (transformers) or the number of concurrent requests
    (openai); vLLM schedules its own batches. ``api_key`` is sent as a bearer token (openai only).
    ``dtype`` (transformers only): the weights' dtype; None is bfloat16 on a GPU and float32 on a CPU, ``auto``
    also bfloat16 on a CPU with bfloat16 kernels (the local judge's rule). ``until`` (transformers only): asked
    before each batch; once it answers True the prompts not generated yet come back as None, and generating them
    later in one call gives the texts this call would have (the batches end at a boundary of one call's order).
    ``temperature`` > 0 samples (transformers: torch's generator seeded once by ``seed``; vllm and openai: prompt
    ``i`` with seed ``seed + i``).
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if max_new_tokens < 1 or batch_size < 1:
        raise ValueError("max_new_tokens and batch_size must be positive")
    conversations = [to_messages(p) for p in prompts]
    if not conversations:
        return []
    if backend == "transformers":
        texts = _generate_transformers(conversations, model, adapter, max_new_tokens, batch_size, progress,
                                       merge_adapter, dtype, until, temperature, seed)
    elif backend == "vllm":
        texts = _generate_vllm(conversations, model, adapter, max_new_tokens, seed, progress, temperature)
    else:
        if not base_url:
            raise ValueError("the openai backend needs base_url (e.g. http://127.0.0.1:8000/v1)")
        texts = _generate_openai(conversations, adapter or model, base_url, max_new_tokens, batch_size, seed,
                                 progress, api_key, timeout_s, temperature)
    return texts if keep_think else [t if t is None else strip_think(t) for t in texts]


# ------------------------------------------------------------------------------------------ transformers


def _load_transformers(model: str, adapter: str | None, merge: bool, dtype: str | None = None) -> tuple[Any, Any]:
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as exc:
        raise ImportError(f"the transformers backend needs torch and transformers: {_TRAIN_HINT}") from exc
    path = _resolve(model)
    from ..judges.transformers_backend import resolve_dtype

    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, resolve_dtype(dtype, device)))
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"could not load model {model!r} from {path}: {exc}") from exc
    if adapter is not None:
        try:
            from peft import PeftModel
        except ImportError as exc:
            raise ImportError(f"loading a LoRA adapter needs peft: {_TRAIN_HINT}") from exc
        try:
            lm = PeftModel.from_pretrained(lm, adapter)
        except (OSError, ValueError) as exc:
            where = "local folder" if Path(adapter).is_dir() else "no local folder of that name; hub id"
            raise RuntimeError(f"could not load LoRA adapter {adapter!r} ({where}): {exc}") from exc
        if merge:
            lm = lm.merge_and_unload()
    if device == "cpu":
        # A PEFT load freezes the weights, and frozen bfloat16 weights take another CPU matmul path: SmolLM2 with a
        # merged adapter, 40 prompts per batch, peaked 1.7 GB higher and generated 9% slower (docs/performance.md).
        # Generation runs under inference_mode, so nothing records a graph for them.
        lm.requires_grad_(True)
    return lm.to(device).eval(), _load_tokenizer(path, adapter)


def _load_tokenizer(path: str, adapter: str | None) -> Any:
    from transformers import AutoTokenizer

    has_own = adapter is not None and (Path(adapter) / "tokenizer_config.json").is_file()
    tokenizer = AutoTokenizer.from_pretrained(adapter if has_own else path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _length_order(tok: Any, conversations: list[list[dict[str, Any]]], model: str) -> tuple[list[str], list[int]]:
    """The rendered prompts and the batching order: longest first (similar lengths share a batch), ties in input
    order."""
    if not getattr(tok, "chat_template", None):
        raise ValueError(f"the tokenizer of {model!r} has no chat template")
    # apply_chat_template(return_tensors=...) returns a BatchEncoding in transformers 5: render, then tokenize.
    texts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in conversations]
    lengths = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    return texts, sorted(range(len(texts)), key=lambda i: -lengths[i])


def greedy_batch_order(prompts: Sequence[Prompt], *, model: str, adapter: str | None = None) -> list[int]:
    """The order in which the transformers backend batches ``prompts``. Cut at a multiple of the batch size, the
    two parts (each kept in this order) generate in the very batches of one call, and so give its texts."""
    return _length_order(_load_tokenizer(_resolve(model), adapter), [to_messages(p) for p in prompts], model)[1]


def _eos_ids(lm: Any, tokenizer: Any) -> list[int]:
    ids = lm.generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def _generate_transformers(conversations: list[list[dict[str, Any]]], model: str, adapter: str | None,
                           max_new_tokens: int, batch_size: int, progress: bool, merge: bool,
                           dtype: str | None = None, until: Callable[[], bool] | None = None,
                           temperature: float = 0.0, seed: int = 0) -> list[str]:
    import torch

    from ..util.cpu_memory import release_freed_memory

    # Greedy decoding draws nothing, but building a LoRA model initialises weights from torch's global generator:
    # forked, so a monitor generating inside a training process leaves the training's random stream untouched.
    with torch.random.fork_rng():
        lm, tok = _load_transformers(model, adapter, merge, dtype)
    try:
        if temperature <= 0:
            return _greedy_batches(lm, tok, conversations, model, max_new_tokens, batch_size, progress, until)
        with torch.random.fork_rng():  # sampling draws from a seeded stream of its own, never the caller's
            torch.manual_seed(seed)
            return _greedy_batches(lm, tok, conversations, model, max_new_tokens, batch_size, progress, until,
                                   temperature)
    finally:
        del lm
        release_freed_memory()  # inside a training process (the monitor) the model's memory goes back


def _greedy_batches(lm: Any, tok: Any, conversations: list[list[dict[str, Any]]], model: str, max_new_tokens: int,
                    batch_size: int, progress: bool, until: Callable[[], bool] | None = None,
                    temperature: float = 0.0) -> list[str | None]:
    import torch

    texts, order = _length_order(tok, conversations, model)
    eos = _eos_ids(lm, tok)
    out: list[str | None] = [None] * len(texts)
    with Progress("generating", len(texts), enabled=progress) as bar:
        for start in range(0, len(order), batch_size):
            if until is not None and until():
                break
            batch = order[start:start + batch_size]
            enc = tok([texts[i] for i in batch], return_tensors="pt", padding=True,
                      add_special_tokens=False).to(lm.device)
            with torch.inference_mode():
                sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else \
                    {"do_sample": False, "temperature": None}
                generated = lm.generate(**enc, max_new_tokens=max_new_tokens, **sampling, top_p=None, top_k=None,
                                        eos_token_id=eos, pad_token_id=tok.pad_token_id)
            for i, row in zip(batch, generated[:, enc["input_ids"].shape[1]:].tolist(), strict=True):
                cut = next((j for j, t in enumerate(row) if t in eos), len(row))
                out[i] = tok.decode(row[:cut], skip_special_tokens=True)
            bar.advance(len(batch))
    return out


# ------------------------------------------------------------------------------------------ vllm


def _lora_rank(adapter: str) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that fits the adapter's rank (16 if unknown)."""
    try:
        rank = int(json.loads((Path(adapter) / "adapter_config.json").read_text())["r"])
    except (OSError, ValueError, KeyError, TypeError):
        return 16
    return next((r for r in (8, 16, 32, 64, 128, 256, 320, 512) if r >= rank), rank)


def _generate_vllm(conversations: list[list[dict[str, Any]]], model: str, adapter: str | None,
                   max_new_tokens: int, seed: int, progress: bool, temperature: float = 0.0) -> list[str]:
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        raise ImportError(f"the vllm backend needs vLLM, which is not installed: {VLLM_INSTALL_HINT}") from exc
    kwargs: dict[str, Any] = {"model": _resolve(model), "seed": seed}
    lora = None
    if adapter is not None:
        from vllm.lora.request import LoRARequest

        kwargs.update(enable_lora=True, max_lora_rank=_lora_rank(adapter))
        lora = LoRARequest("adapter", 1, os.path.abspath(adapter))
    llm = LLM(**kwargs)
    params: Any = SamplingParams(temperature=0.0, max_tokens=max_new_tokens, seed=seed)
    if temperature > 0:
        params = [SamplingParams(temperature=temperature, max_tokens=max_new_tokens, seed=seed + i)
                  for i in range(len(conversations))]
    outputs = llm.chat(conversations, sampling_params=params, use_tqdm=progress, lora_request=lora,
                       add_generation_prompt=True)
    return [o.outputs[0].text for o in outputs]


# ------------------------------------------------------------------------------------------ openai


def _generate_openai(conversations: list[list[dict[str, Any]]], model: str, base_url: str,
                     max_new_tokens: int, concurrency: int, seed: int, progress: bool, api_key: str | None,
                     timeout_s: float, temperature: float = 0.0) -> list[str]:
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    bar = Progress("generating", len(conversations), enabled=progress)

    async def run() -> list[str]:
        import aiohttp

        limit = asyncio.Semaphore(concurrency)
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        async with aiohttp.ClientSession(timeout=timeout, headers=headers) as session:

            async def one(i: int, messages: list[dict[str, Any]]) -> str:
                body = {"model": model, "messages": messages, "temperature": temperature or 0,
                        "max_tokens": max_new_tokens, "seed": seed + i if temperature > 0 else seed}
                async with limit:
                    try:
                        async with session.post(url, json=body) as resp:
                            text = await resp.text()
                            if resp.status != 200:
                                raise RuntimeError(f"{url} returned HTTP {resp.status}: {text[:300]}")
                    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                        raise RuntimeError(f"request to {url} failed: {type(exc).__name__}: {exc}") from None
                try:
                    content = json.loads(text)["choices"][0]["message"]["content"]
                except (ValueError, KeyError, IndexError, TypeError):
                    raise RuntimeError(f"{url} returned an unexpected body: {text[:300]}") from None
                bar.advance()
                return content or ""

            return list(await asyncio.gather(*(one(i, m) for i, m in enumerate(conversations))))

    with bar:
        return _run_coroutine(run)


def _run_coroutine(factory: Callable[[], Any]) -> Any:
    """``asyncio.run(factory())``, in a helper thread when the caller already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(factory())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="rubric-reward-rollouts")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
