"""verl custom reward file: point `reward.custom_reward_function.path` here (see verl_config.yaml)."""

from rubric_reward.integrations.verl import compute_score, compute_score_async, compute_score_batch

__all__ = ["compute_score", "compute_score_async", "compute_score_batch"]
