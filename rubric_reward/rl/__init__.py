"""The TRL reward plugin: rubric scores as rewards (``RubricReward``, its async form, ``rubric_rewards``),
``combine_rewards`` and the trainer-side metrics. The GRPO job built on it is :mod:`rubric_reward.recipes.grpo`.

``from rubric_reward.rl import RubricReward, RewardConfig, rubric_rewards``; see docs/rewards.md. The
config, rubric resolution and judging are the reward core's (:mod:`rubric_reward.rewards`).
Exports load lazily, so importing this package costs nothing until a reward is built.
"""

from __future__ import annotations

from ..util.lazy import lazy_exports

_EXPORTS = {
    "RewardConfig": "..rewards.config", "GuardConfig": "..rewards.config", "LengthPenalty": "..rewards.config",
    "RubricReward": "reward", "AsyncRubricReward": "reward", "RewardRecord": "reward",
    "UnscorableBatchesError": "reward", "rubric_rewards": "reward",
    "combine_rewards": "combine", "CombinedReward": "combine",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
