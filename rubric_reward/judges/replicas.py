"""Replica selection: spread attempts over several base URLs serving one model.

Each attempt goes to the healthy replica with the fewest requests in flight (ties rotate), never
above ``per_replica`` in flight. A circuit breaker opens after ``failures`` consecutive failures
(connection errors, timeouts, 5xx) and skips the replica for ``cooldown_s``; then one probe request
is let through, and its success closes the breaker. When every replica is open, the one that opened
first is tried anyway: the breaker routes around failures, it never refuses work by itself.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

from ..results import ErrorKind, JudgeError
from .base import ChatReply

__all__ = ["Replicas"]


@dataclass(slots=True)
class _Replica:
    in_flight: int = 0
    failures: int = 0
    open_until: float = 0.0  # 0: closed; > now: open; <= now: half-open (one probe at a time)
    probing: bool = False


class Replicas:
    def __init__(self, urls: list[str], *, per_replica: int | None = None, failures: int = 3,
                 cooldown_s: float = 10.0):
        self.urls = urls
        self.per_replica = per_replica
        self.failures = failures
        self.cooldown_s = cooldown_s
        self._state = [_Replica() for _ in urls]
        self._lock = threading.Lock()
        self._next = 0
        self._trivial = len(urls) == 1 and per_replica is None

    def _pick(self) -> int | None:
        now = time.monotonic()
        n = len(self._state)
        best = fallback = None
        for j in range(n):
            i = (self._next + j) % n
            r = self._state[i]
            if self.per_replica is not None and r.in_flight >= self.per_replica:
                continue
            if r.open_until and (r.open_until > now or r.probing):
                if fallback is None or r.open_until < self._state[fallback].open_until:
                    fallback = i
                continue
            if best is None or r.in_flight < self._state[best].in_flight:
                best = i
        if best is None:
            healthy = any(not r.open_until or (r.open_until <= now and not r.probing) for r in self._state)
            if healthy:
                return None  # a healthy replica is busy: wait for it rather than use a failing one
            best = fallback
        if best is not None:
            r = self._state[best]
            if r.open_until and r.open_until <= now:
                r.probing = True
            r.in_flight += 1
            self._next = best + 1
        return best

    async def acquire(self, timeout: float | None = None) -> int | None:
        """The index of the replica to use; None if every replica stays full past ``timeout``."""
        if self._trivial:
            return 0
        with self._lock:
            i = self._pick()
        if i is not None:
            return i
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.001
        while True:  # rare: every usable replica at its cap; poll (works from any loop)
            if deadline is not None and time.monotonic() + pause > deadline:
                return None
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.02)
            with self._lock:
                i = self._pick()
            if i is not None:
                return i

    def release(self, i: int, ok: bool | None) -> None:
        """Report the attempt: ``ok`` True (success), False (replica failure) or None (neither)."""
        if self._trivial:
            return
        with self._lock:
            r = self._state[i]
            r.in_flight -= 1
            was_probe, r.probing = r.probing, False
            if ok:
                r.failures = 0
                r.open_until = 0.0
            elif ok is False:
                r.failures += 1
                if r.failures >= self.failures or was_probe:
                    r.open_until = time.monotonic() + self.cooldown_s

    def is_open(self, i: int) -> bool:
        return self._state[i].open_until > time.monotonic()


def all_busy_reply(timeout: float, start: float) -> ChatReply:
    """The failure a backend returns when no replica frees a slot within ``timeout``."""
    return ChatReply(None, JudgeError(ErrorKind.TIMEOUT, f"every replica stayed busy for {timeout:.3g}s"),
                     latency_s=time.perf_counter() - start, attempts=0)
