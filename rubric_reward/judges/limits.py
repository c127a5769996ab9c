"""Endpoint limits: requests in flight, requests per minute and tokens per minute.

Limits belong to an *endpoint* (base URL(s) + model; not a provider prefix), and every live judge of
the process that points at the endpoint shares one :class:`EndpointLimiter` from a registry (the
strictest limits given apply). A limiter
works from any event loop and thread (the sync facade runs its own loop thread, TRL runs another):
its state sits behind a threading lock, and a waiter is woken on its own loop.

Rates use GCRA (a virtual-schedule token bucket) with a burst of one second's worth, paced so that
any 60-second window holds at most ``rpm`` requests, as the server counts them: pacing runs over
61 seconds, so delivery jitter up to a second cannot push a window over. Tokens are reserved before a request from an
estimate (prompt characters / 4 + ``max_tokens``) and settled against the reported usage after it.

Several processes, by ``JudgeConfig.limit_scope`` (:func:`resolved_scope`):

* ``"shared"``: the processes of one machine share the limits through one file per endpoint in a
  private folder of the user (:func:`limit_root`, then the endpoint's hash; both checked on open:
  folders, not symlinks, owned by the user, mode 0700), whoever started them: accelerate ranks, verl's
  Ray reward workers, a process pool, several services. Each process opens the file once; an attempt in
  flight holds a record lock on one of ``capacity`` bytes (:class:`_FileSlots`), and each rate is a
  GCRA schedule in a locked byte range (:class:`_FileRate`). Any OSError (a folder that fails the
  checks, a full or read-only file system, a failed lock call) turns the limiter per process for the
  rest of the process, with one warning. With ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` set (torchrun,
  accelerate across nodes) the machine holds its share, ``limit x LOCAL_WORLD_SIZE / WORLD_SIZE``.
  Across nodes without them, one ``rubric-reward serve`` that every worker calls holds the cap.
* ``"auto"`` (default): ``"shared"`` for a judge reached over the network (http, litellm), ``"process"``
  for a local model (transformers, in-process vLLM, a scripted test judge): its limits are the process's own.
* ``"world"``: each rank takes its share, ``limit / WORLD_SIZE`` (concurrency at least 1).
  No coordination, works across machines; a rank cannot borrow an idle rank's share.
* ``"process"``: every process gets the full limits.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import logging
import os
import stat
import struct
import tempfile
import threading
import time
import weakref
from asyncio import events
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["EndpointLimiter", "Rate", "Slots", "endpoint_key", "endpoint_limiter", "limit_dir", "limit_root",
           "node_share", "resolved_scope", "world_size"]

log = logging.getLogger(__name__)
_now = time.monotonic
WINDOW_SLACK_S = 1.0  # rate windows are paced over 61 s, so jitter up to 1 s never puts rpm + 1 in 60 s


# ---------------------------------------------------------------------------- concurrency
def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


class Slots:
    """A FIFO counting semaphore usable from any event loop and thread."""

    def __init__(self, n: int):
        self.capacity = n
        self._value = n
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = deque()
        self._lock = threading.Lock()

    @property
    def in_use(self) -> int:
        return self.capacity - self._value

    # Where a free slot comes from and goes back to (a counter here, lock files in _FileSlots); called under
    # self._lock. _waiting_locked runs when a waiter queues (the file slots start their poller there).
    def _take_locked(self) -> bool:
        if self._value > 0:
            self._value -= 1
            return True
        return False

    def _put_back_locked(self) -> None:
        self._value += 1

    def _waiting_locked(self) -> None:
        pass

    def try_acquire(self) -> bool:
        with self._lock:
            return not self._waiters and self._take_locked()

    async def acquire(self, timeout: float | None = None) -> bool:
        """Take a slot; False if none came within ``timeout`` seconds."""
        with self._lock:
            if not self._waiters and self._take_locked():
                return True
            if timeout is not None and timeout <= 0:
                return False
            loop = asyncio.get_running_loop()
            entry = (loop, loop.create_future())
            self._waiters.append(entry)
            self._waiting_locked()
        fut = entry[1]
        # a bare timer, not asyncio.wait_for: every call of a batch with a deadline waits here
        timer = None if timeout is None else entry[0].call_later(timeout, _expire, fut)
        try:
            await fut
            return True
        except (asyncio.CancelledError, TimeoutError) as exc:
            with self._lock:
                try:
                    self._waiters.remove(entry)
                    handed_over = False
                except ValueError:
                    handed_over = True
            if handed_over and fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release()  # granted just as we gave up: pass it on
            # handed over but not yet granted: _grant sees the cancelled future and passes it on
            if isinstance(exc, TimeoutError):
                return False
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def release(self) -> None:
        with self._lock:
            self._hand_over_locked()

    def _hand_over_locked(self) -> None:
        """A held slot goes to the first live waiter (no release and retake), else back where it came from."""
        while self._waiters:
            loop, fut = self._waiters.popleft()
            if fut.done():  # its waiter gave up
                continue
            try:
                if loop is events._get_running_loop():
                    loop.call_soon(self._grant, fut)
                else:
                    loop.call_soon_threadsafe(self._grant, fut)
            except RuntimeError:  # that loop is closed
                continue
            return
        self._put_back_locked()

    def _grant(self, fut: asyncio.Future) -> None:
        if fut.done():
            self.release()
        else:
            fut.set_result(True)

    def resize(self, n: int) -> None:
        """Change the capacity (a smaller one takes effect as slots come back)."""
        with self._lock:
            grow = n - self.capacity
            self.capacity = n
            self._value += grow
        for _ in range(max(0, grow)):
            self._wake_one()

    def _wake_one(self) -> None:
        with self._lock:
            if self._value <= 0 or not self._waiters:
                return
            self._value -= 1
        self.release()


# ---------------------------------------------------------------------------- rates
class Rate:
    """GCRA pacing of ``per_minute`` units with a burst of one second's worth.

    With burst b and emission interval T = (60 + s) / (per_minute - b + 1), any (60 + s)-second
    window of release times holds at most per_minute units. The slack s (:data:`WINDOW_SLACK_S`)
    absorbs delivery jitter: a server that sees requests up to s seconds later or earlier than they
    were released (a first burst slowed by connection setup, say) still counts at most per_minute in
    any 60-second window.
    """

    def __init__(self, per_minute: float):
        self._lock = threading.Lock()
        self._tat = 0.0  # theoretical arrival time of the next unit
        self.set_rate(per_minute)

    def set_rate(self, per_minute: float) -> None:
        burst = max(1, int(per_minute // 60))
        self.per_minute = per_minute
        self.interval = (60.0 + WINDOW_SLACK_S) / max(per_minute - burst + 1, 1e-9) * (1 + 1e-9)  # float-safe
        self.tolerance = (burst - 1) * self.interval

    def _update(self, step: Callable[[float, float], tuple[float, Any]]) -> Any:
        """Apply ``step(tat, now) -> (new tat, result)`` to the schedule; the result."""
        with self._lock:
            self._tat, result = step(self._tat, _now())
            return result

    def reserve(self, units: float = 1.0, max_wait: float | None = None) -> float | None:
        """Reserve ``units``; the seconds to wait before using them, or None if over ``max_wait``."""
        def step(tat: float, now: float) -> tuple[float, float | None]:
            tat = max(tat, now)
            wait = tat - self.tolerance - now
            wait = max(wait, 0.0)
            if max_wait is not None and wait > max_wait:
                return tat, None
            return tat + units * self.interval, wait

        return self._update(step)

    def settle(self, units: float) -> None:
        """Charge (positive) or refund (negative) units after the fact."""
        self._update(lambda tat, now: (tat + units * self.interval, None))


# ---------------------------------------------------------------------------- the shared limit file
# One file per endpoint folder. Byte ranges, each locked with a POSIX record lock (fcntl.lockf):
_FILE_NAME = "limits"
_RATE_OFFSETS = {"rpm": 0, "tpm": 8}  # a rate's schedule (a double), locked while it is read and written
_SLOT_BASE = 16  # concurrency slot i: a lock on byte 16 + i (no data), held while an attempt is in flight
_BUSY = (errno.EAGAIN, errno.EACCES)


def _private_dir(name: str | Path, dir_fd: int | None, shown: Path) -> int:
    """Open folder ``name`` (made 0700 if missing) as a checked descriptor: a folder and not a symlink,
    owned by this user, no group/other access; else OSError saying which."""
    try:
        os.mkdir(name, 0o700, dir_fd=dir_fd)
    except FileExistsError:
        pass
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        link = stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
        raise NotADirectoryError(exc.errno, f"{shown} is {'a symlink' if link else 'not a folder'}") from None
    st, uid = os.fstat(fd), os.geteuid()
    problem = (f"is owned by uid {st.st_uid}, not {uid}" if st.st_uid != uid else
               f"has mode {stat.S_IMODE(st.st_mode):o}, open to group/other (0700 wanted)" if st.st_mode & 0o077
               else None)
    if problem:
        os.close(fd)
        raise PermissionError(errno.EPERM, f"{shown} {problem}")
    return fd


class _LimitFile:
    """An endpoint's limit file, open once per process: one descriptor whatever the capacity.

    POSIX record locks belong to the process, not to a descriptor (and closing any descriptor of the
    file drops them all), so every limiter of the process on the folder shares this object, a thread
    lock serialises its lock calls, and ``held`` says which bytes the process holds (a lock call on one
    of them would succeed again). On any OSError the file is given up for good (``failed``, the
    descriptor closed, which drops the process's locks): its users then keep their limits per process.
    """

    def __init__(self, fd: int, directory: Path):
        self.fd = fd
        self.directory = directory
        self.held: set[int] = set()
        self.failed: OSError | None = None
        self._lock = threading.Lock()

    def _fail(self, exc: OSError) -> None:  # under self._lock
        self.failed = exc
        self.held.clear()
        try:
            os.close(self.fd)
        except OSError:
            pass
        _warn(self.directory, exc)

    def take(self, start: int, n: int) -> int | None:
        """Lock the first of slots ``start, start + 1, ... (mod n)`` that no process holds (no waiting);
        its index, or None."""
        with self._lock:
            if self.failed is not None:
                raise self.failed
            held = self.held
            try:
                for j in range(n):
                    i = (start + j) % n
                    if _SLOT_BASE + i in held:
                        continue
                    try:
                        fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _SLOT_BASE + i)
                    except OSError as exc:
                        if exc.errno in _BUSY:
                            continue
                        raise
                    held.add(_SLOT_BASE + i)
                    return i
                return None
            except OSError as exc:
                self._fail(exc)
                raise

    def give(self, i: int) -> None:
        with self._lock:
            if self.failed is not None:
                raise self.failed
            self.held.discard(_SLOT_BASE + i)
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, _SLOT_BASE + i)
            except OSError as exc:
                self._fail(exc)
                raise

    def update(self, offset: int, step: Callable[[float, float], tuple[float, Any]]) -> tuple[float, Any]:
        """Read-modify-write the schedule at ``offset`` under its lock; (the new schedule, step's result)."""
        with self._lock:
            if self.failed is not None:
                raise self.failed
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX, 8, offset)
                try:
                    raw = os.pread(self.fd, 8, offset)
                    now = _now()
                    tat = struct.unpack("d", raw)[0] if len(raw) == 8 else 0.0
                    if not tat <= now + 3600:  # left over from before a reboot (or not a number)
                        tat = 0.0
                    new_tat, result = step(tat, now)
                    if new_tat != tat and os.pwrite(self.fd, struct.pack("d", new_tat), offset) != 8:
                        raise OSError(errno.ENOSPC, "short write")
                    return new_tat, result
                finally:
                    fcntl.lockf(self.fd, fcntl.LOCK_UN, 8, offset)
            except OSError as exc:
                self._fail(exc)
                raise

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self.held = set()  # a child holds none of its parent's record locks

    def __del__(self) -> None:  # no limiter of the process uses the file any more
        if self.failed is None:
            try:
                os.close(self.fd)
            except OSError:
                pass


_FILES: weakref.WeakValueDictionary[tuple[int, int], _LimitFile] = weakref.WeakValueDictionary()
_FILES_LOCK = threading.Lock()
_WARNED: set[str] = set()
_WARN_LOCK = threading.Lock()


def _warn(directory: Path, exc: BaseException) -> None:
    """One warning per folder and process: the limits stay per process."""
    with _WARN_LOCK:
        if str(directory) in _WARNED:
            return
        _WARNED.add(str(directory))
    log.warning("judge limits: cannot share them through %s (%s); this process keeps its own", directory, exc)


def _limit_file(directory: Path) -> _LimitFile:
    """The process's :class:`_LimitFile` of ``directory`` (made if missing), its folder and the folder
    above checked on open (:func:`_private_dir`) and the file opened without following a symlink."""
    with _FILES_LOCK:
        root = directory.parent
        os.makedirs(root.parent, exist_ok=True)
        root_fd = _private_dir(root, None, root)
        try:
            dir_fd = _private_dir(directory.name, root_fd, directory)
        finally:
            os.close(root_fd)
        try:
            try:
                st = os.stat(_FILE_NAME, dir_fd=dir_fd, follow_symlinks=False)
                file = _FILES.get((st.st_dev, st.st_ino))
            except FileNotFoundError:
                file = None
            if file is not None and file.failed is None:
                return file
            fd = os.open(_FILE_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                os.close(fd)
                raise PermissionError(errno.EPERM, f"{directory / _FILE_NAME} is not a file of this user")
            file = _FILES[(st.st_dev, st.st_ino)] = _LimitFile(fd, directory)
            return file
        finally:
            os.close(dir_fd)


def _open_shared(directory: Path) -> _LimitFile | None:
    try:
        return _limit_file(directory)
    except OSError as exc:
        _warn(directory, exc)
        return None


class _FileRate(Rate):
    """:class:`Rate` whose schedule is a locked byte range of the endpoint's limit file, shared by the
    processes of one machine; per process (from the last schedule seen) once the file fails."""

    def __init__(self, per_minute: float, directory: Path, name: str):
        super().__init__(per_minute)
        self._offset = _RATE_OFFSETS[name]
        self._file = _open_shared(directory)
        _FORKED.add(self)

    def _update(self, step: Callable[[float, float], tuple[float, Any]]) -> Any:
        with self._lock:
            if self._file is not None:
                try:
                    self._tat, result = self._file.update(self._offset, step)
                    return result
                except OSError:
                    self._file = None
            self._tat, result = step(self._tat, _now())
            return result

    def _after_fork(self) -> None:
        self._lock = threading.Lock()


class _FileSlots(Slots):
    """Concurrency slots held as record locks on bytes of the endpoint's limit file, shared by the
    processes of a machine: one descriptor per process whatever the capacity.

    An attempt in flight holds an exclusive lock on one byte of ``capacity``. The kernel drops a dead
    process's locks, so a crash never leaks a slot. Inside a process, waiters queue FIFO and a slot
    released while one waits is handed to it directly (no unlock, no syscall); slots freed by other
    processes are found by one poller thread per limiter (a non-blocking scan every 0.5-10 ms while
    anyone waits). Across processes slots are taken as they are found, not in FIFO order
    (work-conserving: a batch ends no later for it). On any OSError (the folder fails its checks, a
    full or read-only file system, a lock call that fails) the slots become a per-process counter for
    the rest of the process, the slots in flight counted.
    """

    def __init__(self, n: int, directory: Path):
        super().__init__(n)
        self._dir = directory
        self._held: list[int] = []
        self._start = os.getpid()
        self._poller: threading.Thread | None = None
        self._file = _open_shared(directory)
        _FORKED.add(self)

    @property
    def shared(self) -> bool:
        """Whether the slots are held across the machine's processes (False once they fell back)."""
        return self._file is not None and self._file.failed is None

    def _go_local_locked(self) -> None:
        """Per process from now on: the attempts in flight count against the local cap, their bytes go back."""
        file, self._file = self._file, None
        self._value = self.capacity - len(self._held)
        for i in self._held if file is not None else ():
            try:
                file.give(i)
            except OSError:  # a failed file has dropped them already
                pass
        self._held = []

    def _take_locked(self) -> bool:
        if self._file is not None:
            try:
                i = self._file.take(self._start, self.capacity)
            except OSError:
                self._go_local_locked()
            else:
                if i is None:
                    return False
                self._held.append(i)
                self._start = i + 1
                return True
        return super()._take_locked()

    def _put_back_locked(self) -> None:  # no waiter in this process: back to the machine
        if self._file is None:
            super()._put_back_locked()
        elif self._held:
            i = self._held.pop()
            try:
                self._file.give(i)
            except OSError:
                self._go_local_locked()

    def _waiting_locked(self) -> None:
        if self._poller is None and self._file is not None:
            self._poller = threading.Thread(target=self._poll, name="rubric-reward-slots", daemon=True)
            self._poller.start()

    def _poll(self) -> None:
        pause = 0.0005
        while True:
            try:
                with self._lock:
                    while self._waiters and self._waiters[0][1].done():
                        self._waiters.popleft()
                    got = bool(self._waiters) and self._take_locked()
                    if got:
                        self._hand_over_locked()
                    elif not self._waiters or self._file is None:  # per process: releases hand slots over
                        self._poller = None
                        return
            except Exception as exc:  # never leave waiters without a poller: fall back and serve them
                with self._lock:
                    if self._file is None:
                        self._poller = None
                        log.exception("judge limits: the slot poller failed")
                        return
                    _warn(self._dir, exc)
                    self._go_local_locked()
                continue
            if got:
                pause = 0.0005
                continue
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def _after_fork(self) -> None:
        """In a forked child: the parent's locks and waiters are not the child's; start clean."""
        self._lock = threading.Lock()
        self._held, self._waiters, self._poller = [], deque(), None
        self._value = self.capacity

    @property
    def in_use(self) -> int:
        return len(self._held) if self._file is not None else self.capacity - self._value

    def resize(self, n: int) -> None:
        if self._file is None:
            super().resize(n)
            return
        with self._lock:
            self.capacity = n


_FORKED: weakref.WeakSet[Any] = weakref.WeakSet()


def _reset_after_fork() -> None:
    global _FILES_LOCK, _WARN_LOCK
    _FILES_LOCK, _WARN_LOCK = threading.Lock(), threading.Lock()
    for obj in [*_FILES.values(), *_FORKED]:
        obj._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


# ---------------------------------------------------------------------------- endpoint limiter
class EndpointLimiter:
    """Concurrency, rpm and tpm for one endpoint, plus a pause after a 429 with Retry-After."""

    def __init__(self, key: tuple, concurrency: int, rpm: float | None, tpm: float | None,
                 directory: Path | None = None):
        self.key = key
        self.directory = directory
        self.slots: Slots = Slots(concurrency) if directory is None else _FileSlots(concurrency, directory)
        self.rpm = self._rate(rpm, "rpm")
        self.tpm = self._rate(tpm, "tpm")
        self._paused_until = 0.0

    @property
    def shared(self) -> bool:
        """Whether the limits are held across the machine's processes now (False for ``limit_scope``
        other than shared, and after a fallback to per-process limits)."""
        return isinstance(self.slots, _FileSlots) and self.slots.shared

    def _rate(self, per_minute: float | None, name: str) -> Rate | None:
        if per_minute is None:
            return None
        if self.directory is not None:
            return _FileRate(per_minute, self.directory, name)
        return Rate(per_minute)

    def tighten(self, concurrency: int, rpm: float | None, tpm: float | None) -> None:
        """Apply stricter limits from another judge on the same endpoint (the strictest wins)."""
        if concurrency < self.slots.capacity:
            self.slots.resize(concurrency)
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            current = getattr(self, name)
            if value is not None and (current is None or value < current.per_minute):
                if current is None:
                    setattr(self, name, self._rate(value, name))
                else:
                    current.set_rate(value)

    def pause(self, seconds: float) -> None:
        """Hold back new requests (a 429 with Retry-After speaks for the whole endpoint)."""
        self._paused_until = max(self._paused_until, _now() + seconds)

    async def acquire(self, tokens: int = 0, timeout: float | None = None) -> bool:
        """Wait for a concurrency slot and the rate budget; False if that would pass ``timeout``."""
        deadline = None if timeout is None else _now() + timeout
        wait = self._paused_until - _now()
        if wait > 0:
            if deadline is not None and _now() + wait > deadline:
                return False
            await asyncio.sleep(wait)
        if not self.slots.try_acquire() and not await self.slots.acquire(
                None if deadline is None else deadline - _now()):
            return False
        if self.rpm is None and self.tpm is None:
            return True
        left = None if deadline is None else max(0.0, deadline - _now())
        wait = 0.0
        if self.rpm is not None:
            w = self.rpm.reserve(1, left)
            if w is None:
                self.slots.release()
                return False
            wait = w
        if self.tpm is not None and tokens:
            w = self.tpm.reserve(tokens, left)
            if w is None:
                if self.rpm is not None:
                    self.rpm.settle(-1)
                self.slots.release()
                return False
            wait = max(wait, w)
        if wait > 0:
            try:
                await asyncio.sleep(wait)
            except asyncio.CancelledError:
                self.slots.release()
                raise
        return True

    def release(self, reserved_tokens: int = 0, used_tokens: int = 0) -> None:
        """Give the slot back and settle the token reservation against what was used."""
        self.slots.release()
        if self.tpm is not None and reserved_tokens and used_tokens != reserved_tokens:
            self.tpm.settle(used_tokens - reserved_tokens)


# ---------------------------------------------------------------------------- registry
# weak: an endpoint's limiter lives as long as a judge uses it (so do limits tightened by a judge)
_REGISTRY: weakref.WeakValueDictionary[tuple, EndpointLimiter] = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()


def world_size() -> int:
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


_SERVED_PREFIXES = ("openai/", "hosted_vllm/", "litellm_proxy/")


def endpoint_key(config: Any) -> tuple:
    """What identifies an endpoint: its base URL(s) and the model (never a provider prefix alone).

    With a base URL, a litellm routing prefix for OpenAI-compatible servers is dropped, so the fast
    path and the litellm path to the same server share limits.
    """
    model = config.model
    if config.base_urls and model.startswith(_SERVED_PREFIXES):
        model = model.split("/", 1)[1]
    return (tuple(config.base_urls), model)


def node_share() -> float:
    """The fraction of a shared limit this machine holds: LOCAL_WORLD_SIZE / WORLD_SIZE when a launcher
    (torchrun, accelerate) says the world spans several machines, else 1."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        local = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    except ValueError:
        return 1.0
    if world <= 1 or local < 1 or local >= world:
        return 1.0
    return local / world


def resolved_scope(config: Any) -> str:
    """What ``limit_scope: auto`` stands for: shared for a judge reached over the network, else per process."""
    scope = config.limit_scope
    if scope != "auto":
        return scope
    remote = config.base_urls or config.resolved_backend() == "litellm"
    return "shared" if remote else "process"


def limit_root() -> Path:
    """The user's folder of endpoint limit folders: ``$RUBRIC_REWARD_LIMIT_DIR``, else
    ``$XDG_RUNTIME_DIR/rubric_reward_limits`` (when that is a folder of this user), else
    ``<temp dir>/rubric_reward_limits-<uid>``. Checked when opened (:func:`_private_dir`)."""
    if os.environ.get("RUBRIC_REWARD_LIMIT_DIR"):
        return Path(os.environ["RUBRIC_REWARD_LIMIT_DIR"])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    try:
        if runtime and os.stat(runtime).st_uid == os.geteuid():
            return Path(runtime) / "rubric_reward_limits"
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / f"rubric_reward_limits-{os.geteuid()}"


def limit_dir(config: Any) -> Path:
    """The folder whose limit file holds ``config``'s endpoint limits on this machine."""
    digest = hashlib.sha256(repr(endpoint_key(config)).encode()).hexdigest()[:16]
    return limit_root() / digest


def endpoint_limiter(config: Any) -> EndpointLimiter:
    """The process-wide limiter for ``config``'s endpoint, created on first use."""
    concurrency, rpm, tpm = config.max_concurrency, config.rpm, config.tpm
    scope = resolved_scope(config)
    share = 1.0 / world_size() if scope == "world" else node_share() if scope == "shared" else 1.0
    if share < 1.0:
        concurrency = max(1, int(concurrency * share))
        rpm = None if rpm is None else rpm * share
        tpm = None if tpm is None else tpm * share
    key = (*endpoint_key(config), scope)
    with _REGISTRY_LOCK:
        limiter = _REGISTRY.get(key)
        if limiter is None:
            directory = limit_dir(config) if scope == "shared" else None
            limiter = EndpointLimiter(key, concurrency, rpm, tpm, directory)  # falls back per process itself
            _REGISTRY[key] = limiter
        else:
            limiter.tighten(concurrency, rpm, tpm)
    return limiter
