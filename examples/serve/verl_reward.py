"""verl custom reward file: point `custom_reward_function.path` here (see verl_0.9_config.yaml /
verl_0.7_config.yaml for where each verl release reads it, and which function each manager takes)."""

from rubric_reward.integrations.verl import (compute_score, compute_score_async, compute_score_batch,
                                             compute_score_prime)

__all__ = ["compute_score", "compute_score_async", "compute_score_batch", "compute_score_prime"]
