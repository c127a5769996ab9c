"""Adapters for trainers: verl's ``compute_score`` and OpenRLHF's ``reward_func``; for TRL 1.16's
``environment_factory``, :mod:`rubric_reward.integrations.trl_env` (the TRL reward plugin is :mod:`rubric_reward.rl`).

Both judge in-process from a ``reward.yaml`` (``RUBRIC_REWARD_CONFIG``) or call the reward service
(``RUBRIC_REWARD_URL``); see :mod:`rubric_reward.integrations.backend`.
"""
