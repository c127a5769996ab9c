"""What a sample's reward becomes for trainers that need a number for every sample (OpenRLHF, verl).

One decision for every path (the service's ``/openrlhf``, the in-process ``reward_func``, verl's
functions): an unscored sample gets the config's ``unscored_reward`` and is flagged, with why, in
numbers the trainer can log. Both trainers turn every logged value into a tensor per sample
(OpenRLHF concatenates each ``extra_logs`` key; verl collects each extra key into a column and
averages it), so the per-sample logs hold only numbers, under the same keys for every sample; the
reason in words goes beside them (``errors``), where the trainers do not look.

Per-sample logs: ``rubric_score`` (the reward field's value, the fallback when unscored),
``rubric_unscored`` (1.0 when unscored) and its cause, one flag each: ``rubric_unscored_judge`` (the
judge failed or ran out of time), ``rubric_unscored_input`` (the query, prompt or rubric label could
not be used), ``rubric_unscored_service`` (the service was draining or over its batch limit, the
step's time budget was spent, an internal error); ``rubric_judge_cost``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .records import RewardRecord
from .text import openrlhf_sample

__all__ = ["UNSCORED_CAUSES", "VerlScore", "openrlhf_reply", "openrlhf_samples", "sample_logs", "score_openrlhf",
           "unscored_cause", "verl_result"]

log = logging.getLogger("rubric_reward.rewards")

UNSCORED_CAUSES = ("judge", "input", "service")
_INPUT_KINDS = frozenset({"data", "rubric", "rejected"})


def unscored_cause(record: RewardRecord) -> str | None:
    """``judge``, ``input`` or ``service`` for an unscored record (see the module docstring); None when scored."""
    if not record.unscored:
        return None
    if record.result is not None or "judge" in record.error_kinds:  # judged here, or by the service
        return "judge"
    return "input" if _INPUT_KINDS.intersection(record.error_kinds) else "service"


def sample_logs(record: RewardRecord, fallback: float) -> dict[str, float]:
    """The numeric per-sample logs (the same keys for every sample)."""
    cause = unscored_cause(record)
    logs = {"rubric_score": record.score if record.score is not None else fallback,
            "rubric_unscored": float(cause is not None)}
    for name in UNSCORED_CAUSES:
        logs[f"rubric_unscored_{name}"] = float(cause == name)
    logs["rubric_judge_cost"] = float(record.cost)
    return logs


def openrlhf_samples(queries: Sequence[Any], prompts: Sequence[Any],
                     labels: Sequence[Any] | None) -> list[tuple[Any, str, Any] | RewardRecord]:
    """OpenRLHF's samples as (prompt: text or messages, response, label), or for a sample whose
    response cannot be found (a query holding no part of its prompt, a value that is not text) its
    unscored record. ``labels`` None: every sample takes the default rubric."""
    labels = [None] * len(queries) if labels is None else labels
    out: list[tuple[Any, str, Any] | RewardRecord] = []
    for i, (query, prompt, label) in enumerate(zip(queries, prompts, labels, strict=True)):
        if not isinstance(query, str) or not isinstance(prompt, str):
            name, value = ("query", query) if not isinstance(query, str) else ("prompts", prompt)
            out.append(RewardRecord.failed(f"{name}[{i}]: must be a string, got {type(value).__name__}", "data"))
            continue
        sample = openrlhf_sample(query, prompt)
        if sample is None:
            out.append(RewardRecord.failed(f"query[{i}]: holds no part of prompts[{i}] (a query is the prompt, "
                                           "possibly cut to length, followed by the response)", "data"))
        else:
            out.append((sample[0], sample[1], label))
    return out


async def score_openrlhf(score: Callable[[list[tuple[Any, str, Any]]], Awaitable[list[RewardRecord]]],
                         queries: Sequence[Any], prompts: Sequence[Any],
                         labels: Sequence[Any] | None) -> list[RewardRecord]:
    """One record per OpenRLHF sample, in order; ``score`` judges the readable (prompt, response, label)
    samples (the engine's ``score_samples``, or an adapter backend's)."""
    read = openrlhf_samples(queries, prompts, labels)
    todo = [s for s in read if not isinstance(s, RewardRecord)]
    scored = iter(await score(todo) if todo else [])
    return [s if isinstance(s, RewardRecord) else next(scored) for s in read]


def openrlhf_reply(records: Sequence[RewardRecord], fallback: float, *, tensors: bool = False) -> dict[str, Any]:
    """OpenRLHF's reward answer: ``rewards``, ``scores`` and ``extra_logs`` (one number per sample in
    each), plus ``unscored`` and ``errors`` (the reason in words), which OpenRLHF ignores.
    ``tensors``: float32 tensors (the in-process ``reward_func`` inside OpenRLHF), else lists (JSON)."""
    rewards = [r.numeric(fallback) for r in records]
    per_sample = [sample_logs(r, fallback) for r in records]
    keys = per_sample[0] if per_sample else sample_logs(RewardRecord(0.0), fallback)
    logs = {key: [s[key] for s in per_sample] for key in keys}
    out: dict[str, Any] = {"rewards": rewards, "scores": list(rewards), "extra_logs": logs,
                           "unscored": [r.unscored for r in records], "errors": [r.error for r in records]}
    if tensors:
        import torch

        out["rewards"] = torch.tensor(rewards, dtype=torch.float32)
        out["scores"] = out["rewards"].clone()
        out["extra_logs"] = {k: torch.tensor(v, dtype=torch.float32) for k, v in logs.items()}
    return out


class VerlScore(dict):
    """verl's per-sample answer: ``score`` plus the numeric logs, which verl keeps as extra info.

    verl's ``prime`` manager reads a non-number answer as ``float(result[0])``; a plain dict would fail
    there and verl would set every reward of the batch to 0. Read by position, this one says (in the
    trainer's log) which entry point to name instead.
    """

    def __missing__(self, key: Any) -> Any:
        if isinstance(key, int):
            message = ("rubric reward: verl's prime manager reads result[0], but compute_score answers a dict; "
                       "set custom_reward_function.name: compute_score_prime")
            log.error(message)
            raise TypeError(message)
        raise KeyError(key)


def verl_result(record: RewardRecord, fallback: float) -> VerlScore:
    """verl's per-sample dict: ``{"score", **sample_logs}``."""
    return VerlScore(score=record.numeric(fallback), **sample_logs(record, fallback))
