"""The final RL report and the monitor plot, on synthetic scores and monitor records."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from rubric_reward.results import ScoreResult
from rubric_reward.recipes.grpo.comparison import compare_paired, load_selection_scores, selection_table
from rubric_reward.recipes.grpo.plots import plot_monitor
from rubric_reward.recipes.grpo.summary import (SummarySettings, headline, read_report_rows, report_row,
                                                write_summary)
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
        (run / name).write_text("".join(json.dumps({"id": f"s{i}", "completion": f"step {step} answer {i}",
                                                    "value": v}) + "\n"
                                        for i, v in enumerate(values)), encoding="utf-8")
        kept = [v for v in values if v is not None]
        mean = sum(kept) / len(kept)
        records.append({"step": step, "checkpoint": None if step == 0 else str(run / f"checkpoint-{step}"),
                        "n": len(values), "mean": mean, "ci_low": mean - 0.05, "ci_high": mean + 0.05,
                        "perfect": sum(1 for v in kept if v >= 1.0), "unscored": len(values) - len(kept),
                        "mean_length_tokens": lengths[step], "judge_cost": 0.0, "judge_calls": 3 * len(values),
                        "seconds": 1.0, "completions": name, "metric": "score"})
    return records


def _rows(base, best, *, tokens=(20, 20), second=None, texts=None, benchmarks=None, prompts=None):
    """Report rows (report_row) for per-prompt scores; completions differ unless ``texts`` says otherwise."""
    out = []
    for i, (b, t) in enumerate(zip(base, best)):
        scores = {"judge": {"base": b, "best": t}}
        if second is not None:
            scores["second_judge"] = {"base": second[0][i], "best": second[1][i]}
        completions = texts[i] if texts else {"base": f"base answer {i}", "best": f"trained answer {i}"}
        row = {"id": f"r{i}", "prompt": [{"role": "user", "content": prompts[i] if prompts else f"prompt {i}"}],
               "benchmark": benchmarks[i] if benchmarks else "all"}
        out.append(report_row(row, completions, {"base": tokens[0], "best": tokens[1]}, scores))
    return out


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
    rows = _rows(base, best, tokens=(200, 150), second=(base, second_best),
                 benchmarks=["no_comma", "lowercase"] * 20)
    path = write_summary(
        tmp_path, report_rows=rows,
        monitor=records, best={"step": 2, "mean": records[1]["mean"]}, metric="score",
        ifeval={"base": base_sys, "trained": trained_sys},
        splits={"train": 240, "selection": 20, "report": 40}, n_resamples=300, seed=0,
        meta={"model": "tiny", "dataset": "synthetic", "train_seconds": 12.5})
    assert path == tmp_path / "summary.md"
    md = path.read_text()
    for section in ("# Rubric-reward training: summary", "## Report split: base vs best",
                    "## Selection split: checkpoints looked at", "## IFEval transfer: base vs best",
                    "### Per instruction type (strict)", "second_judge", "2 (best)", "0 (base)",
                    "| mean length (tokens) | 200.0 -> 150.0 |", "### Per instruction type (report split)",
                    "### Does the gain look like reward hacking?", "Test: Wilcoxon signed-rank, two-sided",
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
    path = write_summary(tmp_path, report_rows=_rows([1.0, 1.0, None], [1.0, 1.0, 1.0]),
                         ifeval={"dir": str(tmp_path / "ifeval"), "num_prompts": 12, "seed": 0,
                                 "comparison": comparison}, n_resamples=200)
    md = path.read_text()
    assert "2/3 -> 3/3" in md and "No base-model record" in md and "comparison.png" in md
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["report"]["judge"]["pvalue_bound_over_looked_at"] is None  # nothing looked at
    assert not math.isnan(data["report"]["judge"]["wilcoxon"]["pvalue"])
    with pytest.raises(ValueError, match="no report rows"):
        write_summary(tmp_path, report_rows=[])


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
    from rubric_reward.recipes.grpo.summary import _main

    base, best = _scores(15, 0.0, 7), _scores(15, 0.1, 7)
    records = _monitor(tmp_path, {0: base[:10], 3: best[:10]}, {0: 50.0, 3: 40.0})
    (tmp_path / "monitor.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"step": 4, "me')
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "best.json").write_text(json.dumps({"step": 3, "mean": records[1]["mean"]}))
    rows = _rows(base, best, second=(base, [None] * 15))
    (tmp_path / "report_completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    first = write_summary(tmp_path, report_rows=rows, monitor=records,
                          metric="expected_score", splits={"train": 5, "selection": 10, "report": 15},
                          n_resamples=200, meta={"model": "tiny"})
    before = json.loads((tmp_path / "summary.json").read_text())
    assert _main([str(tmp_path)]) == 0 and first.is_file()
    after = json.loads((tmp_path / "summary.json").read_text())
    assert after["report"]["judge"] == before["report"]["judge"]
    assert after["report"]["second_judge"]["pairs"] == 0 and after["metric"] == "expected_score"
    assert after["meta"] == {"model": "tiny"} and after["best"]["step"] == 3 and after["checkpoints_looked_at"] == 1
    assert _main([str(tmp_path / "nowhere")]) == 1


def test_summary_settings_are_made_once_and_recorded(tmp_path):
    from rubric_reward.recipes.grpo.console import _regressions

    s = SummarySettings(confidence=0.9, resamples=300, seed=4)
    assert (s.alpha, s.level) == (1 - 0.9, 90) and SummarySettings().numbers() == {
        "bootstrap_resamples": 2000, "confidence": 0.95, "seed": 0}
    assert SummarySettings.of({}) == SummarySettings() == SummarySettings.of({"settings": None})
    write_summary(tmp_path, report_rows=_rows(_scores(20, 0.0, 1), _scores(20, -0.3, 1)), n_resamples=300,
                  confidence=0.9, seed=4)
    data = json.loads((tmp_path / "summary.json").read_text())
    assert SummarySettings.of(data) == s and data["settings"]["by_type_adjustment"] == "holm across types"
    assert "90% CI" in data["headline"] and "90% bootstrap intervals (300 resamples, seed 4)" in (
        tmp_path / "summary.md").read_text()
    assert _regressions(data, tmp_path)  # the console reads the same settings: a fall with a 90% interval


def test_rebuild_summary_runs_as_a_module(tmp_path):
    import subprocess
    import sys

    rows = _rows(_scores(8, 0.0, 2), _scores(8, 0.1, 2))
    (tmp_path / "report_completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_summary(tmp_path, report_rows=rows, n_resamples=100)
    before = (tmp_path / "summary.md").read_text()
    done = subprocess.run([sys.executable, "-m", "rubric_reward.recipes.grpo.summary", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("wrote "), done.stderr
    assert (tmp_path / "summary.md").read_text() == before  # the same summary again, from the run folder


# ------------------------------------------------------------------------------------------- the tie rule
def test_identical_completions_and_float_noise_are_ties():
    # what the issue saw: byte-identical base and best completions whose logprob scores differ by 3.9e-7 / 2.7e-8
    base, best = [0.6130, 0.5200, 0.7000], [0.6130 + 3.9e-7, 0.5200 - 2.7e-8, 0.7000 + 1e-10]
    texts = ["same text", "also same", "different a"]
    c = compare_paired(base, best, base_texts=texts, best_texts=texts[:2] + ["different b"], n_resamples=200)
    assert (c["improved"], c["worse"], c["tied"], c["identical"]) == (0, 0, 3, 2)
    assert c["difference"]["estimate"] == 0.0 and c["wilcoxon"]["pvalue"] == 1.0
    assert c["wilcoxon"]["method"] == "none"
    # without the texts the 3.9e-7 gap is a real (if tiny) difference; 1e-10 is still a tie
    bare = compare_paired(base, best, n_resamples=200)
    assert (bare["improved"], bare["worse"], bare["tied"]) == (1, 1, 1)


def test_selection_pvalues_use_the_tie_rule(tmp_path):
    base = [0.2, 0.4, 0.6, 0.8, 0.5, 0.3, 0.7, 0.9]
    noisy = [v + 1e-7 for v in base]  # the same completions, re-scored with float noise
    records = _monitor(tmp_path, {0: base, 2: noisy}, {0: 10.0, 2: 10.0})
    for rec in records:  # same completion text at both steps
        path = tmp_path / rec["completions"]
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**r, "completion": f"answer {i}"}) + "\n" for i, r in enumerate(rows)))
    table = selection_table(records, load_selection_scores(tmp_path, records))
    assert table["rows"][0]["pvalue"] == 1.0


def test_headline_and_counts_recomputed_from_report_completions(tmp_path):
    from fractions import Fraction

    from scipy import stats as sps

    rng = random.Random(11)
    base = [rng.randint(0, 7) / 7 for _ in range(60)]
    best = [min(1.0, b + rng.choice([0, 0, 1, 2, -1]) / 7) for b in base]
    texts = [{"base": f"a{i}", "best": f"a{i}" if i % 10 == 0 else f"b{i}"} for i in range(60)]
    write_summary(tmp_path, report_rows=_rows(base, best, texts=texts), n_resamples=300,
                  splits={"train": 10, "selection": 5, "report": 60}, meta={"model": "m", "max_steps": 7})
    (tmp_path / "report_completions.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _rows(base, best, texts=texts)))
    rows = read_report_rows(tmp_path / "report_completions.jsonl")
    # recompute by hand: identical completions tie, differences as fractions
    diffs = []
    for r in rows:
        s = r["scores"]["judge"]
        same = r["completions"]["base"] == r["completions"]["best"]
        d = Fraction(0) if same else (Fraction(s["best"]).limit_denominator(7) - Fraction(s["base"]).limit_denominator(7))
        diffs.append(d)
    better, worse, tied = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs), sum(d == 0 for d in diffs)
    p = sps.wilcoxon([float(d * 7) for d in diffs]).pvalue  # integers: exact ties
    data = json.loads((tmp_path / "summary.json").read_text())
    judge = data["report"]["judge"]
    assert (judge["improved"], judge["worse"], judge["tied"]) == (better, worse, tied)
    assert judge["wilcoxon"]["pvalue"] == pytest.approx(p, rel=1e-9)
    mean_base = sum(r["scores"]["judge"]["base"] for r in rows) / 60
    md = (tmp_path / "summary.md").read_text()
    first = md.split("\n\n")[1]
    assert first == data["headline"] == headline(data)
    assert first.startswith("GRPO trained m for 7 steps on 10 training prompts.")
    assert f"from {mean_base:.3f}" in first and f"p = {p:.3g}" in first
    assert f"{better} better, {worse} worse, {tied} tied" in first


def test_headline_says_when_the_change_is_not_distinguishable(tmp_path):
    base = [0.5, 0.6, 0.7, 0.4, 0.5]
    best = [0.5, 0.7, 0.6, 0.4, 0.6]
    write_summary(tmp_path, report_rows=_rows(base, best), n_resamples=200)
    text = json.loads((tmp_path / "summary.json").read_text())["headline"]
    assert "not distinguishable from zero" in text


# ------------------------------------------------------------------------------------------- hacking
def test_hack_indicators_flag_a_phrase_only_policy(tmp_path):
    from rubric_reward.recipes.grpo.hacks import hack_indicators
    from rubric_reward.recipes.grpo.hacks import repetitive as hacks_repetitive

    prompts = [f"Describe topic {i}. End with the exact phrase 'Is there anything else?'" for i in range(10)]
    base = [f"Topic {i} is a long and detailed answer about many things. Is there anything else?" for i in range(10)]
    hack = ["Is there anything else?"] * 8 + ["", "topic"]
    h = hack_indicators(prompts, base, hack, best_scores=[1.0] * 8 + [0.0, 0.5],
                        base_lengths=[20] * 10, best_lengths=[6] * 8 + [0, 1])
    assert h["repeated"]["count"] == 8 and h["contained"]["count"] == 10 and h["length"]["flag"]
    assert h["correlation"]["flag"] and len(h["flags"]) == 4 and h["repetitive"]["count"] == 0
    spam = ["*This phrase*\n*This phrase*\n*This phrase*\n\n*Bread*", "bread " * 20, "A fine answer about bread."]
    assert hacks_repetitive(spam)["count"] == 2
    clean = hack_indicators(prompts, base, base, best_scores=[0.5 + i / 40 for i in range(10)],
                            base_lengths=[20] * 10, best_lengths=[20] * 10)
    assert clean["flags"] == []
    write_summary(tmp_path, report_rows=_rows([0.5] * 10, [1.0] * 8 + [0.0, 0.5],
                                              texts=[{"base": b, "best": t} for b, t in zip(base, hack)],
                                              prompts=prompts),
                  n_resamples=200)
    md = (tmp_path / "summary.md").read_text()
    assert "Caution, signs of reward hacking" in md.split("\n\n")[1]
    assert "10 of 10 completions are empty or contained in their prompt" in md


# ------------------------------------------------------------------------------------------- charts
def _captured(monkeypatch):
    import rubric_reward.recipes.grpo.plots as plots

    figures = []
    original = plots._save

    def keep(fig, path):
        figures.append(fig)
        return original(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def test_monitor_plot_axes_are_honest(tmp_path, monkeypatch):
    figures = _captured(monkeypatch)
    records = [{"step": 0, "mean": 0.60, "ci_low": 0.5, "ci_high": 0.7, "mean_length_tokens": 55.7},
               {"step": 5, "mean": 0.62, "ci_low": 0.52, "ci_high": 0.72, "mean_length_tokens": 54.0},
               {"step": 10, "mean": None, "mean_length_tokens": 54.5}]
    plot_monitor(tmp_path / "monitor.png", records)
    top, bottom = figures[-1].axes
    assert top.get_ylim() == (0.0, 1.02) and bottom.get_ylim()[0] == 0  # a 55.7 -> 54.0 drop is not steep
    assert "no score at step 10" in top.get_title()
    labels = top.get_legend_handles_labels()[1]
    assert "base model" in labels and "best (step 5)" in labels
    # every checkpoint's interval is drawn: one error bar per scored step
    assert len(top.containers[0].lines[2][0].get_segments()) == 2


def test_empty_ifeval_comparison_chart_says_no_differences(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from rubric_reward.evaluation.ifeval_prompts import load_ifeval
    from rubric_reward.evaluation.ifeval_report import evaluate_system, write_comparison

    saved = []
    original = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (saved.append(self), original(self, *a, **k))[1])
    rows = load_ifeval()[:6]
    same = [(r, "hello world") for r in rows]
    write_comparison(tmp_path, evaluate_system("base", same), evaluate_system("trained", same), n_resamples=100)
    ax = saved[-1].axes[0]
    assert not ax.patches and ax.get_legend() is None
    assert any("no differences" in t.get_text() for t in ax.texts)
    base_sys = evaluate_system("base", same)
    write_summary(tmp_path, report_rows=_rows([0.5], [0.5]), ifeval={"base": base_sys, "trained": base_sys},
                  n_resamples=100)
    md = (tmp_path / "summary.md").read_text()
    types = json.loads((tmp_path / "summary.json").read_text())["ifeval"]["types"]
    assert f"0 moved up, 0 moved down and {types} are unchanged" in md and "non-negatively" not in md
