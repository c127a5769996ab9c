"""OpenRLHF reward file: `--reward.remote_url examples/serve/openrlhf_reward_func.py` (OpenRLHF
0.10.2+; `--remote_rm_url` before) with `--data.label_key rubric`, and RUBRIC_REWARD_CONFIG (judge
in-process) or RUBRIC_REWARD_URL (the reward service) in the environment."""

from rubric_reward.integrations.openrlhf import reward_func

__all__ = ["reward_func"]
