"""Programmatic checks: deterministic criteria that need no judge model.

``rubric_reward.checks.ifeval`` holds the 25 IFEval instruction checkers and
their strict/loose evaluation; ``rubric_reward.checks.ifeval_data`` loads the
IFEval prompts and pairs them with responses.
"""
