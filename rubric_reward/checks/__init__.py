"""Programmatic checks: deterministic criteria that need no judge model.

A rubric criterion may be a check instead of a question::

    - {name: no_comma, check: "ifeval:punctuation:no_comma"}
    - {name: long_enough, check: "ifeval:length_constraints:number_words",
       kwargs: {relation: at least, num_words: 300}}

``ifeval:<instruction id>`` runs the strict IFEval checker, ``ifeval_loose:<instruction id>`` the loose
one (any of the 8 response variants); ``text:repeats_itself`` (:mod:`.text`) is MET when a response repeats a
line or a few words over and over (a penalty with a negative weight). A check yields MET (1.0) or UNMET (0.0) and combines with judged
criteria under the same weights and scoring rules; a rubric made only of checks needs no judge.

``rubric_reward.checks.ifeval`` holds the 25 IFEval instruction checkers and their strict/loose
evaluation. This package knows no rubric (``rubric.py`` validates check criteria here); the IFEval prompts,
their pairing with responses and a row as checks or a rubric are in ``rubric_reward.evaluation.ifeval_prompts``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FAMILIES", "run_check", "validate_check"]

FAMILIES = ("ifeval", "ifeval_loose", "text")


def _split(check: str) -> tuple[str, str]:
    family, _, name = check.partition(":")
    if family not in FAMILIES or not name:
        raise ValueError(f"unknown check {check!r}: expected '<family>:<name>' with family one of {FAMILIES}")
    return family, name


def _prompt_text(prompt: Any) -> str | None:
    """The instruction text a prompt-dependent check sees: the last user turn of a conversation."""
    if prompt is None or isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
    return str(users[-1]) if users else None


def validate_check(check: str, kwargs: Mapping[str, Any] | None = None) -> None:
    """Raise ``ValueError`` naming the problem if ``check`` or its ``kwargs`` are not usable."""
    family, name = _split(check)
    if family == "text":
        from .text import validate

        validate(name, kwargs)
        return
    from .ifeval import get_checker

    checker = get_checker(name)
    if checker.prompt_param and checker.prompt_param not in (kwargs or {}):
        # filled from the item's prompt at run time
        kwargs = {**(kwargs or {}), checker.prompt_param: "placeholder"}
    checker.validate(kwargs)


def run_check(check: str, response: str, kwargs: Mapping[str, Any] | None = None, prompt: Any = None) -> bool:
    """Evaluate one programmatic check on a response (True when the response satisfies it)."""
    family, name = _split(check)
    if family == "text":
        from .text import check as text_check

        return text_check(name, response, prompt)
    from .ifeval import check as strict, check_loose

    fn = check_loose if family == "ifeval_loose" else strict
    return fn(name, response, kwargs or {}, _prompt_text(prompt))
