"""The one progress bar (rubric_reward.util.progress)."""

import sys

from rubric_reward.util.progress import Progress


def test_a_disabled_bar_only_counts_and_never_imports_rich(monkeypatch):
    monkeypatch.setitem(sys.modules, "rich.progress", None)  # importing it would fail
    with Progress("judging", 4, done=1, enabled=False, cost=True, failures=True) as bar:
        bar.advance(cost=0.5)
        bar.advance(2, cost=0.25, failed=True)
    assert (bar.completed, bar.cost, bar.failed) == (4, 0.75, 1)


def test_an_enabled_bar_draws_label_count_cost_and_failures_on_stderr(capsys):
    with Progress("judging", 3, cost=True, failures=True) as bar:
        for _ in range(3):
            bar.advance(cost=0.001, failed=False)
    err = capsys.readouterr().err
    assert "judging" in err and "3/3" in err and "cost $0.0030" in err and "0 failed" in err
