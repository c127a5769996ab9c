"""The journaled batch-job skeleton of the generation commands: a reply cache opened for the job, the
unfinished items run with bounded concurrency under one progress bar, and everything closed in order.

``generate_rubrics`` and ``build_preferences`` (and the held-out evaluation through them) share it; each
keeps its own journal(s) and decides what is finished.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..judges.base import ReplyCache
from ..util.progress import Progress

__all__ = ["job_cache", "run_batch"]

T = TypeVar("T")


@contextmanager
def job_cache(cache: str | Path | ReplyCache | None, default: Path) -> Iterator[ReplyCache | None]:
    """The reply cache of a job: ``"auto"`` opens ``default`` (the judges' SQLite format), a path opens
    that file, None is no cache, a ReplyCache is used as is; a cache opened here is closed on exit."""
    from ..judges.cache import SQLiteCache

    own = None
    if cache == "auto":
        cache = own = SQLiteCache(default)
    elif isinstance(cache, str | Path):
        cache = own = SQLiteCache(cache)
    try:
        yield cache
    finally:
        if own is not None:
            own.close()


def run_batch(label: str, todo: Sequence[T], work: Callable[[T], Awaitable[tuple[float, bool]]], *, total: int,
              concurrency: int, progress: bool = True, aclose: Sequence[Callable[[], Awaitable[Any]]] = ()) -> None:
    """Run ``work(item) -> (cost, failed)`` for every item of ``todo``, at most ``concurrency`` at once,
    under a progress bar counting ``total`` (the items not in ``todo`` are already done); then await every
    ``aclose`` (also on failure or interrupt), on the same event loop."""

    async def main(bar: Progress) -> None:
        sem = asyncio.Semaphore(concurrency)

        async def one(item: T) -> None:
            async with sem:
                cost, failed = await work(item)
            bar.advance(cost=cost, failed=failed)

        try:
            await asyncio.gather(*(one(x) for x in todo))
        finally:
            for close in aclose:
                await close()

    with Progress(label, total, total - len(todo), enabled=progress, cost=True, failures=True) as bar:
        asyncio.run(main(bar))
