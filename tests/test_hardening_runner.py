"""Issue 14, items 10-12: resume cost, a report lost to a kill, the rpm window."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubric_reward.grading.criterion_prompt import requested_criteria
from rubric_reward.evaluation.runner import arun_eval, run_eval

try:
    from ._runner_fixtures import eval_config, serve, write_dataset
except ImportError:  # pragma: no cover
    from _runner_fixtures import eval_config, serve, write_dataset

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]  # end to end: eval runs, report

PRICED = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}


def _total_cost(run_dir) -> float:
    return sum(json.loads(line)["cost"] for line in (run_dir / "results.jsonl").read_text().splitlines())


def test_replies_paid_for_by_an_interrupted_invocation_are_billed_once_on_resume(tmp_path):
    write_dataset(tmp_path, n=6)
    slow_tone = {"on": True}

    def latency(body):  # 'tone' hangs in the first invocation: its item is never saved there
        asked = [name for _, name in requested_criteria(body["messages"])]
        return 2.0 if slow_tone["on"] and "tone" in asked else 0.0

    with serve(latency_s=latency) as server:
        reference = run_eval(eval_config(tmp_path, server, out="reference", judge=PRICED,
                                         cache=str(tmp_path / "ref.sqlite"), concurrency=6))

        async def interrupted():
            task = asyncio.ensure_future(arun_eval(eval_config(tmp_path, server, out="resumed", judge=PRICED,
                                                               cache=str(tmp_path / "c.sqlite"), concurrency=6)))
            while server.requests < 6 * 3 + 12:  # the reference's 18, then 12 quick ones of this run
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)  # their replies land in the cache
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(interrupted())
        slow_tone["on"] = False
        resumed = run_eval(eval_config(tmp_path, server, out="resumed", judge=PRICED,
                                       cache=str(tmp_path / "c.sqlite"), concurrency=6))
        assert resumed.status == "complete" and resumed.n_graded == 6
        assert resumed.cache_hits == 12  # the 12 answers of the interrupted invocation were reused...
        # ...and billed: the run's cost is what the provider billed for the answers it uses
        assert _total_cost(tmp_path / "resumed") == pytest.approx(_total_cost(tmp_path / "reference"))
        metrics = json.loads((tmp_path / "resumed" / "metrics.json").read_text())
        ref_metrics = json.loads((tmp_path / "reference" / "metrics.json").read_text())
        assert metrics["cost"] == pytest.approx(ref_metrics["cost"]) and metrics["cost"] > 0

        # re-reads cost nothing: a second folder on the same cache, and the finished run again
        other = run_eval(eval_config(tmp_path, server, out="other", judge=PRICED,
                                     cache=str(tmp_path / "c.sqlite"), concurrency=6))
        again = run_eval(eval_config(tmp_path, server, out="resumed", judge=PRICED,
                                     cache=str(tmp_path / "c.sqlite"), concurrency=6))
    assert other.spent == 0.0 and _total_cost(tmp_path / "other") == 0.0
    assert again.n_graded == 0 and _total_cost(tmp_path / "resumed") == pytest.approx(reference.spent)


def test_a_run_killed_while_reporting_is_not_complete_and_the_next_run_rebuilds_the_report(tmp_path, monkeypatch):
    import rubric_reward.evaluation.report as report

    write_dataset(tmp_path, n=3)
    real = report.write_report

    def killed(*a, **k):
        (tmp_path / "run" / "report.md").unlink(missing_ok=True)
        raise KeyboardInterrupt  # stands for a SIGKILL in the middle of writing the report

    with serve() as server:
        monkeypatch.setattr(report, "write_report", killed)
        with pytest.raises(KeyboardInterrupt):
            run_eval(eval_config(tmp_path, server, report=True))
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["status"] != "complete" and not (tmp_path / "run" / "report.md").exists()
        monkeypatch.setattr(report, "write_report", real)
        server.reset_stats()
        summary = run_eval(eval_config(tmp_path, server, report=True))
    assert summary.status == "complete" and summary.n_graded == 0 and server.requests == 0
    assert (tmp_path / "run" / "report.md").exists()
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "complete"
    assert "Status: **complete**" in (tmp_path / "run" / "report.md").read_text()


def test_a_corrupted_journal_line_keeps_the_cost_and_each_damage_is_reported_once(tmp_path, caplog):
    """Issue 21 item 7: the re-judged item carries the cost its lost line held (its replies come
    from the cache), the manifest does not count it twice, and each damaged line is logged once."""
    import logging

    write_dataset(tmp_path, n=6)
    with serve() as server:
        def cfg():
            return eval_config(tmp_path, server, judge=PRICED, cache=str(tmp_path / "c.sqlite"), concurrency=2)

        first = run_eval(cfg())
        run_dir = tmp_path / "run"
        reference = _total_cost(run_dir)
        lines = (run_dir / "results.jsonl").read_text().splitlines(True)
        lines[2] = lines[2].replace('"cost"', 'cost', 1)  # a hand edit breaks one line
        # a torn append that a later write went on after: a bad line in the middle, then a torn tail
        (run_dir / "results.jsonl").write_text("".join(lines[:4]) + lines[4][:30] + "".join(lines[4:]) + '{"ke')
        with caplog.at_level(logging.WARNING, logger="rubric_reward.io.journal"):
            resumed = run_eval(cfg())
    assert resumed.status == "complete" and resumed.n_graded == 2 and resumed.cache_hits == 6
    assert _total_cost(run_dir) == pytest.approx(reference) and reference > 0  # was short by one item
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["spent_total"] == pytest.approx(first.spent) and resumed.spent == pytest.approx(0.0)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3 and len(set(warnings)) == 3, warnings  # two bad lines and the tail, once each
