"""Where the reward config used to live: it is the reward core's now (:mod:`rubric_reward.rewards.config`)."""

from ..rewards.config import DEFAULT_SCORING, GuardConfig, LengthPenalty, RewardConfig

__all__ = ["DEFAULT_SCORING", "GuardConfig", "LengthPenalty", "RewardConfig"]
