"""OpenRLHF's reward-function form: ``--reward.remote_url path/to/file.py`` (``--remote_rm_url`` up
to OpenRLHF 0.10.1) imports the file and calls ``reward_func(queries, prompts, labels)``.

``queries`` are prompt + response decoded with special tokens (the prompt possibly cut to length);
``labels`` (from ``--data.label_key``) carry the rubric, as for the service's OpenRLHF endpoint. The
samples are read and answered by the reward core (:mod:`rubric_reward.rewards.trainers`), exactly as
``POST /openrlhf`` reads and answers them. Settings come from ``RUBRIC_REWARD_CONFIG`` (judge
in-process) or ``RUBRIC_REWARD_URL`` (ask the service); see :mod:`rubric_reward.integrations.backend`.

OpenRLHF v0.11 calls this once per sample inside every vLLM engine actor, each its own judge pool;
the default ``limit_scope: auto`` shares a judge's ``max_concurrency`` between the actors of one
machine, the service between all of them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from rubric_reward.integrations.backend import get_backend
from rubric_reward.rewards.trainers import openrlhf_reply

__all__ = ["reward_func"]


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None,
                **kwargs: Any) -> dict[str, Any]:
    """``{"rewards", "scores", "extra_logs", "unscored", "errors"}``: one number per sample in the first
    three (torch tensors when torch is loaded, as inside OpenRLHF; lists elsewhere)."""
    backend = get_backend(**{k: kwargs[k] for k in ("config", "url", "unscored_reward") if k in kwargs})
    records = backend.score_openrlhf(list(queries), list(prompts), None if labels is None else list(labels))
    return openrlhf_reply(records, backend.fallback, tensors="torch" in sys.modules)
