"""A private event loop on a daemon thread: the sync facade's way into the async core.

One loop per facade object keeps pooled HTTP sessions alive across calls (a trainer calls the reward
every step) and works whether or not the caller already runs an event loop (notebooks, TRL).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str = "rubric-reward-loop"):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop.is_closed():
            raise RuntimeError("this object was closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()
