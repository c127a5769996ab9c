"""What OpenRLHF and verl send and do with the answer, written from reading their code (not copied).

Each function below does what the trainer does at the reward boundary, and raises where the trainer
would fail: OpenRLHF v0.11's per-sample requests (``openrlhf/utils/agent.py``: aiohttp, 180 s, 5 tries
1 s apart, ``raise_for_status``) and how a sample's answer becomes an Experience
(``samples_generator.py``: ``torch.tensor([value])`` per ``extra_logs`` key, a ``None`` reward is
fatal later); OpenRLHF v0.9's one request per batch (``remote_rm_utils.py``: requests, 180 s, 5 tries,
then ``Exception``) and ``update_samples_with_rewards`` (each key concatenated); verl's config lookup
per release (``verl/trainer/ppo/reward.py``), its legacy ``naive`` / ``batch`` / ``prime`` managers and
its reward loop (``verl/experimental/reward_loop/reward_manager/naive.py``). numpy stands in for torch
(the same failures on strings and ``None``).

Where these stay: the released verl 0.9.1 and OpenRLHF 0.11.2 themselves run in CI
(tests/test_real_trainers.py, scripts/setup_trainers.sh). These re-creations remain for what is not installed
there (OpenRLHF v0.9's batch requests, verl 0.7/0.8's config lookup and the legacy ``naive`` / ``batch`` /
``prime`` managers, which 0.9.1 no longer has) and for the fault-injection tests (tests/test_trainer_interop.py):
OpenRLHF's real executor sleeps 1 s between tries and each real-trainer run costs tens of seconds of imports,
so the fault matrix runs here, on code written to fail where the trainers fail.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import os
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Any

import numpy as np

OPENRLHF_TIMEOUT_S = 180
OPENRLHF_TRIES = 5


class TrainerFailure(AssertionError):
    """What the trainer would have died of (or silently zeroed)."""


def _as_tensor(value: Any) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise TrainerFailure(f"not a tensor: {value!r} ({exc})") from None


# ---------------------------------------------------------------------------- OpenRLHF v0.11
async def openrlhf_v011_http(url: str, query: str, prompt: str, label: Any, *, statuses: list | None = None) -> dict:
    """One sample's reward over HTTP, as v0.11's SingleTurnExecutor asks for it."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=OPENRLHF_TIMEOUT_S)
    payload = {"query": [query], "prompts": [prompt], "labels": [label]}
    for _ in range(OPENRLHF_TRIES):
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.post(url, json=payload) as response:
                    if statuses is not None:
                        statuses.append(response.status)
                    response.raise_for_status()
                    return await response.json()
        except Exception:  # noqa: BLE001 - OpenRLHF logs and retries every error
            pass
        await asyncio.sleep(1)
    raise TrainerFailure(f"Request error for {OPENRLHF_TRIES} times, returning None")


async def openrlhf_v011_func(reward_func: Any, query: str, prompt: str, label: Any) -> dict:
    """One sample's reward from a ``.py`` reward_func, as v0.11 calls it (a thread per call)."""
    return await asyncio.to_thread(reward_func, [query], [prompt], [label])


def openrlhf_v011_experience(info: dict | None) -> dict[str, np.ndarray]:
    """The Experience fields v0.11 builds from one sample's answer; fails where OpenRLHF would."""
    if not info:
        raise TrainerFailure("no reward info: the experience maker needs precomputed rewards")
    reward = info.get("rewards")
    score = info.get("scores")
    if score is None:
        score = reward
    if reward is None:
        raise TrainerFailure("reward None: reward_model_group is required when rewards are not precomputed")
    out = {"reward": _as_tensor([_first(reward)]), "score": _as_tensor([_first(score)])}
    for key, value in (info.get("extra_logs") or {}).items():
        out[key] = _as_tensor([_first(value)])
    return out


def _first(value: Any) -> Any:
    if hasattr(value, "flatten"):  # a torch tensor from the in-process reward_func
        return value.flatten()[0].item()
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def openrlhf_v011_batch(experiences: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Samples merged into a batch and split again: every sample must carry the same keys."""
    keys = set(experiences[0])
    for e in experiences:
        if set(e) != keys:
            raise TrainerFailure(f"Size of info mismatch: keys {sorted(set(e) ^ keys)} missing in some samples")
    return {k: np.concatenate([e[k].reshape(-1) for e in experiences]) for k in keys}


# ---------------------------------------------------------------------------- OpenRLHF v0.9
def openrlhf_v09_http(url: str, queries: list, prompts: list, labels: list, *, statuses: list | None = None) -> dict:
    """One batch's rewards over HTTP, as v0.9's remote_rm_fn asks for them."""
    import requests

    for _ in range(OPENRLHF_TRIES):
        try:
            response = requests.post(url=url, json={"query": queries, "prompts": prompts, "labels": labels},
                                     headers={"Content-Type": "application/json"}, timeout=OPENRLHF_TIMEOUT_S)
            if statuses is not None:
                statuses.append(response.status_code)
            response.raise_for_status()
            return response.json()
        except Exception:  # noqa: BLE001 - OpenRLHF logs and retries every error
            pass
        time.sleep(1)
    raise TrainerFailure(f"Request error for {OPENRLHF_TRIES} times, returning None. Please check the API server.")


def openrlhf_v09_update(rewards_info: list[dict], sample_lens: list[int]) -> dict[str, list[np.ndarray]]:
    """v0.9's update_samples_with_rewards: every field concatenated over the answers, split per micro-batch."""
    cuts = np.cumsum(sample_lens)[:-1]
    out = {"rewards": np.split(np.concatenate([_as_tensor(i["rewards"]) for i in rewards_info]), cuts)}
    if "scores" in rewards_info[0]:
        out["scores"] = np.split(np.concatenate([_as_tensor(i["scores"]) for i in rewards_info]), cuts)
    if "extra_logs" in rewards_info[0]:
        for key in rewards_info[0]["extra_logs"]:
            out[key] = np.split(np.concatenate([_as_tensor(i["extra_logs"][key]) for i in rewards_info]), cuts)
    total = sum(sample_lens)
    for key, parts in out.items():
        if sum(len(p) for p in parts) != total:
            raise TrainerFailure(f"{key}: {sum(len(p) for p in parts)} values for {total} samples")
    return out


# ---------------------------------------------------------------------------- verl
REWARD_LOOP_MANAGERS = {"0.9": {"naive", "dapo", "gdpo", "rate_limited", "remote"},
                        "0.7": {"naive", "dapo", "rate_limited", "remote"}}
LEGACY_MANAGERS = {"naive", "batch", "dapo", "prime"}


def _call_with_kwargs(raw_fn: Any, extra_kwargs: dict, *args: Any, **kwargs: Any) -> Any:
    return raw_fn(*args, **{**kwargs, **extra_kwargs})


async def _call_with_kwargs_async(raw_fn: Any, extra_kwargs: dict, *args: Any, **kwargs: Any) -> Any:
    return await raw_fn(*args, **{**kwargs, **extra_kwargs})


def verl_lookup(config: dict, layout: str) -> tuple[Any, str, bool]:
    """(the reward function verl would call, or None: verl's default scorer; the manager; reward loop?).

    ``layout`` "0.9": ``reward.custom_reward_function`` and ``reward.reward_manager.name``, reward loop
    only. "0.7" (v0.7, 0.8): top-level ``custom_reward_function``, ``reward_model.reward_manager`` and
    ``reward_model.use_reward_loop`` (default true). Unknown managers fail as verl's registries do.
    """
    if layout == "0.9":
        section = (config.get("reward") or {}).get("custom_reward_function") or {}
        manager = ((config.get("reward") or {}).get("reward_manager") or {}).get("name", "naive")
        loop = True
    else:
        section = config.get("custom_reward_function") or {}
        manager = (config.get("reward_model") or {}).get("reward_manager", "naive")
        loop = bool((config.get("reward_model") or {}).get("use_reward_loop", True))
    if manager not in (REWARD_LOOP_MANAGERS[layout] if loop else LEGACY_MANAGERS):
        raise TrainerFailure(f"Unknown reward manager: {manager}")
    path = section.get("path")
    if not path:
        return None, manager, loop
    name = section.get("name")
    assert name is not None
    if not os.path.exists(path):
        raise TrainerFailure(f"Custom module file not found: {path}")
    spec = importlib.util.spec_from_file_location(f"custom_module_{hash(os.path.abspath(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not put in sys.modules, as verl does
    raw_fn = getattr(module, name)
    kwargs = dict(section.get("reward_kwargs") or {})
    wrap = _call_with_kwargs_async if inspect.iscoroutinefunction(raw_fn) else _call_with_kwargs
    return partial(wrap, raw_fn, kwargs), manager, loop


def verl_rows(rows: list[tuple[str, Any, dict | None]]) -> dict[str, np.ndarray]:
    """(response, ground truth, extra_info) rows as verl's non_tensor_batch: numpy object arrays."""
    n = len(rows)
    batch = {"data_source": np.array(["rubric"] * n, dtype=object),
             "reward_model": np.empty(n, dtype=object), "extra_info": np.empty(n, dtype=object),
             "responses": np.array([r[0] for r in rows], dtype=object)}
    for i, (_, truth, info) in enumerate(rows):
        batch["reward_model"][i] = {"ground_truth": truth, "style": "rule"}
        batch["extra_info"][i] = dict(info or {})
    return batch


def _score_of(result: Any, extra: dict[str, list]) -> float:
    if isinstance(result, dict):
        for key, value in result.items():
            extra[key].append(value)
        return float(result["score"])
    return float(result)


def _check_extra(extra: dict[str, list], n: int) -> dict[str, np.ndarray]:
    out = {}
    for key, values in extra.items():
        if len(values) != n:
            raise TrainerFailure(f"reward_extra_info[{key!r}] has {len(values)} values for {n} samples")
        out[key] = _as_tensor(values)  # verl averages them into metrics
    return out


def verl_naive(fn: Any, batch: dict[str, np.ndarray]) -> tuple[list[float], dict[str, np.ndarray]]:
    """The legacy naive manager: compute_score once per sample, one after another, by keyword."""
    scores, extra = [], defaultdict(list)
    for i in range(len(batch["responses"])):
        info = batch["extra_info"][i]
        info["num_turns"], info["rollout_reward_scores"] = None, {}
        scores.append(_score_of(fn(data_source=batch["data_source"][i], solution_str=batch["responses"][i],
                                   ground_truth=batch["reward_model"][i]["ground_truth"], extra_info=info), extra))
    return scores, _check_extra(extra, len(scores))


def verl_batch(fn: Any, batch: dict[str, np.ndarray]) -> tuple[list[float], dict[str, np.ndarray]]:
    """The legacy batch manager: one call with the whole batch (numpy object arrays), by keyword."""
    extras = batch["extra_info"]
    for i in range(len(extras)):
        extras[i]["rollout_reward_scores"] = {}
    results = fn(data_sources=batch["data_source"], solution_strs=list(batch["responses"]),
                 ground_truths=[r["ground_truth"] for r in batch["reward_model"]], extra_infos=extras)
    extra = defaultdict(list)
    scores = [_score_of(r, extra) for r in results]
    return scores, _check_extra(extra, len(scores))


async def verl_reward_loop(fn: Any, batch: dict[str, np.ndarray]) -> tuple[list[float], dict[str, np.ndarray]]:
    """The reward loop: a task per sample; async functions awaited, sync ones in the loop's default pool."""
    loop = asyncio.get_running_loop()
    is_async = inspect.iscoroutinefunction(fn)  # sees through verl's partial

    async def one(i: int) -> Any:
        info = batch["extra_info"][i]
        info["num_turns"], info["rollout_reward_scores"] = None, {}
        kw = dict(data_source=batch["data_source"][i], solution_str=batch["responses"][i],
                  ground_truth=batch["reward_model"][i]["ground_truth"], extra_info=info)
        if is_async:
            return await fn(**kw)
        return await loop.run_in_executor(None, lambda: fn(**kw))

    results = await asyncio.gather(*(asyncio.create_task(one(i)) for i in range(len(batch["responses"]))))
    extra = defaultdict(list)
    scores = [_score_of(r, extra) for r in results]
    return scores, _check_extra(extra, len(scores))


def verl_prime(fn: Any, batch: dict[str, np.ndarray], *, workers: int = 4, timeout_s: float = 300.0) -> list[float]:
    """The legacy prime manager: by position in a fresh process pool; a failed row is silently 0, which
    is raised here instead so a test sees it."""
    async def run() -> list[Any]:
        loop = asyncio.get_running_loop()
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [asyncio.wait_for(loop.run_in_executor(pool, partial(
                fn, batch["data_source"][i], batch["responses"][i], batch["reward_model"][i]["ground_truth"],
                batch["extra_info"][i])), timeout=timeout_s) for i in range(len(batch["responses"]))]
            return await asyncio.gather(*futures, return_exceptions=True)

    results = asyncio.run(run())
    scores = []
    for r in results:
        if isinstance(r, BaseException) or r is None:
            raise TrainerFailure(f"prime would set this row to 0: {r!r}")
        scores.append(float(r) if isinstance(r, int | float | bool) else float(r[0]))
    return scores
