"""The shared limit folder (``limit_scope: shared``): private to the user and checked on open, one file and
one descriptor per endpoint and process, and limits per process (one warning) whenever it cannot be used."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from rubric_reward.judges import ChatRequest, Judge, JudgeConfig, limits
from rubric_reward.judges.limits import (
    EndpointLimiter,
    _FileSlots,
    endpoint_limiter,
    limit_dir,
    limit_root,
)
from rubric_reward.testing.judge_server import JudgeServer

ROOT = Path(__file__).resolve().parents[1]
WARNING = "cannot share them through"


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("RUBRIC_REWARD_LIMIT_DIR", str(tmp_path / "limits"))
    limits._REGISTRY.clear()
    limits._WARNED.clear()
    yield
    limits._REGISTRY.clear()


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if WARNING in r.getMessage()]


def limiter(folder: Path, cap: int = 2) -> EndpointLimiter:
    return EndpointLimiter(("k",), cap, 6000, 100_000, folder)


def holds_the_cap(lim: EndpointLimiter, cap: int = 2) -> None:
    """``cap`` attempts in flight and no more, rates reserved and settled, every slot back after."""
    async def go():
        assert all([await lim.acquire(10, 1.0) for _ in range(cap)])
        assert not await lim.acquire(10, 0.05)
        for _ in range(cap):
            lim.release(10, 7)
        assert lim.slots.in_use == 0
        assert await lim.acquire(10, 1.0)
        lim.release(10, 12)

    asyncio.run(go())


# ---------------------------------------------------------------------------- where, and what is checked
def test_the_default_folder_is_per_user_and_private(monkeypatch, tmp_path):
    monkeypatch.delenv("RUBRIC_REWARD_LIMIT_DIR")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    config = JudgeConfig(model="judge", base_url="http://127.0.0.1:9/v1", max_concurrency=2, rpm=600, tpm=10_000)
    folder = limit_dir(config)
    assert folder.parent == tmp_path / f"rubric_reward_limits-{os.geteuid()}"
    lim = endpoint_limiter(config)
    assert lim.shared and lim.directory == folder
    holds_the_cap(lim)
    assert stat.S_IMODE(folder.parent.lstat().st_mode) == 0o700 and stat.S_IMODE(folder.lstat().st_mode) == 0o700
    assert os.listdir(folder) == ["limits"]  # one small file per endpoint: slots and both rates
    assert stat.S_IMODE((folder / "limits").lstat().st_mode) == 0o600

    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))  # a login session's own folder comes first
    assert limit_root() == runtime / "rubric_reward_limits"
    real = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: real + 1)  # ... but not another user's
    assert limit_root() == tmp_path / f"rubric_reward_limits-{real + 1}"


def _symlink_root(tmp_path, folder, monkeypatch):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    folder.parent.symlink_to(tmp_path / "elsewhere")


def _symlink_leaf(tmp_path, folder, monkeypatch):
    folder.parent.mkdir(mode=0o700)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    folder.symlink_to(tmp_path / "elsewhere")


def _open_root(tmp_path, folder, monkeypatch):
    folder.parent.mkdir()
    folder.parent.chmod(0o777)


def _open_leaf(tmp_path, folder, monkeypatch):
    folder.parent.mkdir(mode=0o700)
    folder.mkdir(mode=0o755)


def _others_root(tmp_path, folder, monkeypatch):
    folder.parent.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(folder.parent, 65534, -1)  # really another user's
    else:
        real = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: real + 1)


def _file_is_a_folder(tmp_path, folder, monkeypatch):
    folder.parent.mkdir(mode=0o700)
    folder.mkdir(mode=0o700)
    (folder / "limits").mkdir()


def _file_is_a_symlink(tmp_path, folder, monkeypatch):
    folder.parent.mkdir(mode=0o700)
    folder.mkdir(mode=0o700)
    (tmp_path / "victim").write_bytes(b"keep me!")
    (folder / "limits").symlink_to(tmp_path / "victim")


def _file_is_a_dangling_symlink(tmp_path, folder, monkeypatch):
    folder.parent.mkdir(mode=0o700)
    folder.mkdir(mode=0o700)
    (folder / "limits").symlink_to(tmp_path / "elsewhere")


def _root_is_a_file(tmp_path, folder, monkeypatch):
    folder.parent.write_text("")


UNSAFE = {"a symlinked root": (_symlink_root, "is a symlink"), "a symlinked folder": (_symlink_leaf, "is a symlink"),
          "a root open to others": (_open_root, "has mode 777"), "a folder open to others": (_open_leaf, "has mode 755"),
          "another user's root": (_others_root, "is owned by uid"), "a root that is a file": (_root_is_a_file, "not a folder"),
          "a folder where the file goes": (_file_is_a_folder, "Is a directory"),
          "a symlink where the file goes": (_file_is_a_symlink, "symbolic links"),
          "a dangling symlink where the file goes": (_file_is_a_dangling_symlink, "symbolic links")}


@pytest.mark.parametrize("case", list(UNSAFE))
def test_a_folder_that_fails_the_checks_is_not_used(case, tmp_path, caplog, monkeypatch):
    folder = tmp_path / "root" / "endpoint"
    make, reason = UNSAFE[case]
    make(tmp_path, folder, monkeypatch)
    lim = limiter(folder)
    assert not lim.shared
    holds_the_cap(lim)  # per process, still the cap and the rates
    [line] = warnings(caplog)
    assert str(folder) in line and reason in line, line
    assert not (tmp_path / "elsewhere").exists() or os.listdir(tmp_path / "elsewhere") == []  # nothing made there
    assert not (tmp_path / "victim").exists() or (tmp_path / "victim").read_bytes() == b"keep me!"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_falls_back(tmp_path, caplog):
    folder = tmp_path / "root" / "endpoint"
    folder.parent.mkdir(mode=0o700)
    folder.mkdir(mode=0o700)
    folder.chmod(0o500)
    try:
        lim = limiter(folder)
        assert not lim.shared
        holds_the_cap(lim)
        assert len(warnings(caplog)) == 1
    finally:
        folder.chmod(0o700)


# ---------------------------------------------------------------------------- any OSError, at any time
def _fail_mkdir(monkeypatch):
    real = os.mkdir
    monkeypatch.setattr(os, "mkdir", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full"))
                        if "endpoint" in str(a[0]) else real(*a, **k))


def _fail_open(monkeypatch):
    real = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: (_ for _ in ()).throw(OSError(errno.EROFS, "read-only"))
                        if path == "limits" else real(path, *a, **k))


def _failing_lockf(monkeypatch, when):
    real = fcntl.lockf

    def lockf(fd, cmd, length=0, start=0, whence=0):
        if when(cmd, length):
            raise OSError(errno.EIO, "lock failed")
        return real(fd, cmd, length, start, whence)

    monkeypatch.setattr(fcntl, "lockf", lockf)


FAULTS = {  # (where, armed after the limiter is made)
    "making the folder": (_fail_mkdir, False),
    "opening the file": (_fail_open, False),
    "taking a slot": (lambda mp: _failing_lockf(mp, lambda cmd, n: cmd & fcntl.LOCK_NB), True),
    "giving a slot back": (lambda mp: _failing_lockf(mp, lambda cmd, n: cmd == fcntl.LOCK_UN and n == 1), True),
    "locking a rate": (lambda mp: _failing_lockf(mp, lambda cmd, n: n == 8), True),
    "reading a rate": (lambda mp: mp.setattr(os, "pread", lambda *a: (_ for _ in ()).throw(OSError(errno.EIO, "io"))),
                       True),
    "writing a rate": (lambda mp: mp.setattr(os, "pwrite",
                                             lambda *a: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full"))), True),
}


@pytest.mark.parametrize("where", list(FAULTS))
def test_an_os_error_anywhere_falls_back_per_process(where, tmp_path, caplog, monkeypatch):
    folder = tmp_path / "root" / "endpoint"
    arm, later = FAULTS[where]
    if not later:
        arm(monkeypatch)
    lim = limiter(folder)
    assert lim.shared is later
    if later:
        arm(monkeypatch)
    holds_the_cap(lim)
    holds_the_cap(lim)
    assert not lim.shared
    [line] = warnings(caplog)  # once per folder and process
    assert str(folder) in line


@pytest.mark.parametrize("error", [OSError(errno.EIO, "lock failed"), RuntimeError("a bug")])
def test_the_poller_never_dies_with_waiters_queued(error, tmp_path, caplog, monkeypatch):
    slots = _FileSlots(1, tmp_path / "root" / "endpoint")
    state = {"mode": "busy"}  # every slot held by another process, then the lock call breaks
    real = fcntl.lockf

    def lockf(fd, cmd, length=0, start=0, whence=0):
        if cmd & fcntl.LOCK_NB and state["mode"] == "busy":
            raise OSError(errno.EAGAIN, "held elsewhere")
        if cmd & fcntl.LOCK_NB:
            raise error
        return real(fd, cmd, length, start, whence)

    monkeypatch.setattr(fcntl, "lockf", lockf)

    async def go():
        waiter = asyncio.ensure_future(slots.acquire(timeout=5))
        await asyncio.sleep(0.05)
        assert not waiter.done() and slots._poller is not None and slots._poller.is_alive()
        state["mode"] = "broken"
        assert await waiter  # the poller fell back per process and handed the waiter a slot
        assert slots.in_use == 1 and not slots.try_acquire()
        slots.release()

    asyncio.run(go())
    for _ in range(100):
        if slots._poller is None:
            break
        time.sleep(0.01)
    assert slots._poller is None and not slots.shared and len(warnings(caplog)) == 1


def test_a_judge_on_an_unusable_folder_scores_every_call(tmp_path, caplog, monkeypatch):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "limits").symlink_to(tmp_path / "elsewhere")  # $RUBRIC_REWARD_LIMIT_DIR is a symlink
    with JudgeServer(latency_s=0.02, record_bodies=False) as srv:
        judge = Judge(JudgeConfig(model="judge", base_url=srv.base_url, max_concurrency=3, limit_scope="shared",
                                  rpm=60_000))

        async def go():
            try:
                return await asyncio.gather(*(judge.complete(ChatRequest(({"role": "user", "content": f"q{i}"},)))
                                              for i in range(12)))
            finally:
                await judge.aclose()

        replies = asyncio.run(go())
        assert all(r.ok for r in replies) and srv.max_in_flight <= 3
    assert judge.pool_stats()["cap_shared"] is False
    assert len(warnings(caplog)) == 1 and os.listdir(tmp_path / "elsewhere") == []


# ---------------------------------------------------------------------------- one descriptor, one owner per byte
FEW_DESCRIPTORS = """
import os, resource, sys
from pathlib import Path
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
from rubric_reward.judges.limits import _FileSlots
fds = lambda: len(os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"))
before = fds()
slots = _FileSlots(300, Path(sys.argv[1]))
got = sum(slots.try_acquire() for _ in range(301))
print(slots.shared, got, fds() - before)
"""


def test_slots_take_one_descriptor_whatever_the_capacity(tmp_path):
    out = subprocess.run([sys.executable, "-c", FEW_DESCRIPTORS, str(tmp_path / "root" / "endpoint")],
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "300", "1"]  # 300 slots under a 128-descriptor limit, one descriptor


MANY_IN_FLIGHT = """
import asyncio, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
from rubric_reward.judges import ChatRequest, Judge, JudgeConfig
judge = Judge(JudgeConfig(model="judge", base_url=sys.argv[1], max_concurrency=700, limit_scope="shared",
                          max_retries=0))
async def main():
    replies = await asyncio.gather(*(judge.complete(ChatRequest(({"role": "user", "content": f"q {i}"},)))
                                     for i in range(700)))
    await judge.aclose()
    return replies
replies = asyncio.run(main())
print(sum(r.ok for r in replies), [r.error for r in replies if not r.ok][:2], judge.limiter.shared)
"""


@pytest.mark.timeout(180)
def test_700_calls_in_flight_under_1024_descriptors_all_score(tmp_path):
    with JudgeServer(latency_s=1.0, record_bodies=False) as srv:
        out = subprocess.run([sys.executable, "-c", MANY_IN_FLIGHT, srv.base_url],
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                             timeout=150, check=False)
        assert out.returncode == 0, out.stderr[-2000:]
        print(f"700 calls, cap 700, 1,024 descriptors: peak {srv.max_in_flight} in flight")
    assert out.stdout.split()[0] == "700" and out.stdout.split()[-1] == "True", out.stdout


def test_threads_and_limiters_of_one_process_never_hold_one_slot_twice(tmp_path):
    """Record locks belong to the process: its limiters share which bytes it holds."""
    folder = tmp_path / "root" / "endpoint"
    cap, holding, guard, errors = 3, {}, threading.Lock(), []

    def hammer(name: str) -> None:
        slots = _FileSlots(cap, folder)  # a limiter per thread, one file and one table for the process
        try:
            for _ in range(400):
                if slots.try_acquire():
                    i = slots._held[-1]
                    with guard:
                        assert i not in holding, (i, holding)
                        holding[i] = name
                    with guard:
                        del holding[slots._held[-1]]
                    slots.release()
        except AssertionError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(f"t{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not holding
    a, b = _FileSlots(cap, folder), _FileSlots(cap, folder)
    assert a._file is b._file  # one descriptor
    assert a.try_acquire() and a.try_acquire() and b.try_acquire() and not b.try_acquire() and not a.try_acquire()
    assert sorted(a._held + b._held) == [0, 1, 2]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def _in_a_child(run) -> str:
    """What ``run()`` returns in a forked child (which then exits without running the parent's cleanup)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, run().encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    try:
        return os.read(read, 100).decode()
    finally:
        os.close(read)


def test_a_forked_child_holds_none_of_its_parent_s_slots(tmp_path):
    slots = _FileSlots(2, tmp_path / "root" / "endpoint")
    assert slots.try_acquire()
    # the child: one slot left on the machine, and none held by it
    said = _in_a_child(lambda: f"{slots.in_use} {slots.try_acquire()} {slots.try_acquire()}")
    assert said == "0 True False"
    assert slots.in_use == 1 and slots.try_acquire() and slots.in_use == 2  # the child's exit freed its slot


@pytest.mark.skipif(not hasattr(os, "fork") or os.geteuid() != 0, reason="needs root to act as two users")
def test_as_another_user_a_taken_or_read_only_folder_falls_back(tmp_path):
    """Root plays the other user: it makes a victim's (uid 65534) default folder first; a forked child that
    becomes the victim keeps its limits per process, writes nothing there, and scores as usual."""
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="rr-limits-users-"))
    try:
        base.chmod(0o755)  # a shared temp dir's role
        taken = base / "rubric_reward_limits-65534"
        taken.mkdir()
        taken.chmod(0o777)  # the other user's, open to all
        read_only = base / "own"
        read_only.mkdir(mode=0o700)
        (read_only / "endpoint").mkdir(mode=0o500)
        os.chown(read_only, 65534, 65534)
        os.chown(read_only / "endpoint", 65534, 65534)
        def as_the_victim() -> str:
            os.setgid(65534)
            os.setuid(65534)
            one, two = limiter(taken / "endpoint"), limiter(read_only / "endpoint")
            holds_the_cap(one)
            holds_the_cap(two)
            return f"{one.shared} {two.shared}"

        assert _in_a_child(as_the_victim) == "False False"
        assert os.listdir(taken) == [] and os.listdir(read_only / "endpoint") == []
    finally:
        shutil.rmtree(base)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_a_dropped_limiter_closes_its_descriptor(tmp_path):
    import gc

    before = len(os.listdir("/proc/self/fd"))
    for k in range(20):
        lim = limiter(tmp_path / "root" / f"endpoint{k}")
        assert lim.shared and lim.slots.try_acquire()
        del lim
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before + 1
    other = _FileSlots(2, tmp_path / "root" / "endpoint0")  # the dropped limiter's slot came back
    assert other.try_acquire() and other.try_acquire()
