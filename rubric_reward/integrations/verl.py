"""verl custom reward functions backed by rubrics.

verl config (0.9+, under ``reward.``; older releases: top-level ``custom_reward_function``)::

    reward:
      custom_reward_function:
        path: examples/serve/verl_reward.py     # or this file
        name: compute_score                     # per sample (naive / dapo / rate_limited managers)
        reward_kwargs: {config: reward.yaml}    # or {url: http://judge-host:8000}; or the env vars

``ground_truth`` (``reward_model.ground_truth`` of the dataset row) is the rubric: an inline rubric
(JSON/YAML text or a mapping), a question list, AdvancedIF ``prompt_metadata``, or a rubric id. The
prompt, when wanted by the judge, comes from ``extra_info["prompt"]`` (text or messages) or
``extra_info["question"]``. Every sample gets a number: an unscored one gets the unscored fallback
and ``rubric_unscored = 1`` in its extra info (see :mod:`rubric_reward.integrations.backend`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rubric_reward.integrations.backend import Sample, get_backend
from rubric_reward.rewards.records import RewardRecord

__all__ = ["compute_score", "compute_score_async", "compute_score_batch"]

_SETTINGS = ("config", "url", "unscored_reward")


def _prompt(extra_info: Any) -> Any:
    if isinstance(extra_info, Mapping):
        for key in ("prompt", "question"):
            if extra_info.get(key) is not None:
                value = extra_info[key]
                return value.tolist() if hasattr(value, "tolist") else value  # numpy arrays from parquet
    return None


def _backend(kwargs: Mapping[str, Any]) -> Any:
    return get_backend(**{k: kwargs[k] for k in _SETTINGS if k in kwargs})


def _as_dict(record: RewardRecord, fallback: float) -> dict[str, float]:
    """verl's per-sample dict: ``score`` plus numeric extra info (verl averages these)."""
    return {"score": record.numeric(fallback), "rubric_unscored": float(record.unscored),
            "rubric_judge_cost": record.cost}


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **kwargs: Any) -> dict[str, float]:
    """Per-sample verl reward: ``{"score", "rubric_unscored", "rubric_judge_cost"}``."""
    backend = _backend(kwargs)
    return _as_dict(backend.score([(_prompt(extra_info), solution_str, ground_truth)])[0], backend.fallback)


async def compute_score_async(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                              **kwargs: Any) -> dict[str, float]:
    """The same, as a coroutine (verl awaits async reward functions, so samples overlap).

    It runs on the backend's own loop thread, so it is safe on any caller loop.
    """
    import asyncio

    backend = _backend(kwargs)
    records = await asyncio.to_thread(backend.score, [(_prompt(extra_info), solution_str, ground_truth)])
    return _as_dict(records[0], backend.fallback)


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[Any] | None = None, **kwargs: Any) -> list[dict[str, float]]:
    """verl's batch reward manager form: one dict per sample, all judged concurrently."""
    n = len(solution_strs)
    infos = list(extra_infos) if extra_infos is not None else [None] * n
    if len(ground_truths) != n or len(infos) != n:
        raise ValueError(f"compute_score_batch: {n} solution_strs but {len(ground_truths)} ground_truths "
                         f"and {len(infos)} extra_infos")
    samples: list[Sample] = [(_prompt(info), s, gt) for s, gt, info in zip(solution_strs, ground_truths, infos)]
    backend = _backend(kwargs)
    return [_as_dict(r, backend.fallback) for r in backend.score(samples)]
