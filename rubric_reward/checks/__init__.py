"""Programmatic checks: deterministic criteria that need no judge model.

A rubric criterion may be a check instead of a question::

    - {name: no_comma, check: "ifeval:punctuation:no_comma"}
    - {name: long_enough, check: "ifeval:length_constraints:number_words",
       kwargs: {relation: at least, num_words: 300}}

``ifeval:<instruction id>`` runs the strict IFEval checker, ``ifeval_loose:<instruction id>`` the loose
one (any of the 8 response variants). A check yields MET (1.0) or UNMET (0.0) and combines with judged
criteria under the same weights and scoring rules; a rubric made only of checks needs no judge.

``rubric_reward.checks.ifeval`` holds the 25 IFEval instruction checkers and their strict/loose
evaluation; ``rubric_reward.checks.ifeval_data`` loads the IFEval prompts and pairs them with responses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FAMILIES", "ifeval_row_to_rubric", "run_check", "validate_check"]

FAMILIES = ("ifeval", "ifeval_loose")


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
    _, name = _split(check)
    from .ifeval import get_checker

    checker = get_checker(name)
    if checker.prompt_param and checker.prompt_param not in (kwargs or {}):
        # filled from the item's prompt at run time
        kwargs = {**(kwargs or {}), checker.prompt_param: "placeholder"}
    checker.validate(kwargs)


def run_check(check: str, response: str, kwargs: Mapping[str, Any] | None = None, prompt: Any = None) -> bool:
    """Evaluate one programmatic check on a response (True when the response satisfies it)."""
    family, name = _split(check)
    from .ifeval import check as strict, check_loose

    fn = check_loose if family == "ifeval_loose" else strict
    return fn(name, response, kwargs or {}, _prompt_text(prompt))


def ifeval_row_to_rubric(row: Any, *, loose: bool = False, extra_criteria: Sequence[Mapping[str, Any]] = ()) -> Any:
    """A rubric with one check criterion per IFEval instruction of ``row`` (plus any extra criteria)."""
    from ..rubric import Rubric
    from .ifeval_data import ifeval_row_to_checks

    checks = ifeval_row_to_checks(row)
    family = "ifeval_loose" if loose else "ifeval"
    names = [c["check"].split(":", 1)[1] for c in checks]
    criteria = [
        {"name": name if names.count(name) == 1 else f"{name}#{i + 1}",
         "check": c["check"].replace("ifeval:", f"{family}:", 1), "kwargs": c["kwargs"]}
        for i, (name, c) in enumerate(zip(names, checks, strict=True))
    ]
    key = row["key"] if isinstance(row, Mapping) else getattr(row, "key", "ifeval")
    return Rubric.from_obj({"name": f"ifeval-{key}", "criteria": [*criteria, *extra_criteria]})
