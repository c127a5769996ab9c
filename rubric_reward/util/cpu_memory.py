"""glibc's allocator told to keep freed memory, so a CPU training step does not fault its memory in again.

A GRPO step on CPU allocates and frees the same large blocks every micro-batch (logits over a 49k-token
vocabulary, activations, gradients). glibc serves a block above its mmap threshold with a fresh ``mmap`` and
unmaps it on ``free``, so the next micro-batch faults the same memory in again, 4 KiB at a time, in the kernel.
On the Zen 5 host 3 GRPO steps of the offline default in bfloat16 took 36-45 s each with 1.1 M page faults
and 33 s of system time; with :func:`retain_freed_memory` (no ``mmap`` for blocks, a 2 GiB trim threshold)
30-36 s, 13 s of system time and the same rewards (docs/performance.md).

Kept memory has a cost where a large model comes and goes inside a training process: a monitor pass loads the
base model with a checkpoint's adapter, generates and drops it, and its freed blocks, below the training step's,
were kept: peak RSS grew by about 1.2 GB at the first checkpoint. :func:`release_freed_memory` hands such
memory back (``malloc_trim``, which also releases free pages inside the heap); the generation of
:mod:`rubric_reward.evaluation.rollouts` calls it when its model is gone.

Only glibc on Linux is touched; a ``GLIBC_TUNABLES`` that sets ``glibc.malloc`` values, a ``MALLOC_*``
variable, or ``RUBRIC_REWARD_MALLOC=system`` leaves the allocator as it is.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["release_freed_memory", "retain_freed_memory"]

_M_TRIM_THRESHOLD = -1  # mallopt parameters, <malloc.h>
_M_MMAP_MAX = -4
_TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: the largest free top of the heap kept, 2 GiB
_retaining = False


def _user_chose() -> bool:
    if os.environ.get("RUBRIC_REWARD_MALLOC", "").lower() == "system":
        return True
    if "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return True
    return any(k.startswith("MALLOC_") for k in os.environ)


def retain_freed_memory() -> bool:
    """Stop glibc from mapping large blocks and from trimming the heap; True when it was set here."""
    if not sys.platform.startswith("linux") or _user_chose():
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc only: musl has mallopt with other meanings)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    global _retaining
    _retaining = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    return _retaining


def release_freed_memory() -> bool:
    """Give the pages of freed blocks back to the system (``malloc_trim(0)``) where
    :func:`retain_freed_memory` kept them; True when something was returned."""
    if not _retaining:
        return False
    import gc

    gc.collect()  # a model dropped in a reference cycle is freed now, not at the next collection
    trim = ctypes.CDLL(None).malloc_trim
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(trim(0))
