"""The package's one progress bar: rich, on stderr, and silent (only counting) when disabled."""

from __future__ import annotations

from typing import Any

__all__ = ["Progress"]


class Progress:
    """``with Progress("judging", total) as bar: ... bar.advance()``.

    Shows the label, the bar, done/total, elapsed time and the ETA; with ``cost=True`` the running cost
    (``advance(cost=...)`` adds to it), with ``failures=True`` the count of failed units. ``done``
    units (from an earlier run, say) count as finished from the start. Disabled, nothing is drawn and
    rich is never imported.
    """

    def __init__(self, label: str, total: int, done: int = 0, *, enabled: bool = True, cost: bool = False,
                 failures: bool = False):
        self.label, self.total, self.completed, self.enabled = label, total, done, enabled
        self.show_cost, self.show_failures = cost, failures
        self.cost, self.failed = 0.0, 0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            columns: list[Any] = [TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
            if self.show_cost:
                columns.append(TextColumn("cost ${task.fields[cost]:.4f}"))
            if self.show_failures:
                columns.append(TextColumn("[red]{task.fields[failed]} failed"))
            self._bar = RichProgress(*columns, console=Console(stderr=True))
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, completed=self.completed, cost=0.0,
                                            failed=0)
        return self

    def advance(self, n: int = 1, *, cost: float = 0.0, failed: int | bool = 0) -> None:
        """``n`` more units done, ``cost`` more spent, ``failed`` more failures."""
        self.completed += n
        self.cost += cost
        self.failed += int(failed)
        if self._bar is not None:
            self._bar.update(self._task, advance=n, cost=self.cost, failed=self.failed)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
