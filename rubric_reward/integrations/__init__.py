"""Adapters for trainers other than TRL: verl's ``compute_score`` and OpenRLHF's ``reward_func``.

Both judge in-process from a ``reward.yaml`` (``RUBRIC_REWARD_CONFIG``) or call the reward service
(``RUBRIC_REWARD_URL``); see :mod:`rubric_reward.integrations.backend`.
"""
