"""Reports: files, valid PNG plots, self-contained HTML, "n/a" for undefined statistics, rebuilds."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from _runner_fixtures import REPO, eval_config, serve, write_dataset, write_jsonl

from rubric_reward.cli import main as cli_main
from rubric_reward.evaluation import EvalConfig, run_eval
from rubric_reward.evaluation.formatting import fmt

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_valid_png(path: Path) -> None:
    from PIL import Image

    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE), path
    with Image.open(path) as img:
        img.verify()
    with Image.open(path) as img:
        img.load()
        assert img.size[0] > 100 and img.size[1] > 100


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    write_dataset(tmp, n=16)
    with serve() as server:
        summary = run_eval(eval_config(tmp, server, report=True))
    assert summary.status == "complete"
    return tmp / "run"


def test_report_files_and_plots(run_dir):
    for name in ("results.jsonl", "metrics.json", "manifest.json", "report.md", "report.html"):
        assert (run_dir / name).stat().st_size > 0, name
    plots = sorted(p.name for p in (run_dir / "plots").glob("*.png"))
    assert plots == ["confusion_accurate.png", "confusion_concise.png", "confusion_tone.png",
                     "criteria_accuracy_kappa.png", "score_hist.png", "score_scatter.png"]
    for p in (run_dir / "plots").glob("*.png"):
        assert_valid_png(p)


def test_markdown_references_every_plot_and_prints_na(run_dir):
    md = (run_dir / "report.md").read_text()
    for p in (run_dir / "plots").glob("*.png"):
        assert f"](plots/{p.name})" in md
    metrics = json.loads((run_dir / "metrics.json").read_text())
    exact = metrics["overall"]["exact"]
    assert f"| {fmt(exact)} [" in md
    assert "inter-judge Krippendorff's alpha (mean over criteria) | n/a |" in md  # one judge: undefined
    assert "None" not in md and "nan" not in md.lower().replace("nanmin", "")
    assert "## Per-option precision and recall" in md and "| tone | warm |" in md


def test_html_is_self_contained(run_dir):
    html = (run_dir / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    images = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(images) == len(list((run_dir / "plots").glob("*.png")))
    assert all(src.startswith("data:image/png;base64,") for src in images)
    assert "<table>" in html and "n/a" in html


def test_report_command_rebuilds_from_the_run_folder(run_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    before = json.loads((copy / "metrics.json").read_text())
    for name in ("report.md", "report.html", "metrics.json"):
        (copy / name).unlink()
    shutil.rmtree(copy / "plots")
    assert cli_main(["report", str(copy)]) == 0
    assert json.loads((copy / "metrics.json").read_text()) == before
    assert (copy / "report.md").read_text() == (run_dir / "report.md").read_text()
    for p in (copy / "plots").glob("*.png"):
        assert_valid_png(p)
    assert cli_main(["report", str(tmp_path / "nowhere")]) == 2


def test_report_without_human_labels(tmp_path):
    write_dataset(tmp_path, n=4)
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    write_jsonl(tmp_path / "items.jsonl", [{k: v for k, v in r.items() if k != "labels"} for r in rows])
    with serve() as server:
        run_eval(eval_config(tmp_path, server, report=True))
    md = (tmp_path / "run" / "report.md").read_text()
    assert "| exact accuracy [95% CI, clusters: group] | n/a |" in md
    assert sorted(p.name for p in (tmp_path / "run" / "plots").glob("*.png")) == ["score_hist.png"]


def test_the_bundled_example_runs_against_its_scripted_judge(tmp_path):
    spec = importlib.util.spec_from_file_location("scripted_judge", REPO / "examples" / "eval" / "scripted_judge.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    config = EvalConfig.from_yaml(REPO / "configs" / "eval" / "example.yaml")
    with serve(example.make_judge()) as server:
        judges = tuple(replace(j, base_url=server.base_url) for j in config.judges)
        summary = run_eval(replace(config, judges=judges, out_dir=str(tmp_path / "example"), progress=False))
    assert summary.status == "complete" and summary.n_ok == 12 and summary.spent > 0
    m = summary.metrics
    assert m["items"]["groups"] == 4 and m["overall"]["n_decisions"] == 48
    length = next(c for c in m["criteria"] if c["name"] == "length")
    assert length["per_option"]["too_long"]["recall"] == 0.0  # the scripted judge misses verbosity
    clarity = next(c for c in m["criteria"] if c["name"] == "clarity")
    assert clarity["adjacent"] == 1.0 and clarity["qwk"] is not None
    assert (tmp_path / "example" / "report.html").exists()
