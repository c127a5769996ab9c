"""The sync facade over the async core, in one place.

:class:`SyncFacade` is what every object with an async inside and a sync outside derives from
(``Scorer``, ``RubricReward``, the adapters' engine, ``RewardClient``, ...): ``_run(coro)`` runs a
coroutine on the object's private event-loop thread, started on first use, so pooled connections
live across calls (a trainer calls the reward every step) whether or not the caller runs a loop of
its own (notebooks, TRL). ``close()`` closes what the object opened, each resource on the loop it
lives on, then the thread; an object nobody closes is closed when it is garbage-collected or at
interpreter exit (TRL never closes its reward functions), so no "Unclosed client session" is left.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["LoopSessions", "LoopThread", "SyncFacade", "close_detached", "close_on_owner"]

T = TypeVar("T")
log = logging.getLogger("rubric_reward")
_CREATE = threading.Lock()


class LoopThread:
    """One event loop running forever on a daemon thread."""

    def __init__(self, name: str = "rubric-reward-loop"):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a sync method was called from inside its own event loop; await the async form")
        return self.submit(coro).result()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Any:
        """Schedule ``coro`` on this loop; a ``concurrent.futures.Future`` of its result."""
        if self._loop.is_closed():
            coro.close()
            raise RuntimeError("this object was closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if threading.current_thread() is self._thread:  # closed from its own loop (a finalizer): stop only
            self._loop.call_soon(self._loop.stop)
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()


class _Lifetime:
    """What one facade opened: its loop thread (lazily) and the async resources it owns.

    Held by the facade and by its finalizer, never referring back to the facade, so a facade that is
    garbage-collected still gets its resources closed.
    """

    def __init__(self, name: str):
        self.name = name
        self.thread: LoopThread | None = None
        self.resources: list[Any] = []
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def loop_thread(self) -> LoopThread:
        with self.lock:
            if self.thread is None:
                self.thread = LoopThread(self.name)
            return self.thread

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop_thread().run(coro)

    def close(self) -> None:
        if os.getpid() != self.pid:  # inherited through fork: the thread and connections are the parent's
            return
        with self.lock:
            thread, self.thread = self.thread, None
            resources, self.resources = self.resources, []
        if resources:
            runner = thread or LoopThread(f"{self.name}-close")
            try:
                if threading.current_thread() is runner._thread:  # a finalizer on the loop's own thread
                    runner.loop.create_task(_aclose_all(resources))
                else:
                    runner.run(_aclose_all(resources))
            except Exception as exc:  # noqa: BLE001 - closing is best effort
                log.debug("closing %s: %s: %s", self.name, type(exc).__name__, exc)
            if runner is not thread:
                runner.close()
        if thread is not None:
            thread.close()


async def _aclose_all(resources: list[Any]) -> None:
    for resource in reversed(resources):
        try:
            await resource.aclose()
        except Exception as exc:  # noqa: BLE001 - one failing close must not keep the others open
            log.debug("closing %r: %s: %s", resource, type(exc).__name__, exc)


class SyncFacade:
    """Base for objects with an async core and a sync facade (see the module docstring).

    Subclasses call ``self._run(coro)`` from their sync methods and register what must be closed with
    ``self._own(resource)`` (anything with ``async aclose()``); ``close()`` (also ``with obj:``, garbage
    collection and interpreter exit) closes those, then the loop thread. After ``close()`` the object
    may be used again: a new loop thread starts on the next call. ``_loop_name`` names the thread.
    """

    _loop_name = "rubric-reward-loop"
    _life: _Lifetime | None = None

    def _lifetime(self) -> _Lifetime:
        life = self._life
        if life is None:
            with _CREATE:
                life = self._life
                if life is None:
                    life = _Lifetime(self._loop_name)
                    weakref.finalize(self, life.close)
                    self._life = life
        return life

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._lifetime().run(coro)

    async def _arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on this object's loop from any event loop, blocking no thread."""
        thread = self._lifetime().loop_thread()
        if asyncio.get_running_loop() is thread.loop:
            return await coro
        return await asyncio.wrap_future(thread.submit(coro))

    def _own(self, resource: T) -> T:
        """Close ``resource`` (its ``aclose()``) with this object; owning it again is a no-op. The
        resource must not refer back to this object (its finalizer holds the resource)."""
        life = self._lifetime()
        with life.lock:
            if not any(r is resource for r in life.resources):
                life.resources.append(resource)
        return resource

    def close(self) -> None:
        """Close what this object opened (each resource on the loop it lives on), then its loop thread."""
        life, self._life = self._life, None
        if life is not None:
            life.close()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


async def close_on_owner(loop: asyncio.AbstractEventLoop, close: Callable[[], Awaitable[Any]],
                         timeout_s: float = 5.0) -> None:
    """Run ``close()`` on ``loop``, the loop the resource lives on, and wait for it.

    From the current loop it is awaited here; on another running loop (a trainer's loop thread) it
    is scheduled there and waited for; a loop that is already closed took its connections with it,
    so there is nothing left to wait for.
    """
    current = asyncio.get_running_loop()
    if loop is current:
        await close()
    elif loop.is_running():
        future = asyncio.run_coroutine_threadsafe(_call(close), loop)
        await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)


async def _call(close: Callable[[], Awaitable[Any]]) -> None:
    await close()


class LoopSessions:
    """One client session per event loop (a session cannot cross loops), made by ``factory()``: an aiohttp
    ``ClientSession`` or any object with ``closed``, ``async close()`` and ``close_detached()``; ``aclose()``
    closes each on the loop it lives on."""

    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            session = self._sessions[loop] = self._factory()
        return session

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.items()), weakref.WeakKeyDictionary()
        for loop, session in sessions:
            if session.closed:
                continue
            if loop.is_running():
                await close_on_owner(loop, session.close)
            else:  # its loop is gone (an ``asyncio.run`` that has returned): close its connections here
                if hasattr(session, "close_detached"):
                    session.close_detached()
                else:
                    close_detached(session)


def close_detached(session: Any) -> None:
    """Close the connections of a session whose loop has stopped, without that loop: the connector's
    transports are closed now (no "Unclosed connector" warning later), and the session forgets it."""
    connector = getattr(session, "connector", None)
    session.detach()
    if connector is None or connector.closed:
        return
    for conns in list(getattr(connector, "_conns", {}).values()):  # idle keep-alive connections: their sockets
        for proto, *_ in list(conns):
            transport = getattr(proto, "transport", None)
            sock = getattr(transport, "_sock", None)
            if sock is not None:
                sock.close()
                transport._sock = None  # the transport's loop is closed: it cannot close itself
    try:
        waiters = connector._close()  # the synchronous part of BaseConnector.close(): closes every transport
    except Exception as exc:  # noqa: BLE001 - closing is best effort
        log.debug("closing a detached connector: %s: %s", type(exc).__name__, exc)
        return
    for waiter in waiters or ():  # nothing can await them on a stopped loop
        close = getattr(waiter, "close", None)
        if close is not None:
            close()
