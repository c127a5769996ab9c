"""When to give up on a batch: the one rule every layer applies (reward engine, grader, transport).

A batch's deadline is the earliest of the limits that apply to it (a request's own, the config's cap; for one
judge's calls also the judge's own ``batch_deadline_s``): :func:`earliest`. The transport cuts each call at it
(a DEADLINE failure, never a hang or an invented verdict); the grader's safety net, :func:`batch_net`, is when the
last judge's calls are cut, and items still running a grace later (:func:`give_up_at`) are cancelled and come back
unscored with DEADLINE errors. The reward engine's belt over those braces waits one grace more.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["batch_net", "earliest", "give_up_at"]


def earliest(*limits: float | None) -> float | None:
    """The deadline that holds when several apply: the earliest (None: no limit)."""
    known = [x for x in limits if x is not None]
    return min(known) if known else None


def batch_net(requested: float | None, judges_own: Iterable[float | None]) -> float | None:
    """Seconds from a batch's start by which every judge's calls are cut: per judge the earliest of the batch's
    ``requested`` deadline and the judge's own ``batch_deadline_s``, the latest of those over the judges; None
    when some judge's calls have no deadline."""
    per_judge = [earliest(requested, own) for own in judges_own]
    if not per_judge or any(d is None for d in per_judge):
        return requested
    return max(per_judge)  # type: ignore[type-var]


def give_up_at(deadline: float | None) -> float | None:
    """Seconds from the start after which work still unfinished past ``deadline`` is cancelled: a grace of
    max(0.5 s, 10%) for answers already in flight to be read (None: never)."""
    return None if deadline is None else deadline + max(0.5, 0.1 * deadline)
