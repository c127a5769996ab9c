"""The reward service's client lives in the reward core (:mod:`rubric_reward.rewards.client`), where the
adapters' remote mode uses it; this module keeps its public import path."""

from ..rewards.client import RewardClient, RewardServiceError

__all__ = ["RewardClient", "RewardServiceError"]
