"""Where the rubric resolver used to live: it is the reward core's now (:mod:`rubric_reward.rewards.rubrics`)."""

from ..rewards.rubrics import RubricResolver as RubricSource

__all__ = ["RubricSource"]
