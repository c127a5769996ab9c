"""Rubric scores as training rewards: a TRL reward function, a plain function, guards and metrics.

``from rubric_reward.rl import RubricReward, RewardConfig, rubric_rewards``; see docs/rewards.md.
Exports load lazily, so importing this package costs nothing until a reward is built.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "RewardConfig": "config", "GuardConfig": "config", "LengthPenalty": "config",
    "RubricReward": "reward", "AsyncRubricReward": "reward", "RewardRecord": "reward",
    "UnscorableBatchesError": "reward", "rubric_rewards": "reward",
    "RubricSource": "rubrics",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rubric_reward.rl' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
