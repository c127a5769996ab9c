"""Replica selection: keep a response's calls on one replica, within a load bound, around failures.

**Affinity.** Every request carries an affinity key (``ChatRequest.affinity``: the shared prefix of one
response's criterion calls, or the task of a group call; else its own messages). Each key ranks the
replicas by rendezvous hashing (highest random weight of ``crc32(key)`` mixed with a per-URL salt), so
the same request set routes the same way in every run and whatever the order the URLs are listed in.
While a key has calls in flight it is *placed*: its later calls (the response's other criteria,
retries) follow it to the same replica, so on vLLM one replica prefills the response once.

**Bounded load.** A new key goes to the first replica in its ranking whose calls in flight are under
``ceil(load_factor x (pool in flight + 1) / usable replicas)`` (consistent hashing with bounded loads,
Mirrokni, Thorup and Zadimoghaddam 2018); a key that passes its first choice over is a *spill*, the one
timing-dependent choice, counted per replica. ``per_replica`` is a hard cap: a placed key whose replica
is full spills too; when every usable replica is full the call waits.

**Health.** A circuit breaker opens after ``failures`` consecutive failures (connection errors,
timeouts, 5xx, and answers the caller could not use: a 200 whose text the grader cannot parse) and
skips the replica for ``cooldown_s``; then one probe request is let through, and
its success closes the breaker: the replica rejoins and its keys come back to it (calls routed away
from a key's first choice by a breaker count as *failovers*, not spills). When every replica is open,
the one that opened first is tried anyway: the breaker routes around failures, it never refuses work.
A key whose answer was unusable avoids the replica that gave it for its next calls (the re-ask
included) while another replica is usable: they count as failovers.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..results import ErrorKind, JudgeError
from .base import ChatReply, ChatRequest

__all__ = ["Replicas", "affinity_hash", "all_busy_reply", "usable"]

log = logging.getLogger(__name__)
_M64 = (1 << 64) - 1
_AVOID_KEYS = 4096  # keys remembered with the replica that gave them an unusable answer (oldest forgotten first)


def _mix(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit weight from a key hash and a replica salt."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def affinity_hash(request: ChatRequest) -> int:
    """The routing hash of ``request``: its affinity key, else its last message (stable across runs)."""
    key = request.affinity
    if key is None:
        content = request.messages[-1].get("content", "") if request.messages else ""
        key = content if isinstance(content, str) else repr(content)
    return zlib.crc32(key.encode("utf-8", "surrogatepass"))


@dataclass(slots=True)
class _Replica:
    salt: int
    in_flight: int = 0
    failures: int = 0
    open_until: float = 0.0  # 0: closed; > now: open; <= now: half-open (one probe at a time)
    probing: bool = False
    calls: int = 0  # attempts routed here
    affine: int = 0  # ... of which to their key's first choice
    spills: int = 0  # ... placed here while their first choice was healthy but over the load bound or full
    failovers: int = 0  # ... placed here because their first choice's breaker was open or it gave the key an
    # unusable answer
    refused: int = 0  # answers the caller could not use (counted as failures)


class Replicas:
    def __init__(self, urls: list[Any], *, per_replica: int | None = None, failures: int = 3,
                 cooldown_s: float = 10.0, load_factor: float = 2.0):
        self.urls = urls
        self.per_replica = per_replica
        self.failures = failures
        self.cooldown_s = cooldown_s
        self.load_factor = load_factor
        self._state = [_Replica(_mix(zlib.crc32(str(u).encode()))) for u in urls]
        self._lock = threading.Lock()
        self._total = 0  # calls in flight over the pool
        self._placed: dict[int, list[int]] = {}  # key hash -> [replica, calls in flight, first choice]
        self._avoid: dict[int, int] = {}  # key hash -> the replica that gave it an unusable answer
        self.trivial = len(urls) == 1 and per_replica is None  # one URL, no cap: nothing to route or count

    # ------------------------------------------------------------------ routing
    def ranking(self, h: int) -> list[int]:
        """The replicas in the order key hash ``h`` prefers them (rendezvous hashing)."""
        return sorted(range(len(self._state)), key=lambda i: _mix(h ^ self._state[i].salt), reverse=True)

    def _usable(self, r: _Replica, now: float) -> bool:
        """Closed, or half-open with no probe out; and under the hard per-replica cap."""
        if self.per_replica is not None and r.in_flight >= self.per_replica:
            return False
        return not r.open_until or (r.open_until <= now and not r.probing)

    def _pick(self, h: int) -> int | None:
        now = time.monotonic()
        state = self._state
        placed = self._placed.get(h)
        bad = self._avoid.get(h) if self._avoid else None
        if placed is not None and placed[0] != bad and self._usable(state[placed[0]], now):
            return self._take(placed[0], h, placed, now)
        order = self.ranking(h)
        usable = [i for i in order if self._usable(state[i], now)]
        if bad is not None and bad in usable and len(usable) > 1:
            usable.remove(bad)
        if not usable:
            if any(not r.open_until or (r.open_until <= now and not r.probing) for r in state):
                return None  # a healthy replica is full: wait for it rather than use a failing one
            candidates = [i for i in order if self.per_replica is None or state[i].in_flight < self.per_replica]
            if not candidates:
                return None
            choice = min(candidates, key=lambda i: state[i].open_until)  # every breaker open: the oldest
        else:
            bound = math.ceil(self.load_factor * (self._total + 1) / len(usable))
            choice = next((i for i in usable if state[i].in_flight < bound), None)
            if choice is None:
                choice = min(usable, key=lambda i: state[i].in_flight)
        if placed is None:
            placed = self._placed[h] = [choice, 0, order[0]]
        else:  # its replica is full or failing: the key's later calls follow it to the new one
            placed[0] = choice
        return self._take(choice, h, placed, now)

    def _take(self, i: int, h: int, placed: list[int], now: float) -> int:
        r = self._state[i]
        if r.open_until and r.open_until <= now:
            r.probing = True
        r.in_flight += 1
        r.calls += 1
        self._total += 1
        placed[1] += 1
        first = placed[2]
        if i == first:
            r.affine += 1
        else:
            f = self._state[first]
            if f.open_until > now or (f.open_until and f.probing) or self._avoid.get(h) == first:
                r.failovers += 1
            else:
                r.spills += 1
        return i

    async def acquire(self, timeout: float | None = None, key: int = 0) -> int | None:
        """The index of the replica for a call with key hash ``key``; None if every replica stays full
        past ``timeout``. Pass the same ``key`` to :meth:`release`."""
        if self.trivial:
            return 0
        with self._lock:
            i = self._pick(key)
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
                i = self._pick(key)
            if i is not None:
                return i

    def release(self, i: int, ok: bool | None, key: int = 0, *, refused: bool = False) -> None:
        """Report the attempt: ``ok`` True (success), False (replica failure) or None (neither). ``refused``:
        a failure because the caller could not use the answer; the key's next calls avoid this replica."""
        if self.trivial:
            return
        with self._lock:
            r = self._state[i]
            if refused:
                ok = False
                r.refused += 1
                if len(self._avoid) >= _AVOID_KEYS and key not in self._avoid:
                    del self._avoid[next(iter(self._avoid))]
                self._avoid[key] = i
            r.in_flight -= 1
            self._total -= 1
            placed = self._placed.get(key)
            if placed is not None:
                placed[1] -= 1
                if placed[1] <= 0:
                    del self._placed[key]
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

    # ------------------------------------------------------------------ reporting
    def stats(self) -> list[dict[str, Any]]:
        """Per replica: url, calls, in flight, affinity share (calls on their key's first choice),
        spills, failovers, refused (unusable answers), and whether its breaker is open. Counts start at
        construction."""
        now = time.monotonic()
        with self._lock:
            return [{"url": str(u), "calls": r.calls, "in_flight": r.in_flight,
                     "affinity_share": (r.affine / r.calls) if r.calls else None, "affine": r.affine,
                     "spills": r.spills, "failovers": r.failovers, "refused": r.refused,
                     "open": r.open_until > now}
                    for u, r in zip(self.urls, self._state, strict=True)]


def all_busy_reply(timeout: float, start: float) -> ChatReply:
    """The failure a backend returns when no replica frees a slot within ``timeout``."""
    return ChatReply(None, JudgeError(ErrorKind.TIMEOUT, f"every replica stayed busy for {timeout:.3g}s"),
                     latency_s=time.perf_counter() - start, attempts=0)


def usable(reply: ChatReply, accept: Callable[[ChatReply], bool]) -> bool:
    """Whether the caller's vetting ``accept`` takes ``reply`` (a vetting that raises does not blame the replica)."""
    try:
        return bool(accept(reply))
    except Exception as exc:  # noqa: BLE001 - the caller parses the reply again and reports its own error
        log.debug("vetting a reply raised %s", type(exc).__name__)
        return True
