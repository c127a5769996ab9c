"""Checks on the text itself rather than on an instruction: degenerate repetition, no answer of its own.

``text:repeats_itself`` is MET when a response repeats itself: a line (case and spacing folded) occurs
``REPEATED_LINE`` times or more, or a response of 15 words or more has under ``DISTINCT_WORDS`` distinct words.
``text:echoes_prompt`` is MET when a response is no answer of its own: empty, or (after bare openers) only a
run of words its prompt already holds, as the degenerate screen reads it (:mod:`rubric_reward.guards.degenerate`),
e.g. a format's example copied whole (``* first``, ``* second``, ``* third``). It reads the item's prompt.
Give them a negative weight to make them penalties (``{name: repeats_itself, check: "text:repeats_itself",
weight: -2}``). The GRPO recipe's reward-hacking indicators count completions by the same rules.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ..guards.degenerate import screen_response

__all__ = ["CHECKS", "DISTINCT_WORDS", "NON_ANSWERS", "REPEATED_LINE", "check", "echoes_prompt", "normalized",
           "repeats_itself", "validate"]

REPEATED_LINE = 3  # a line that occurs this often makes a response repetitive
DISTINCT_WORDS = 0.35  # so does a share of distinct words below this (in responses of 15 words or more)
_MIN_WORDS = 15
#: Screening reasons that mean "no answer of its own": nothing, or only words its prompt already holds.
NON_ANSWERS = ("empty", "whitespace", "punctuation", "prompt_echo")


def normalized(text: str) -> str:
    """``text`` with case and runs of whitespace folded (how lines and words are compared)."""
    return " ".join(text.casefold().split())


def repeats_itself(text: str) -> bool:
    """True when ``text`` repeats a line ``REPEATED_LINE`` times or has few distinct words (see module)."""
    lines = Counter(normalized(x) for x in text.splitlines() if x.strip())
    words = normalized(text).split()
    return (bool(lines) and max(lines.values()) >= REPEATED_LINE) or \
        (len(words) >= _MIN_WORDS and len(set(words)) / len(words) < DISTINCT_WORDS)


def echoes_prompt(text: str, prompt: Any = None) -> bool:
    """True when ``text`` is no answer of its own (:data:`NON_ANSWERS`) to ``prompt`` (a string or messages)."""
    return screen_response(text, prompt) in NON_ANSWERS


#: Each check as ``(response, prompt) -> bool`` (the prompt is the item's; a check may ignore it).
CHECKS: dict[str, Callable[[str, Any], bool]] = {"repeats_itself": lambda text, _prompt: repeats_itself(text),
                                                 "echoes_prompt": echoes_prompt}


def validate(name: str, kwargs: Mapping[str, Any] | None) -> None:
    """Raise ``ValueError`` for an unknown check or any kwargs (these checks take none)."""
    if name not in CHECKS:
        raise ValueError(f"unknown check 'text:{name}': the text checks are {', '.join(sorted(CHECKS))}")
    if kwargs:
        raise ValueError(f"check 'text:{name}' takes no kwargs, got {sorted(kwargs)}")


def check(name: str, response: str, prompt: Any = None) -> bool:
    """Evaluate the text check ``name`` on ``response`` (``prompt``: the item's, for checks that read it)."""
    validate(name, None)
    return CHECKS[name](response, prompt)
