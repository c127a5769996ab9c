"""Evaluation runner: dataset loading, content-keyed resume, SIGKILL safety, retries, budget cap."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from types import SimpleNamespace
from pathlib import Path

import pytest
import yaml
from _runner_fixtures import (
    REPO,
    RUBRIC,
    config_dict,
    eval_config,
    make_rows,
    read_results,
    serve,
    verdict_view,
    write_dataset,
    write_jsonl,
)

from rubric_reward.cli import main as cli_main
from rubric_reward.evaluation import EvalConfig, run_eval
from rubric_reward.evaluation.dataset import FieldMap, load_items
from rubric_reward.grading.criterion_prompt import template_hash
from rubric_reward.io.rows import DataError
from rubric_reward.rubric import Rubric
from rubric_reward.testing.judge_server import Fault, FaultPlan

# ---------------------------------------------------------------------------- datasets


def test_jsonl_items_with_labels_groups_and_conversations(tmp_path):
    rows = make_rows(3)
    rows[1] = {**rows[1], "prompt": None,
               "conversation": json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                                           {"role": "user", "content": "boiling point?"}])}
    rows[2]["labels"] = {"accurate": True, "concise": "unmet", "tone": 1.0}
    write_jsonl(tmp_path / "d.jsonl", rows)
    items = load_items(tmp_path / "d.jsonl", rubric=Rubric.from_obj(RUBRIC))
    assert [i.id for i in items] == ["item-0000", "item-0001", "item-0002"]
    assert items[0].group == "g0" and items[0].item.prompt.startswith("Question")
    assert items[1].item.prompt[-1] == {"role": "user", "content": "boiling point?"}
    assert items[2].labels == {"accurate": "MET", "concise": "UNMET", "tone": "warm"}


def test_csv_with_json_label_column_and_flat_label_columns(tmp_path):
    rows = make_rows(2)
    with open(tmp_path / "d.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["uid", "question", "answer", "label.accurate", "label.tone", "student"])
        for r in rows:
            w.writerow([r["id"], r["prompt"], r["response"], "MET", "", r["group"]])
    fields = FieldMap(id="uid", prompt="question", response="answer", label_prefix="label.", group="student")
    items = load_items(tmp_path / "d.csv", fields, rubric=Rubric.from_obj(RUBRIC))
    assert items[0].id == "item-0000" and items[0].labels == {"accurate": "MET"} and items[1].group == "g1"

    with open(tmp_path / "e.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["response", "rubric", "labels"])
        w.writerow(["an answer", json.dumps(["Is it polite?", "Is it short?"]), json.dumps({"c1": "yes"})])
    (item,) = load_items(tmp_path / "e.csv")
    assert [c.name for c in item.rubric.criteria] == ["c1", "c2"] and item.labels == {"c1": "MET"}


def test_hugging_face_dataset_object_and_saved_folder(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = make_rows(4)
    ds = datasets.Dataset.from_list(rows)
    items = load_items(ds, rubric=Rubric.from_obj(RUBRIC))
    assert len(items) == 4 and items[3].labels == rows[3]["labels"]
    ds.save_to_disk(str(tmp_path / "saved"))
    again = load_items({"path": str(tmp_path / "saved")}, rubric=Rubric.from_obj(RUBRIC), limit=2)
    assert [i.id for i in again] == ["item-0000", "item-0001"]


def test_rubric_by_id_from_a_library(tmp_path):
    (tmp_path / "lib.yaml").write_text(yaml.safe_dump({"toy": RUBRIC, "other": ["Is it correct?"]}))
    rows = [{"response": "a", "rubric_id": "toy"}, {"response": "b", "rubric_id": "other"}]
    items = load_items(rows, rubrics=tmp_path / "lib.yaml")
    assert [i.rubric.name for i in items] == ["toy", "other"]


@pytest.mark.parametrize("row, message", [
    ({"id": "x"}, "row 0: field 'response' is missing"),
    ({"response": "a", "labels": {"nope": "MET"}}, "row 0: field 'labels': rubric 'toy' has no criterion 'nope'"),
    ({"response": "a", "labels": {"tone": "furious"}},
     "row 0: field 'labels': 'furious' is not a label of criterion 'tone'"),
    ({"response": "a", "labels": "{not json"}, "row 0: field 'labels': not valid JSON"),
    ({"response": "a", "rubric_id": "missing"}, "row 0: field 'rubric_id' is 'missing' but no rubric library"),
    ({"response": "a", "prompt": [{"content": "no role"}]}, "row 0: field 'prompt'"),
])
def test_data_errors_name_the_row_and_the_field(row, message):
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace("?", r"\?")):
        load_items([row], rubric=Rubric.from_obj(RUBRIC))


def test_duplicate_ids_and_bad_json_lines_are_reported(tmp_path):
    with pytest.raises(DataError, match="row 1: field 'id': id 'a' already used by row 0"):
        load_items([{"id": "a", "response": "x"}, {"id": "a", "response": "y"}], rubric=Rubric.from_obj(RUBRIC))
    (tmp_path / "bad.jsonl").write_text('{"response": "x"}\n{oops\n')
    with pytest.raises(DataError, match="line 2: not valid JSON"):
        load_items(tmp_path / "bad.jsonl", rubric=Rubric.from_obj(RUBRIC))
    with pytest.raises(DataError, match="no rubric"):
        load_items([{"response": "x"}])


def test_file_errors_name_the_file_and_its_line_not_a_row_index(tmp_path):
    """Issue 21.7: the second data line of a JSONL file (after a blank line: line 3) was "row 1"."""
    rubric = Rubric.from_obj(RUBRIC)
    (tmp_path / "a.jsonl").write_text('{"id": "a", "response": "x"}\n\n{"id": "b"}\n')
    with pytest.raises(DataError, match=r"a\.jsonl: line 3: field 'response' is missing"):
        load_items(tmp_path / "a.jsonl", rubric=rubric)
    (tmp_path / "b.jsonl").write_text('{"id": "a", "response": "x"}\n{"id": "a", "response": "y"}\n')
    with pytest.raises(DataError, match=r"b\.jsonl: line 2: field 'id': id 'a' already used by line 1"):
        load_items(tmp_path / "b.jsonl", rubric=rubric)
    (tmp_path / "c.csv").write_text("id,response\na,x\nb,\n")
    with pytest.raises(DataError, match=r"c\.csv: line 3: field 'response' is missing"):
        load_items(tmp_path / "c.csv", rubric=rubric)
    items = load_items(tmp_path / "b.jsonl", FieldMap(id="nope"), rubric=rubric)
    assert [(it.row, it.where) for it in items] == [(0, f"{tmp_path / 'b.jsonl'}: line 1"),
                                                    (1, f"{tmp_path / 'b.jsonl'}: line 2")]


def test_the_same_item_twice_is_named_by_its_lines(tmp_path):
    write_dataset(tmp_path, n=1)
    line = (tmp_path / "items.jsonl").read_text().splitlines()[0]
    row = {k: v for k, v in json.loads(line).items() if k != "id"}
    (tmp_path / "items.jsonl").write_text(json.dumps(row) + "\n\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError, match=r"items\.jsonl: line 3 is the same item as .*items\.jsonl: line 1"):
        run_eval(eval_config(tmp_path, SimpleNamespace(base_url="http://127.0.0.1:9/v1")))  # fails before judging


# ---------------------------------------------------------------------------- config
def test_yaml_config_resolves_inputs_next_to_the_file_and_rejects_unknown_fields(tmp_path):
    write_dataset(tmp_path, n=2)
    (tmp_path / "conf").mkdir()
    cfg = {"data": "../items.jsonl", "rubric": "../rubric.yaml", "judges": [{"model": "m", "base_url": "http://x/v1"}],
           "seed": 3, "scoring": {"abstention": "zero"}, "grading": {"shuffle": False}}
    (tmp_path / "conf" / "run.yaml").write_text(yaml.safe_dump(cfg))
    config = EvalConfig.from_yaml(tmp_path / "conf" / "run.yaml")
    assert Path(config.data.path) == tmp_path / "items.jsonl" and config.grading.seed == 3
    assert config.scoring.abstention == "zero" and config.grading.shuffle is False
    (tmp_path / "conf" / "bad.yaml").write_text(yaml.safe_dump({**cfg, "max_cots": 1}))
    with pytest.raises(ValueError, match="unknown field.*max_cots"):
        EvalConfig.from_yaml(tmp_path / "conf" / "bad.yaml")
    (tmp_path / "conf" / "bad2.yaml").write_text(yaml.safe_dump({**cfg, "grading": {"seed": 1}}))
    with pytest.raises(ValueError, match="top level"):
        EvalConfig.from_yaml(tmp_path / "conf" / "bad2.yaml")


# ---------------------------------------------------------------------------- runs
def test_run_writes_one_line_per_item_a_manifest_and_resumes_for_free(tmp_path):
    write_dataset(tmp_path, n=8)
    with serve() as server:
        summary = run_eval(eval_config(tmp_path, server, seed=5))
        assert summary.status == "complete" and summary.n_ok == 8 and server.requests == 24
        server.reset_stats()
        again = run_eval(eval_config(tmp_path, server, seed=5))
    assert again.n_graded == 0 and again.n_resumed == 8 and server.requests == 0
    out = tmp_path / "run"
    results = read_results(out)
    assert [e["id"] for e in results] == [f"item-{i:04d}" for i in range(8)]
    assert len({e["key"] for e in results}) == 8 and all(e["status"] == "ok" for e in results)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["version"] == "0.1.0" and manifest["template_hash"] == template_hash() and manifest["seed"] == 5
    assert manifest["judges"] == [{"name": "scripted", "model": "scripted", "backend": "http",
                                   "endpoints": [server.base_url]}]
    assert manifest["status"] == "complete" and len(manifest["invocations"]) == 2
    assert manifest["counts"] == {"items": 8, "ok": 8, "failed": 0, "missing": 0}
    assert (out / "metrics.json").exists() and (out / "rubrics.json").exists()


def test_a_torn_last_line_is_dropped_and_the_item_judged_again(tmp_path):
    write_dataset(tmp_path, n=5)
    with serve() as server:
        run_eval(eval_config(tmp_path, server))
        path = tmp_path / "run" / "results.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])  # killed mid-write
        server.reset_stats()
        summary = run_eval(eval_config(tmp_path, server))
    assert summary.n_graded == 2 and server.requests == 0  # replies come from the cache
    assert [e["id"] for e in read_results(tmp_path / "run")] == [f"item-{i:04d}" for i in range(5)]


def test_failed_items_are_retried_and_only_their_missing_calls_are_sent(tmp_path):
    write_dataset(tmp_path, n=6)
    faults = FaultPlan(fixed={2: Fault(status=500), 7: Fault(status=503)})
    with serve(faults=faults) as server:
        first = run_eval(eval_config(tmp_path, server, concurrency=1))
        assert first.status == "incomplete" and first.n_failed == 2
        failed = [e for e in read_results(tmp_path / "run") if e["status"] == "failed"]
        assert {v["error"]["kind"] for e in failed for v in e["result"]["verdicts"] if v["error"]} == {"server"}
        server.faults = FaultPlan()
        server.reset_stats()
        second = run_eval(eval_config(tmp_path, server, concurrency=1))
    assert second.status == "complete" and second.n_graded == 2 and server.requests == 2
    results = read_results(tmp_path / "run")
    assert len(results) == 6 and all(e["status"] == "ok" for e in results)


def test_items_that_failed_to_parse_ask_the_judge_again_despite_the_cache(tmp_path):
    write_dataset(tmp_path, n=4)
    faults = FaultPlan(fixed={1: Fault(content="I think it is fine.")})
    with serve(faults=faults) as server:
        first = run_eval(eval_config(tmp_path, server, concurrency=1, grading={"reask": False}))
        assert first.n_failed == 1
        server.faults = FaultPlan()
        server.reset_stats()
        second = run_eval(eval_config(tmp_path, server, concurrency=1, grading={"reask": False}))
    # The unparseable answer was a transport success (cached); the retry bypasses cache reads.
    assert second.status == "complete" and server.requests == 3


def test_changing_one_row_only_judges_that_row(tmp_path):
    write_dataset(tmp_path, n=5)
    with serve() as server:
        run_eval(eval_config(tmp_path, server, cache=None))
        rows = make_rows(5)
        rows[2]["response"] = "A different answer entirely."
        rows[2]["labels"] = {}
        rows[4]["labels"] = {"accurate": "UNMET"}  # a label change needs no judging
        write_jsonl(tmp_path / "items.jsonl", rows)
        server.reset_stats()
        summary = run_eval(eval_config(tmp_path, server, cache=None))
    assert summary.n_graded == 1 and server.requests == 3
    results = read_results(tmp_path / "run")
    assert len(results) == 5 and results[2]["labels"] == {} and results[4]["labels"] == {"accurate": "UNMET"}


def test_budget_cap_stops_cleanly_and_a_rerun_continues(tmp_path, capsys):
    write_dataset(tmp_path, n=10)
    prices = {"input_cost_per_token": 1e-3, "output_cost_per_token": 1e-3}
    with serve() as server:
        probe = run_eval(eval_config(tmp_path, server, out="probe", judge=prices, limit=1))
        item_cost = probe.spent
        assert item_cost > 0
        cap = 3.5 * item_cost
        stopped = run_eval(eval_config(tmp_path, server, judge=prices, max_cost=cap, cache=None))
        assert stopped.status == "stopped_by_budget" and stopped.stopped_by_budget
        assert stopped.spent <= cap and stopped.n_ok == 3 and stopped.n_missing == 7
        assert len(read_results(tmp_path / "run")) == 3
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["status"] == "stopped_by_budget"

        # Through the CLI: the same cap again judges three more and exits 3; no cap finishes the run.
        cfg = tmp_path / "run.yaml"
        cfg.write_text(yaml.safe_dump(config_dict(tmp_path, server, judge=prices, cache=None)))
        assert cli_main(["eval", "--config", str(cfg), "--max-cost", str(cap), "--quiet", "--no-report"]) == 3
        assert len(read_results(tmp_path / "run")) == 6
        server.reset_stats()
        assert cli_main(["eval", "--config", str(cfg), "--quiet", "--no-report"]) == 0
        assert server.requests == 4 * 3
    results = read_results(tmp_path / "run")
    assert len(results) == 10 and len({e["key"] for e in results}) == 10
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert [i["status"] for i in manifest["invocations"]] == ["stopped_by_budget", "stopped_by_budget", "complete"]
    assert manifest["spent_total"] == pytest.approx(10 * item_cost, rel=0.05)
    assert "stopped_by_budget" in capsys.readouterr().err


def test_a_second_runner_on_the_same_folder_is_refused(tmp_path):
    import fcntl

    write_dataset(tmp_path, n=2)
    (tmp_path / "run").mkdir()
    with open(tmp_path / "run" / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with serve() as server, pytest.raises(RuntimeError, match="another run"):
            run_eval(eval_config(tmp_path, server))


# ---------------------------------------------------------------------------- SIGKILL
def _spawn(config_path: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with open(log, "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "rubric_reward.cli", "eval", "--config", str(config_path), "--quiet",
             "--no-report"],
            env=env, stdout=subprocess.DEVNULL, stderr=err,
        )


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_sigkill_at_random_moments_then_resume_equals_an_uninterrupted_run(tmp_path):
    n = 30
    write_dataset(tmp_path, n=n)
    rng = random.Random(1234)
    with serve(latency_s=lambda body: 0.01 + 0.04 * random.random()) as server:
        baseline = run_eval(eval_config(tmp_path, server, out="baseline", concurrency=3))
        assert baseline.status == "complete"

        cfg = tmp_path / "killed.yaml"
        cfg.write_text(yaml.safe_dump(config_dict(tmp_path, server, out="killed", concurrency=3)))
        results, log = tmp_path / "killed" / "results.jsonl", tmp_path / "child.log"
        kills = 0
        for threshold in sorted(rng.sample(range(2, n - 2), 3)):
            proc = _spawn(cfg, log)
            deadline = time.monotonic() + 60
            while _lines(results) < threshold and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.random() * 0.03)  # land anywhere: mid-call, mid-write, between items
            proc.send_signal(signal.SIGKILL)
            rc = proc.wait(30)
            assert rc in (-signal.SIGKILL, 0), log.read_text()
            kills += rc == -signal.SIGKILL
        assert kills >= 2

        final = _spawn(cfg, log)
        assert final.wait(120) == 0, log.read_text()

    got = read_results(tmp_path / "killed")
    want = read_results(tmp_path / "baseline")
    assert len(got) == n and len({e["key"] for e in got}) == n  # none lost, none duplicated
    assert [e["key"] for e in got] == [e["key"] for e in want]
    assert {e["key"]: verdict_view(e) for e in got} == {e["key"]: verdict_view(e) for e in want}
    manifest = json.loads((tmp_path / "killed" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["counts"]["ok"] == n
    statuses = [i["status"] for i in manifest["invocations"]]
    assert statuses[-1] == "complete" and 1 <= statuses.count("killed") <= kills
    assert sum(i["graded"] for i in manifest["invocations"]) >= n


def test_an_ensemble_run_reports_inter_judge_alpha(tmp_path):
    write_dataset(tmp_path, n=6)
    with serve() as server:
        config = config_dict(tmp_path, server)
        config["judges"] = [{**config["judges"][0], "name": "j1"}, {**config["judges"][0], "name": "j2"}]
        summary = run_eval(EvalConfig.from_dict(config))
    assert summary.status == "complete" and server.requests == 6 * 3 * 2
    tone = next(c for c in summary.metrics["criteria"] if c["name"] == "tone")
    assert tone["krippendorff_alpha"]["raters"] == 2 and tone["krippendorff_alpha"]["alpha"] == 1.0


def test_a_zero_budget_judges_nothing_and_still_writes_metrics(tmp_path):
    write_dataset(tmp_path, n=3)
    with serve() as server:
        summary = run_eval(eval_config(tmp_path, server, max_cost=0.0, report=True,
                                       judge={"input_cost_per_token": 1e-3}))
    assert summary.status == "stopped_by_budget" and summary.n_missing == 3 and server.requests == 0
    assert read_results(tmp_path / "run") == []
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["items"]["n"] == 0
    assert (tmp_path / "run" / "report.md").exists()
