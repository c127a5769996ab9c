"""verl custom reward functions backed by rubrics.

verl names a file and a function; the config layout depends on the release (both shipped, loaded by
a test through verl's own lookup): ``examples/serve/verl_0.9_config.yaml`` for verl 0.9 and later
(``reward.custom_reward_function``, ``reward.reward_manager.name``) and
``examples/serve/verl_0.7_config.yaml`` for verl 0.7 and 0.8 (top-level ``custom_reward_function``,
``reward_model.reward_manager``). Per manager:

* the reward loop (verl's default; ``naive``, ``dapo``, ``rate_limited``): ``compute_score_async``,
  awaited on the worker's loop, judged natively async on one shared loop (samples overlap up to the
  judge's limit); ``compute_score`` also works there (in verl's thread pool);
* the legacy ``naive`` manager (``use_reward_loop: False``): ``compute_score``, one sample at a time;
* the legacy ``batch`` manager: ``compute_score_batch``, the whole batch in one call;
* the legacy ``prime`` manager: ``compute_score_prime`` (a float; works in a fresh worker process).

``ground_truth`` (``reward_model.ground_truth`` of the dataset row) is the rubric: an inline rubric
(JSON/YAML text or a mapping), a question list, AdvancedIF ``prompt_metadata``, or a rubric id. The
prompt, when wanted by the judge, comes from ``extra_info["prompt"]`` (text or messages) or
``extra_info["question"]``. Every sample gets a number: an unscored one gets the unscored fallback
and ``rubric_unscored = 1`` (and its cause) in its extra info (:mod:`rubric_reward.rewards.trainers`).
The per-sample functions share a per-step budget for failing judge calls (``step_budget_s``,
:mod:`rubric_reward.rewards.budget`); ``extra_info["global_step"]``, when present, tells the steps apart.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from rubric_reward.integrations.backend import Sample, get_backend
from rubric_reward.rewards.trainers import VerlScore, verl_result

__all__ = ["compute_score", "compute_score_async", "compute_score_batch", "compute_score_prime"]

_SETTINGS = ("config", "url", "unscored_reward", "step_budget_s")


def _prompt(extra_info: Any) -> Any:
    if isinstance(extra_info, Mapping):
        for key in ("prompt", "question"):
            if extra_info.get(key) is not None:
                value = extra_info[key]
                return value.tolist() if hasattr(value, "tolist") else value  # numpy arrays from parquet
    return None


def _step(extra_info: Any) -> Hashable:
    """The training step a sample belongs to, when the trainer says (else the budget tells steps by time)."""
    if isinstance(extra_info, Mapping):
        for key in ("global_step", "global_steps"):
            value = extra_info.get(key)
            if value is not None:
                return value.item() if hasattr(value, "item") else value
    return None


def _uid(extra_info: Any) -> str | None:
    """verl's ``uid`` (one per prompt, shared by its rollouts): the group a ``mode: group`` judge judges together."""
    value = extra_info.get("uid") if isinstance(extra_info, Mapping) else None
    return None if value is None else str(value.item() if hasattr(value, "item") else value)


def _backend(kwargs: Mapping[str, Any]) -> Any:
    return get_backend(**{k: kwargs[k] for k in _SETTINGS if k in kwargs})


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **kwargs: Any) -> VerlScore:
    """Per-sample verl reward: ``{"score", "rubric_score", "rubric_unscored", ..., "rubric_judge_cost"}``."""
    backend = _backend(kwargs)
    records = backend.score([(_prompt(extra_info), solution_str, ground_truth)], step=_step(extra_info),
                            budgeted=True)
    return verl_result(records[0], backend.fallback)


async def compute_score_async(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                              **kwargs: Any) -> VerlScore:
    """The same, as a coroutine for verl's reward loop: awaited on the caller's loop without holding a
    thread, judged on the backend's one shared loop, so concurrent samples overlap up to the judge limit."""
    backend = _backend(kwargs)
    records = await backend.ascore_from_any_loop([(_prompt(extra_info), solution_str, ground_truth)],
                                                 step=_step(extra_info), budgeted=True)
    return verl_result(records[0], backend.fallback)


def compute_score_prime(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                        **kwargs: Any) -> float:
    """verl's ``prime`` manager form: called by position in worker processes, answered with the reward
    as a float (prime keeps no extra info, so an unscored sample is only the fallback and a warning)."""
    return float(compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)["score"])


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[Any] | None = None, **kwargs: Any) -> list[VerlScore]:
    """verl's batch reward manager form: one dict per sample, all judged concurrently (one deadline).
    ``extra_info["uid"]``, when present, is the group label of a ``mode: group`` judge."""
    n = len(solution_strs)
    infos = list(extra_infos) if extra_infos is not None else [None] * n
    if len(ground_truths) != n or len(infos) != n:
        raise ValueError(f"compute_score_batch: {n} solution_strs but {len(ground_truths)} ground_truths "
                         f"and {len(infos)} extra_infos")
    samples: list[Sample] = [(_prompt(info), s, gt, _uid(info)) for s, gt, info in zip(solution_strs, ground_truths,
                                                                                        infos)]
    backend = _backend(kwargs)
    return [verl_result(r, backend.fallback) for r in backend.score(samples)]
