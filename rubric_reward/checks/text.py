"""Checks on the text itself rather than on an instruction: degenerate repetition.

``text:repeats_itself`` is MET when a response repeats itself: a line (case and spacing folded) occurs
``REPEATED_LINE`` times or more, or a response of 15 words or more has under ``DISTINCT_WORDS`` distinct words.
Give it a negative weight to make it a penalty (``{name: repeats_itself, check: "text:repeats_itself",
weight: -2}``). The GRPO recipe's reward-hacking indicator counts completions by the same rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["CHECKS", "DISTINCT_WORDS", "REPEATED_LINE", "check", "fold", "repeats_itself", "validate"]

REPEATED_LINE = 3  # a line that occurs this often makes a response repetitive
DISTINCT_WORDS = 0.35  # so does a share of distinct words below this (in responses of 15 words or more)
_MIN_WORDS = 15


def fold(text: str) -> str:
    """``text`` with case and runs of whitespace folded (how lines and words are compared)."""
    return " ".join(text.casefold().split())


def repeats_itself(text: str) -> bool:
    """True when ``text`` repeats a line ``REPEATED_LINE`` times or has few distinct words (see module)."""
    lines = Counter(fold(x) for x in text.splitlines() if x.strip())
    words = fold(text).split()
    return (bool(lines) and max(lines.values()) >= REPEATED_LINE) or \
        (len(words) >= _MIN_WORDS and len(set(words)) / len(words) < DISTINCT_WORDS)


CHECKS: dict[str, Callable[[str], bool]] = {"repeats_itself": repeats_itself}


def validate(name: str, kwargs: Mapping[str, Any] | None) -> None:
    """Raise ``ValueError`` for an unknown check or any kwargs (these checks take none)."""
    if name not in CHECKS:
        raise ValueError(f"unknown check 'text:{name}': the text checks are {', '.join(sorted(CHECKS))}")
    if kwargs:
        raise ValueError(f"check 'text:{name}' takes no kwargs, got {sorted(kwargs)}")


def check(name: str, response: str) -> bool:
    """Evaluate the text check ``name`` on ``response``."""
    validate(name, None)
    return CHECKS[name](response)
