"""OpenRLHF's reward-function form: ``--reward.remote_url path/to/file.py`` (``--remote_rm_url`` up
to OpenRLHF 0.10.1) imports the file and calls ``reward_func(queries, prompts, labels)``.

``queries`` are prompt + response decoded with special tokens; the response is what follows the
prompt. ``labels`` (from ``--data.label_key``) carry the rubric, as for the service's OpenRLHF
endpoint. Settings come from ``RUBRIC_REWARD_CONFIG`` (judge in-process) or ``RUBRIC_REWARD_URL``
(ask the service); see :mod:`rubric_reward.integrations.backend`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from rubric_reward.integrations.backend import Sample, get_backend
from rubric_reward.rewards.records import RewardRecord
from rubric_reward.rewards.text import openrlhf_sample

__all__ = ["reward_func"]


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None,
                **kwargs: Any) -> dict[str, Any]:
    """``{"rewards", "scores", "extra_logs"}``; tensors when torch is loaded (inside OpenRLHF), else lists."""
    n = len(queries)
    labels = list(labels) if labels is not None else [None] * n
    backend = get_backend(**{k: kwargs[k] for k in ("config", "url", "unscored_reward") if k in kwargs})
    samples: list[Sample] = []
    records: list[RewardRecord | None] = [None] * n
    for i, (query, prompt) in enumerate(zip(queries, prompts, strict=True)):
        sample = openrlhf_sample(query, prompt)
        if sample is None:  # never guess a response: this sample is unscored
            records[i] = RewardRecord.failed(f"query[{i}] does not contain prompts[{i}]", "data")
        else:
            samples.append((sample[0], sample[1], labels[i]))
    scored = iter(backend.score(samples) if samples else [])
    records = [r if r is not None else next(scored) for r in records]
    rewards = [r.numeric(backend.fallback) for r in records]
    logs = {"rubric_unscored": [float(r.unscored) for r in records],
            "rubric_judge_cost": [r.cost for r in records]}
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        rewards_t = torch.tensor(rewards, dtype=torch.float32)
        return {"rewards": rewards_t, "scores": rewards_t.clone(),
                "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in logs.items()}}
    return {"rewards": rewards, "scores": list(rewards), "extra_logs": logs}
