"""CPU threads chosen deliberately: how many torch uses, and how idle ones wait.

On a small shared machine (2 cores, other processes running) torch's default is costly: its OpenMP threads
spin while they wait for work, so a team of 2 on 2 busy cores spends its time waiting for a descheduled
partner (a greedy ``generate`` of SmolLM2 measured 34-135 s with 2 spinning threads against 5-8 s with 1
thread or with 2 sleeping ones, docs/performance.md). So, before torch loads, :func:`prepare_environment`
makes idle OpenMP threads sleep (``OMP_WAIT_POLICY=PASSIVE``) and keeps tokenizers' own pool off, unless the
environment already says otherwise; :func:`set_torch_threads` then gives torch ``OMP_NUM_THREADS`` threads when
that is set, else the CPUs this process may use shared among the processes of this machine
(``LOCAL_WORLD_SIZE``), and one inter-op thread. An in-process
judge runs its forwards in a worker thread of the same process, under the same setting.
"""

from __future__ import annotations

import os

__all__ = ["available_cpus", "prepare_environment", "set_torch_threads"]


def available_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def prepare_environment() -> None:
    """Before torch is imported: sleeping idle OpenMP threads, no tokenizers pool (values already set win), and
    glibc keeping freed memory (:func:`rubric_reward.util.cpu_memory.retain_freed_memory`)."""
    from .cpu_memory import retain_freed_memory

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    retain_freed_memory()


def set_torch_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads (``threads``; else ``OMP_NUM_THREADS`` when set; else
    :func:`available_cpus` / processes on this machine) and one inter-op thread; return the intra-op count."""
    import torch

    if threads is None and os.environ.get("OMP_NUM_THREADS", "").isdigit():
        threads = int(os.environ["OMP_NUM_THREADS"]) or None
    if threads is None:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
        threads = max(1, available_cpus() // local)
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # inter-op work already started: its pool stays as it is
        pass
    return threads
