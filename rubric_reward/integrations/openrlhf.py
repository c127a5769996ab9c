"""OpenRLHF's reward-function form: ``--reward.remote_url path/to/file.py`` (``--remote_rm_url`` up
to OpenRLHF 0.10.1) imports the file and calls ``reward_func(queries, prompts, labels)``.

``queries`` are prompt + response decoded with special tokens (the prompt possibly cut to length);
``labels`` (from ``--data.label_key``) carry the rubric, as for the service's OpenRLHF endpoint. The
samples are read and answered by the reward core (:mod:`rubric_reward.rewards.trainers`), exactly as
``POST /openrlhf`` reads and answers them. Settings come from ``RUBRIC_REWARD_CONFIG`` (judge
in-process) or ``RUBRIC_REWARD_URL`` (ask the service); see :mod:`rubric_reward.integrations.backend`.

The answer is the same JSON-shaped dict as the endpoint's (lists, not tensors), so OpenRLHF builds the same
per-sample tensors from either path: v0.11's ``torch.tensor([value])`` gives shape (1, 1) for a one-sample list
(what every OpenRLHF remote reward server, its own ``serve_rm`` included, produces); a tensor answer would
give (1,) here and (1, 1) over HTTP. Checked against the released openrlhf 0.11.2 by
``tests/test_real_trainers.py``.

OpenRLHF v0.11 calls this once per sample inside every vLLM engine actor, each its own judge pool;
the default ``limit_scope: auto`` shares a judge's ``max_concurrency`` between the actors of one
machine, the service between all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rubric_reward.integrations.backend import get_backend
from rubric_reward.rewards.trainers import openrlhf_reply

__all__ = ["reward_func"]


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None,
                **kwargs: Any) -> dict[str, Any]:
    """``{"rewards", "scores", "extra_logs", "unscored", "errors"}``: one number per sample in the first
    three, as lists (exactly what ``POST /openrlhf`` answers)."""
    backend = get_backend(**{k: kwargs[k] for k in ("config", "url", "unscored_reward") if k in kwargs})
    records = backend.score_openrlhf(list(queries), list(prompts), None if labels is None else list(labels))
    return openrlhf_reply(records, backend.fallback)
