"""The final RL report and the monitor plot, on synthetic scores and monitor records."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from rubric_reward.results import ScoreResult
from rubric_reward.rl.report import (
    compare_paired,
    load_selection_scores,
    plot_monitor,
    selection_table,
    write_summary,
)
from rubric_reward.stats import holm_adjust, paired_bootstrap_ci, wilcoxon_signed_rank

pytestmark = pytest.mark.timeout(120)

PNG = b"\x89PNG\r\n\x1a\n"


def _scores(n: int, shift: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [min(1.0, max(0.0, round(rng.uniform(0.4, 1.0) + shift, 2))) for _ in range(n)]


def _monitor(run: Path, steps: dict[int, list[float | None]], lengths: dict[int, float]) -> list[dict]:
    """Monitor records as the checkpoint monitor writes them, with their completions files."""
    records = []
    (run / "monitor").mkdir(parents=True, exist_ok=True)
    for step, values in steps.items():
        name = f"monitor/step-{step:05d}.jsonl"
        (run / name).write_text("".join(json.dumps({"id": f"s{i}", "completion": "x", "value": v}) + "\n"
                                        for i, v in enumerate(values)), encoding="utf-8")
        kept = [v for v in values if v is not None]
        mean = sum(kept) / len(kept)
        records.append({"step": step, "checkpoint": None if step == 0 else str(run / f"checkpoint-{step}"),
                        "n": len(values), "mean": mean, "ci_low": mean - 0.05, "ci_high": mean + 0.05,
                        "perfect": sum(1 for v in kept if v >= 1.0), "unscored": len(values) - len(kept),
                        "mean_length_tokens": lengths[step], "judge_cost": 0.0, "judge_calls": 3 * len(values),
                        "seconds": 1.0, "completions": name, "metric": "score"})
    return records


def test_compare_paired_matches_stats_module():
    base = _scores(30, 0.0, 1)
    best = [min(1.0, b + 0.05) for b in base]
    best[3] = None  # unscored: dropped from the pairs
    c = compare_paired(base, best, n_resamples=500, seed=0)
    pairs_base = [b for b, t in zip(base, best) if t is not None]
    pairs_best = [t for t in best if t is not None]
    assert c["n"] == 30 and c["pairs"] == 29 and c["best"]["unscored"] == 1
    ci = paired_bootstrap_ci(pairs_best, pairs_base, n_resamples=500, seed=0)
    assert c["difference"] == ci.to_dict() and c["difference"]["n"] == 29
    assert c["wilcoxon"]["pvalue"] == wilcoxon_signed_rank(pairs_best, pairs_base).pvalue
    assert c["base"]["perfect"] == sum(1 for b in base if b >= 1.0)
    assert c["improved"] + c["worse"] + c["tied"] == 29 and c["worse"] == 0


def test_compare_paired_undefined_is_none_not_nan():
    c = compare_paired([None, 0.5], [0.7, None])
    assert c["pairs"] == 0 and c["difference"] is None and c["wilcoxon"] is None
    single = compare_paired([0.5], [0.5])
    assert single["difference"]["low"] is None and single["wilcoxon"]["pvalue"] == 1.0
    accepts = compare_paired([ScoreResult(score=0.5, verdicts=()), float("nan")], [ScoreResult(1.0, ()), 1.0])
    assert accepts["pairs"] == 1 and accepts["best"]["perfect"] == 2 and accepts["base"]["unscored"] == 1
    with pytest.raises(ValueError, match="same prompts"):
        compare_paired([0.1, 0.2], [0.1])


def test_selection_table_holm_across_checkpoints(tmp_path):
    base = _scores(25, 0.0, 2)
    steps = {0: base, 5: [min(1.0, v + 0.1) for v in base], 10: _scores(25, 0.0, 3),
             15: [min(1.0, v + 0.02) if i % 2 else v for i, v in enumerate(base)]}
    records = _monitor(tmp_path, steps, {0: 120.0, 5: 100.0, 10: 90.0, 15: 80.0})
    table = selection_table(records, load_selection_scores(tmp_path, records))
    assert table["looked_at"] == 3 and table["tested"] == 3 and table["best_step"] == 5
    nominal = [wilcoxon_signed_rank(steps[s], base).pvalue for s in (5, 10, 15)]
    assert [r["pvalue"] for r in table["rows"]] == nominal
    assert [r["pvalue_holm"] for r in table["rows"]] == holm_adjust(nominal)
    assert [r["best"] for r in table["rows"]] == [True, False, False]
    # Without per-prompt files there are no tests, only the records' numbers.
    bare = selection_table(records)
    assert all(r["pvalue"] is None and r["pvalue_holm"] is None for r in bare["rows"])


def test_plot_monitor_writes_png_with_gaps(tmp_path):
    records = [{"step": 0, "mean": 0.6, "ci_low": 0.5, "ci_high": 0.7, "mean_length_tokens": 100},
               {"step": 2, "mean": None, "ci_low": None, "ci_high": None, "mean_length_tokens": 90},
               {"step": 4, "mean": 0.7, "ci_low": None, "ci_high": None, "mean_length_tokens": 80}]
    path = plot_monitor(tmp_path / "monitor.png", records)
    assert path.read_bytes()[:8] == PNG
    assert plot_monitor(tmp_path / "one.png", records[:1]).read_bytes()[:8] == PNG


def _ifeval_systems():
    from rubric_reward.evaluation.ifeval_prompts import load_ifeval
    from rubric_reward.evaluation.ifeval_report import evaluate_system

    rows = load_ifeval()[:12]
    base = evaluate_system("base", [(r, "Hello, world. This is a response, with commas.") for r in rows])
    trained = evaluate_system("trained", [(r, "hello world this is a response without commas") for r in rows])
    return base, trained


def test_write_summary_every_section(tmp_path):
    base = _scores(40, 0.0, 4)
    best = [min(1.0, v + (0.08 if i % 3 else -0.02)) for i, v in enumerate(base)]
    second_best = [min(1.0, v + 0.01) for v in base]
    sel_base = _scores(20, 0.0, 5)
    records = _monitor(tmp_path, {0: sel_base, 2: [min(1.0, v + 0.1) for v in sel_base],
                                  4: [min(1.0, v + 0.05) for v in sel_base]}, {0: 200.0, 2: 150.0, 4: 140.0})
    base_sys, trained_sys = _ifeval_systems()
    path = write_summary(
        tmp_path, report_scores={"judge": {"base": base, "best": best},
                                 "second_judge": {"base": base, "best": second_best}},
        monitor=records, best={"step": 2, "mean": records[1]["mean"]}, metric="score",
        report_lengths={"base": [200] * 40, "best": [150] * 40},
        ifeval={"base": base_sys, "trained": trained_sys},
        splits={"train": 240, "selection": 20, "report": 40}, n_resamples=300, seed=0,
        meta={"model": "tiny", "dataset": "synthetic", "train_seconds": 12.5})
    assert path == tmp_path / "summary.md"
    md = path.read_text()
    for section in ("# Rubric-reward training: summary", "## Report split: base vs best",
                    "## Selection split: checkpoints looked at", "## IFEval transfer: base vs best",
                    "### Per instruction type (strict)", "second_judge", "2 (best)", "0 (base)",
                    "Mean completion length on the report split: base 200.0 -> best 150.0 tokens",
                    "splits train 240, selection 20, report 40", "![report-split score distributions",
                    "(monitor.png)", "comparison.png"):
        assert section in md, section
    assert "nan" not in md.lower()
    data = json.loads((tmp_path / "summary.json").read_text())
    judge = data["report"]["judge"]
    assert judge["n"] == 40 and judge["base"]["mean_length"] == 200.0
    p = judge["wilcoxon"]["pvalue"]
    assert judge["pvalue_bound_over_looked_at"] == pytest.approx(min(1.0, 2 * p))
    assert data["checkpoints_looked_at"] == 2 and data["selection"]["best_step"] == 2
    assert data["ifeval"]["types"] > 0 and "overall" in data["ifeval"]
    assert data["meta"]["train_seconds"] == 12.5
    for name in ("plots/report_scores.png", "monitor.png", "ifeval/comparison.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
    html = (tmp_path / "summary.html").read_text()
    assert "data:image/png;base64," in html
    # Strictly JSON: no NaN anywhere (json.loads would accept it, so scan the text).
    assert "NaN" not in (tmp_path / "summary.json").read_text()


def test_write_summary_minimal_and_precomputed_ifeval(tmp_path):
    from rubric_reward.evaluation.ifeval_report import write_comparison

    base_sys, trained_sys = _ifeval_systems()
    write_comparison(tmp_path / "ifeval", base_sys, trained_sys, n_resamples=200)
    comparison = json.loads((tmp_path / "ifeval" / "comparison.json").read_text())
    # Constant scores: intervals collapse, Wilcoxon p is 1, nothing is NaN; no monitor at all.
    path = write_summary(tmp_path, report_scores={"judge": {"base": [1.0, 1.0, None], "best": [1.0, 1.0, 1.0]}},
                         ifeval={"dir": str(tmp_path / "ifeval"), "num_prompts": 12, "seed": 0,
                                 "comparison": comparison}, n_resamples=200)
    md = path.read_text()
    assert "2/3 -> 3/3" in md and "No base-model record" in md and "comparison.png" in md
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["report"]["judge"]["pvalue_bound_over_looked_at"] is None  # nothing looked at
    assert not math.isnan(data["report"]["judge"]["wilcoxon"]["pvalue"])
    with pytest.raises(ValueError, match="lacks"):
        write_summary(tmp_path, report_scores={"judge": {"base": [1.0]}})


def test_records_compare_on_metric_and_count_perfect_on_plain_score():
    from dataclasses import dataclass

    import numpy as np

    @dataclass
    class Record:  # the reward's RewardRecord shape
        reward: float | None
        result: ScoreResult | None
        guard: str | None = None
        error: str | None = None

    base = [Record(0.8, ScoreResult(score=1.0, verdicts=(), expected_score=0.8)),
            Record(0.0, None, guard="empty"), Record(None, None, error="judge down")]
    best = [Record(0.9, ScoreResult(score=1.0, verdicts=(), expected_score=0.9)),
            Record(0.6, ScoreResult(score=0.5, verdicts=(), expected_score=None)), Record(np.float32(0.7), None, "x")]
    c = compare_paired(base, best, metric="expected_score", n_resamples=100)
    assert c["base"]["mean"] == pytest.approx(0.4) and c["best"]["mean"] == pytest.approx((0.9 + 0.5 + 0.7) / 3)
    assert c["base"]["perfect"] == 1 and c["best"]["perfect"] == 1  # plain score 1, not expected_score
    assert c["pairs"] == 2 and c["base"]["unscored"] == 1
    with pytest.raises(TypeError, match="cannot read a score"):
        compare_paired(["0.5"], [0.5])


def test_rebuild_summary_from_run_files(tmp_path):
    from rubric_reward.rl.report import _main

    base, best = _scores(15, 0.0, 7), _scores(15, 0.1, 7)
    records = _monitor(tmp_path, {0: base[:10], 3: best[:10]}, {0: 50.0, 3: 40.0})
    (tmp_path / "monitor.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"step": 4, "me')
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "best.json").write_text(json.dumps({"step": 3, "mean": records[1]["mean"]}))
    (tmp_path / "report_completions.jsonl").write_text("".join(
        json.dumps({"id": f"r{i}", "prompt": [], "base_completion": "a", "best_completion": "b",
                    "judge_base": b, "judge_best": t, "second_judge_base": b, "second_judge_best": None})
        + "\n" for i, (b, t) in enumerate(zip(base, best))))
    first = write_summary(tmp_path, report_scores={"judge": {"base": base, "best": best}}, monitor=records,
                          metric="expected_score", splits={"train": 5, "selection": 10, "report": 15},
                          n_resamples=200, meta={"model": "tiny"})
    before = json.loads((tmp_path / "summary.json").read_text())
    assert _main([str(tmp_path)]) == 0 and first.is_file()
    after = json.loads((tmp_path / "summary.json").read_text())
    assert after["report"]["judge"] == before["report"]["judge"]
    assert after["report"]["second_judge"]["pairs"] == 0 and after["metric"] == "expected_score"
    assert after["meta"] == {"model": "tiny"} and after["best"]["step"] == 3 and after["checkpoints_looked_at"] == 1
    assert _main([str(tmp_path / "nowhere")]) == 1
