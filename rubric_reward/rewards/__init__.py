"""The reward core: what every trainer path (TRL, ``rubric_rewards``, the service, OpenRLHF, verl) uses.

``RewardConfig`` (one YAML for every path), ``RubricResolver`` (the one rubric resolver),
``strip_think`` (the one think-block rule), ``RewardEngine`` (judges + cache + rubrics + the reward
read), ``RewardRecord`` (what one sample got), ``RewardClient`` (the reward service over HTTP),
``trainers`` (what a sample becomes for OpenRLHF and verl on every path), ``StepBudget`` (a training
step's budget for failing judge calls).
See docs/rewards.md. Exports load lazily.
"""

from __future__ import annotations

from ..util.lazy import lazy_exports

_EXPORTS = {
    "RewardConfig": "config", "GuardConfig": "config", "LengthPenalty": "config", "DEFAULT_SCORING": "config",
    "RubricResolver": "rubrics",
    "SampleError": "samples",
    "RewardRecord": "records", "REWARD_FIELDS": "records", "reward_of": "records",
    "RewardEngine": "engine",
    "strip_think": "..util.think", "split_query": "text", "chat_text_to_prompt": "text", "openrlhf_sample": "text",
    "RewardClient": "client", "RewardServiceError": "client",
    "StepBudget": "budget", "openrlhf_reply": "trainers", "verl_result": "trainers", "score_openrlhf": "trainers",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
