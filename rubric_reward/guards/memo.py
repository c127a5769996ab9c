"""Memoise a function of a rubric per rubric object.

The screens before judging read the same rubric's labels and texts for every response of a batch. A
:class:`~rubric_reward.rubric.Rubric` is immutable, so what is derived from it can be kept per object. This module
imports nothing of the package: the screens sit below :mod:`rubric_reward.rubric` in the import graph (the rubric
validates check names through :mod:`rubric_reward.checks`, which reads :mod:`rubric_reward.guards.degenerate`), so the
Rubric class is recognised by name rather than imported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["per_rubric"]

_RUBRIC = ("rubric_reward.rubric", "Rubric")


def per_rubric(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Memoise ``fn(rubric)`` per Rubric object. The memo holds each rubric it keys, so an id is never reused while
    its entry lives; anything that is not a Rubric (None, a duck-typed stand-in) is computed afresh."""
    memo: dict[int, tuple[Any, Any]] = {}

    @functools.wraps(fn)
    def memoised(rubric: Any) -> Any:
        kind = type(rubric)
        if (kind.__module__, kind.__qualname__) != _RUBRIC:
            return fn(rubric)
        hit = memo.get(id(rubric))
        if hit is not None and hit[0] is rubric:
            return hit[1]
        value = fn(rubric)
        if len(memo) >= 256:
            memo.clear()
        memo[id(rubric)] = (rubric, value)
        return value

    return memoised
