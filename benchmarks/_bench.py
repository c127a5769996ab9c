"""What the benchmarks share: this checkout on ``sys.path``, a synthetic workload (rubric, filler text), a timer.

Import it first (``from _bench import ROOT, ...``): a benchmark runs as ``python benchmarks/NAME.py`` from any
folder and must measure this checkout's ``rubric_reward``, not an installed one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WORDS = ("the quick brown fox jumps over a lazy dog while careful graders read every claim and check "
         "each cited source against the stated requirement before any verdict is written down").split()


def rubric_spec(n: int, requirement: str = "The response addresses aspect {i} of the task completely.",
                name: str = "bench") -> dict[str, Any]:
    """A rubric mapping of ``n`` binary criteria ``criterion_<i>``; ``requirement`` is formatted with ``i``."""
    return {"name": name, "criteria": [{"name": f"criterion_{i}", "requirement": requirement.format(i=i)}
                                       for i in range(n)]}


def filler(offset: int, words: int) -> str:
    """``words`` words of :data:`WORDS`, starting at ``offset`` (different offsets, different texts)."""
    return " ".join(WORDS[(offset + j) % len(WORDS)] for j in range(words))


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """``(wall seconds, process CPU seconds, result)`` of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out
