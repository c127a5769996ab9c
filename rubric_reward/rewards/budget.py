"""A training step's time budget, shared by the per-sample reward calls of that step.

Trainers that ask for one sample at a time (verl's ``naive`` managers, ``prime``) would otherwise pay
the per-call deadline once per sample when the judge stops answering: 256 samples x 120 s is 8.5
hours of one step. :class:`StepBudget` bounds the time a step loses to judge calls that fail (a
timeout, the deadline, errors after every retry): once the failed calls of a step have taken
``budget_s`` (their overlap counted once), the step's further samples are unscored at once, and a
call never waits longer than what is left. Calls that succeed cost the budget nothing, so a healthy
judge is never cut short, however the trainer schedules its calls (one after another, or streamed
while the policy is still generating).

A step is recognised by a key when the trainer gives one (``extra_info["global_step"]``), else by
time: a step ends when no call has been in flight for ``gap_s`` seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

__all__ = ["StepBudget", "Ticket"]


@dataclass(frozen=True)
class Ticket:
    """One call's place in its step: when it started, and how long it may take (None: no limit; 0: none left)."""

    start: float
    remaining_s: float | None
    step: int


class StepBudget:
    """Thread-safe; ``begin`` before a call, ``end`` after it (see the module docstring)."""

    def __init__(self, budget_s: float | None, *, gap_s: float = 5.0, clock: Callable[[], float] = time.monotonic):
        self.budget_s, self.gap_s, self._clock = budget_s, gap_s, clock
        self._lock = threading.Lock()
        self._key: Hashable = None
        self._step = 0
        self._in_flight = 0
        self._last_end = float("-inf")
        self._lost = 0.0  # failed-call time of this step, overlaps counted once
        self._lost_until = float("-inf")

    def begin(self, key: Hashable = None) -> Ticket:
        """Register a call of the step ``key`` (None: the step is told by time)."""
        with self._lock:
            now = self._clock()
            new_key = key is not None and key != self._key
            idle = key is None and self._in_flight == 0 and now - self._last_end > self.gap_s
            if new_key or idle:
                self._step += 1
                self._key, self._lost, self._lost_until = key, 0.0, float("-inf")
            self._in_flight += 1
            remaining = None if self.budget_s is None else max(0.0, self.budget_s - self._lost)
            return Ticket(now, remaining, self._step)

    def end(self, ticket: Ticket, *, failed: bool) -> None:
        """The call is over; ``failed``: its sample went unscored for judge trouble (its time is spent)."""
        with self._lock:
            now = self._clock()
            self._in_flight = max(0, self._in_flight - 1)
            self._last_end = now
            if failed and ticket.step == self._step:
                self._lost += max(0.0, now - max(ticket.start, self._lost_until))
                self._lost_until = max(self._lost_until, now)
