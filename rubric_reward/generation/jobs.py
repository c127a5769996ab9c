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

__all__ = ["Progress", "job_cache", "run_batch"]

T = TypeVar("T")


class Progress:
    """A rich progress bar on stderr (silent when disabled): ``label``, done/total, ETA, cost, failures."""

    def __init__(self, label: str, total: int, done: int = 0, *, enabled: bool = True):
        self.label, self.total, self.done, self.enabled = label, total, done, enabled
        self.cost, self.failed = 0.0, 0
        self._p: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._p = RichProgress(
                TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("ETA"), TimeRemainingColumn(), TextColumn("cost ${task.fields[cost]:.4f}"),
                TextColumn("[red]{task.fields[failed]} failed"), console=Console(stderr=True))
            self._p.start()
            self._task = self._p.add_task(self.label, total=self.total, completed=self.done, cost=0.0, failed=0)
        return self

    def advance(self, cost: float = 0.0, failed: bool = False) -> None:
        self.cost += cost
        self.failed += int(failed)
        if self._p is not None:
            self._p.update(self._task, advance=1, cost=self.cost, failed=self.failed)

    def __exit__(self, *exc: Any) -> None:
        if self._p is not None:
            self._p.stop()


@contextmanager
def job_cache(cache: str | Path | ReplyCache | None, default: Path) -> Iterator[ReplyCache | None]:
    """The reply cache of a job: ``"auto"`` opens ``default`` (the judges' SQLite format), a path opens
    that file, None is no cache, a ReplyCache is used as is; a cache opened here is closed on exit."""
    from ..cache import SQLiteCache

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
            bar.advance(cost, failed=failed)

        try:
            await asyncio.gather(*(one(x) for x in todo))
        finally:
            for close in aclose:
                await close()

    with Progress(label, total, total - len(todo), enabled=progress) as bar:
        asyncio.run(main(bar))
