"""CPU threads chosen deliberately (rubric_reward.util.threads) and used by the GRPO recipe."""

from __future__ import annotations

import os
import platform

import pytest


def test_environment_defaults_do_not_override(monkeypatch: pytest.MonkeyPatch) -> None:
    from rubric_reward.util.threads import prepare_environment

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    prepare_environment()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE" and os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_torch_threads_share_the_cpus_among_local_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from rubric_reward.util.threads import available_cpus, set_torch_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        assert set_torch_threads() == max(1, available_cpus() // 2) == torch.get_num_threads()
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert set_torch_threads() == 3
        assert set_torch_threads(1) == 1 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_monitor_and_report_generate_with_merged_adapters() -> None:
    """A LoRA adapter merged into the weights costs nothing per generated token (docs/performance.md)."""
    from rubric_reward.recipes.grpo import RecipeArguments, generation_kwargs

    assert generation_kwargs(RecipeArguments())["merge_adapter"] is True


def test_torch_threads_is_a_checked_recipe_field() -> None:
    from rubric_reward.recipes.grpo import RecipeArguments

    with pytest.raises(ValueError, match="torch_threads"):
        RecipeArguments(torch_threads=0)


_MAPPED_BLOCKS = """
import ctypes, sys
from rubric_reward.util.cpu_memory import retain_freed_memory

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = Info
set_here = retain_freed_memory()
before = libc.mallinfo2().hblks
block = libc.malloc(64 << 20)
print(set_here, libc.mallinfo2().hblks - before)
libc.free(block)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
@pytest.mark.parametrize(("env", "expected"), [({}, "True 0"), ({"RUBRIC_REWARD_MALLOC": "system"}, "False 1"),
                                                ({"MALLOC_ARENA_MAX": "2"}, "False 1")])
def test_large_blocks_come_from_the_heap_unless_the_user_chose(env: dict[str, str], expected: str) -> None:
    """A 64 MiB block is not a fresh mapping after retain_freed_memory (so freeing it does not hand the pages
    back to be faulted in again); a user's own allocator settings win."""
    import subprocess
    import sys
    from pathlib import Path

    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    clean.pop("RUBRIC_REWARD_MALLOC", None)
    out = subprocess.run([sys.executable, "-c", _MAPPED_BLOCKS], env={**clean, **env}, capture_output=True,
                         text=True, check=True, cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.split("\n")[0] == expected


_RELEASED = """
import ctypes, os
from rubric_reward.util.cpu_memory import release_freed_memory, retain_freed_memory

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss_mib():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20
set_here = retain_freed_memory()
block = libc.malloc(256 << 20)
ctypes.memset(block, 1, 256 << 20)  # fault the pages in
libc.free(block)
kept = rss_mib()
released = release_freed_memory()
print(set_here, released, kept - rss_mib())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
@pytest.mark.parametrize("env", [{}, {"RUBRIC_REWARD_MALLOC": "system"}])
def test_freed_memory_goes_back_when_released(env: dict[str, str]) -> None:
    """A freed 256 MiB block stays resident under retain_freed_memory (the 2 GiB trim threshold) until
    release_freed_memory hands its pages back; with the allocator left alone there is nothing to release."""
    import subprocess
    import sys
    from pathlib import Path

    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    clean.pop("RUBRIC_REWARD_MALLOC", None)
    out = subprocess.run([sys.executable, "-c", _RELEASED], env={**clean, **env}, capture_output=True,
                         text=True, check=True, cwd=Path(__file__).resolve().parents[1])
    set_here, released, freed_mib = out.stdout.split()
    if env:
        assert (set_here, released) == ("False", "False") and abs(int(freed_mib)) < 32  # glibc unmapped it on free
    else:
        assert (set_here, released) == ("True", "True") and int(freed_mib) >= 200
