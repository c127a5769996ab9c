"""Seed sweeps and what the summary says about regressions, drivers and the run's conditions (issue 27).

Fast: the pooling over seeds (t-interval over seed means), the regression clause of the headline, the
per-criterion table (McNemar exact, Holm), per-criterion outcomes of reward records, the run environment, and
the sweep script's command line, all on synthetic rows. Slow: ``benchmarks/main_job_seeds.py`` on a shortened
offline default for two seeds, its pooled numbers recomputed from each seed's ``report_completions.jsonl``.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from rubric_reward.recipes.grpo.comparison import pool_seeds
from rubric_reward.recipes.grpo.seeds import seed_result, write_seeds_summary
from rubric_reward.recipes.grpo.summary import criterion_table, read_report_rows, report_row, write_summary
from rubric_reward.stats import holm_adjust

REPO = Path(__file__).resolve().parents[1]
TYPES = ["bullets", "highlights", "no_comma", "placeholders", "fewer_words"]

pytestmark = pytest.mark.timeout(180)


def _sweep_module():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("main_job_seeds", REPO / "benchmarks" / "main_job_seeds.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def _rows(base, best, *, benchmarks=None, texts=None, criteria=None):
    out = []
    for i, (b, t) in enumerate(zip(base, best)):
        row = {"id": f"r{i}", "prompt": [{"role": "user", "content": f"prompt {i}"}],
               "benchmark": benchmarks[i] if benchmarks else "all"}
        completions = texts[i] if texts else {"base": f"base answer {i}", "best": f"trained answer {i}"}
        out.append(report_row(row, completions, {"base": 20, "best": 20}, {"judge": {"base": b, "best": t}},
                              None, {"judge": criteria[i]} if criteria else None))
    return out


def _by_hand(rows) -> Fraction:
    """The mean paired difference (best - base) in exact arithmetic, identical completions tied."""
    diffs = []
    for r in rows:
        s = r["scores"]["judge"]
        if s["base"] is None or s["best"] is None:
            continue
        same = r["completions"]["base"] == r["completions"]["best"]
        diffs.append(Fraction(0) if same else Fraction(s["best"]).limit_denominator(8)
                     - Fraction(s["base"]).limit_denominator(8))
    return sum(diffs, Fraction(0)) / len(diffs)


def _t_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float, float]:
    from scipy import stats as sps

    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    low, high = sps.t.interval(confidence, n - 1, loc=mean, scale=sd / math.sqrt(n))
    return mean, low, high


# ------------------------------------------------------------------------------------------- pooling
def test_pool_seeds_is_a_t_interval_over_seed_means():
    from scipy import stats as sps

    estimates = [0.141, 0.05, 0.112, -0.02, 0.09]
    pooled = pool_seeds(estimates, confidence=0.95)
    mean, low, high = _t_interval(estimates)
    assert pooled["n"] == 5 and pooled["mean"] == pytest.approx(mean)
    assert (pooled["ci"]["low"], pooled["ci"]["high"]) == (pytest.approx(low), pytest.approx(high))
    assert pooled["pvalue"] == pytest.approx(sps.ttest_1samp(estimates, 0.0).pvalue)
    assert pooled["min"] == -0.02 and pooled["max"] == 0.141
    one = pool_seeds([0.1, None])  # a seed without an estimate is left out; one seed: no interval
    assert one["n"] == 1 and one["mean"] == 0.1 and one["ci"]["low"] is None and one["pvalue"] is None
    flat = pool_seeds([0.0, 0.0, 0.0])
    assert flat["ci"]["low"] == flat["ci"]["high"] == 0.0 and flat["pvalue"] is None
    assert pool_seeds([])["mean"] is None


def _seed_run(root: Path, seed: int, shift: int, n: int = 40) -> Path:
    """A seed's run folder as the recipe leaves it: report_completions.jsonl + summary.json."""
    rng = random.Random(seed)
    base = [rng.randint(0, 8) / 8 for _ in range(n)]
    best = [min(1.0, max(0.0, b + rng.choice([0, 0, 1, 2, -1]) * shift / 8)) for b in base]
    texts = [{"base": f"a{i}", "best": f"a{i}" if i % 7 == 0 else f"b{i}-{seed}"} for i in range(n)]
    rows = _rows(base, best, texts=texts, benchmarks=[TYPES[i % 5] for i in range(n)])
    out = root / f"seed_{seed}"
    write_summary(out, report_rows=rows, n_resamples=300, seed=seed,
                  meta={"model": "m", "environment": {"seed": seed, "torch_threads": 1, "dtype": "float32"}})
    (out / "report_completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_seed_sweep_pooled_numbers_come_from_the_report_rows(tmp_path):
    from scipy import stats as sps

    runs = [_seed_run(tmp_path, seed, shift) for seed, shift in ((0, 1), (1, 2), (2, 0), (3, 1))]
    results = []
    for i, run in enumerate(runs):
        r = seed_result(run)
        r.update(wall_s=100.0 + i, peak_rss_kib=2_000_000 + i, peak_tree_rss_kib=None if i else 3_000_000)
        results.append(r)
    # the summary text is not read: a tampered summary headline changes nothing
    summary = json.loads((runs[0] / "summary.json").read_text())
    (runs[0] / "summary.json").write_text(json.dumps({**summary, "headline": "x", "report": {}}))
    assert seed_result(runs[0])["difference"] == results[0]["difference"]
    path = write_seeds_summary(tmp_path, results, command="train/grpo.py --seed S")
    data = json.loads((tmp_path / "seeds_summary.json").read_text())

    means, significant = [], 0
    for run, r in zip(runs, data["seeds"]):
        rows = read_report_rows(run / "report_completions.jsonl")
        exact = _by_hand(rows)
        means.append(float(exact))
        assert r["difference"]["estimate"] == pytest.approx(float(exact), abs=1e-12)
        diffs = [float(8 * (Fraction(x["scores"]["judge"]["best"]).limit_denominator(8)
                            - Fraction(x["scores"]["judge"]["base"]).limit_denominator(8)))
                 if x["completions"]["base"] != x["completions"]["best"] else 0.0 for x in rows]
        p = 1.0 if not any(diffs) else sps.wilcoxon(diffs).pvalue
        assert r["pvalue"] == pytest.approx(p, rel=1e-9)
        significant += p < 0.01 and r["difference"]["low"] > 0
        assert (r["improved"], r["worse"]) == (sum(d > 0 for d in diffs), sum(d < 0 for d in diffs))
    mean, low, high = _t_interval(means)
    pooled = data["pooled"]
    assert pooled["mean"] == pytest.approx(mean, abs=1e-12)
    assert (pooled["ci"]["low"], pooled["ci"]["high"]) == (pytest.approx(low), pytest.approx(high))
    assert pooled["significant"] == significant and pooled["same_report_prompts"]
    assert pooled["seeds"] == [0, 1, 2, 3] and pooled["by_type"].keys() == set(TYPES)
    md = path.read_text()
    assert md.startswith("# Seed sweep: summary")
    assert f"is {mean:+.3f} (95% t-interval over seed means [{low:+.3f}, {high:+.3f}]" in md
    assert f"{significant} of 4 seeds are significant on their own" in md
    assert "| pooled |" in md and "1 min 40 s" in md and "nan" not in md.lower()
    rss = [line.split(" | ")[-2] for line in md.splitlines() if line.startswith(("| 0 |", "| 1 |", "| pooled |"))]
    assert rss == ["2.86 GB", "1.91 GB (largest)", "2.86 GB"]  # all processes summed where sampled


def test_a_seed_row_and_its_summary_agree(tmp_path):
    """One decision, two paths: the seed table's row (seeds.py) and the run's summary.json (summary.py) give the
    same difference, per-type differences, regressions and hacking flags for the same report rows."""
    run = _seed_run(tmp_path, 3, -2)
    summary = json.loads((run / "summary.json").read_text())
    row = seed_result(run)
    judge = summary["report"]["judge"]
    assert row["difference"] == judge["difference"] and row["pvalue"] == judge["wilcoxon"]["pvalue"]
    assert row["by_type"] == {s["benchmark"]: s["difference"]["estimate"] for s in summary["report_by_type"]}
    assert row["regressions"] == [s["benchmark"] for s in summary["regressions"]["types"]] + [
        f"criterion {c['criterion']}" for c in summary["regressions"]["criteria"]]
    assert row["hacking_flags"] == summary["hacking"]["flags"]
    assert row["settings"] == {k: summary["settings"][k] for k in ("bootstrap_resamples", "confidence", "seed")}


def test_the_sweep_samples_the_memory_of_every_process_of_a_run() -> None:
    sweep = _sweep_module()
    code = "import subprocess, sys, time; x = bytearray(300 << 20); " \
           "subprocess.run([sys.executable, '-c', 'import time; y = bytearray(200 << 20); time.sleep(3)'])"
    proc = subprocess.Popen([sys.executable, "-c", code])
    sampler = sweep.TreePeak(proc.pid, every_s=0.2)
    proc.wait()
    assert sampler.stop() > (450 << 10)  # KiB: both processes' buffers, more than either alone
    assert sweep.tree_rss_kib(proc.pid) == 0  # gone


# ------------------------------------------------------------------------------------------- regressions
def test_headline_names_a_type_that_got_significantly_worse(tmp_path):
    # four types improve, bullets falls on every one of its 12 prompts
    types = [TYPES[i % 5] for i in range(60)]
    base = [0.5] * 60
    best = [0.25 if t == "bullets" else 0.75 for t in types]
    write_summary(tmp_path, report_rows=_rows(base, best, benchmarks=types), n_resamples=200)
    data = json.loads((tmp_path / "summary.json").read_text())
    bullets = next(s for s in data["report_by_type"] if s["benchmark"] == "bullets")
    nominal = [s["pvalue"] for s in data["report_by_type"]]
    assert [s["pvalue_holm"] for s in data["report_by_type"]] == holm_adjust(nominal)
    assert bullets["pvalue_holm"] < 0.05 and [s["benchmark"] for s in data["regressions"]["types"]] == ["bullets"]
    first = (tmp_path / "summary.md").read_text().split("\n\n")[1]
    assert first == data["headline"]
    assert "48 better, 12 worse, 0 tied), but bullets got worse: -0.250 [-0.250, -0.250] (Holm p " in first
    assert "| p (Holm) |" in (tmp_path / "summary.md").read_text()
    # nothing worse: no clause
    write_summary(tmp_path, report_rows=_rows(base, [0.75] * 60, benchmarks=types), n_resamples=200)
    assert "got worse" not in json.loads((tmp_path / "summary.json").read_text())["headline"]


def _criteria(n: int, seed: int = 3) -> tuple[list[dict], list[float], list[float]]:
    """Per prompt: a check that best learns, a judged criterion best loses, a penalty that never fires."""
    rng = random.Random(seed)
    rows, base, best = [], [], []
    for i in range(n):
        fmt = {"base": rng.random() < 0.3, "best": rng.random() < 0.9}
        clear = {"base": True, "best": i % 5 == 0}
        rows.append({"format": {"kind": "check", **fmt}, "clarity": {"kind": "judged", **clear},
                     "copies": {"kind": "check", "base": True, "best": True}})
        base.append((2 * fmt["base"] + clear["base"]) / 3)
        best.append((2 * fmt["best"] + clear["best"]) / 3)
    return rows, base, best


def test_criterion_table_mcnemar_holm_and_the_tie_rule(tmp_path):
    from scipy import stats as sps

    crit, base, best = _criteria(30)
    crit[0]["clarity"] = {"kind": "judged", "base": None, "best": False}  # unscored: left out of that criterion
    texts = [{"base": f"a{i}", "best": f"a{i}" if i == 1 else f"b{i}"} for i in range(30)]
    crit[1]["format"] = {"kind": "check", "base": False, "best": True}  # identical completions: tie -> False
    rows = _rows(base, best, texts=texts, criteria=crit)
    table = {c["criterion"]: c for c in criterion_table(rows, "judge")}
    assert list(table) == ["format", "clarity", "copies"] and table["clarity"]["kind"] == "judged"
    for name, c in table.items():
        pairs = [(r["criteria"]["judge"][name]["base"], r["criteria"]["judge"][name]["best"], r) for r in rows
                 if r["criteria"]["judge"][name]["base"] is not None]
        base_pass = [bool(x) for x, _, _ in pairs]
        best_pass = [bool(x) if r["completions"]["base"] == r["completions"]["best"] else bool(y)
                     for x, y, r in pairs]
        b = sum(x and not y for x, y in zip(base_pass, best_pass))
        cc = sum(y and not x for x, y in zip(base_pass, best_pass))
        assert (c["n"], c["base_passed"], c["best_passed"], c["b"], c["c"]) == \
            (len(pairs), sum(base_pass), sum(best_pass), b, cc)
        assert c["pvalue"] == pytest.approx(1.0 if b + cc == 0 else sps.binomtest(b, b + cc, 0.5).pvalue)
    assert [c["pvalue_holm"] for c in table.values()] == holm_adjust([c["pvalue"] for c in table.values()])
    assert table["clarity"]["n"] == 29
    assert criterion_table(_rows([0.5], [0.5]), "judge") == []  # rows without verdicts: no table


def test_summary_names_driving_criteria_and_a_judged_regression(tmp_path):
    crit, base, best = _criteria(40)
    write_summary(tmp_path, report_rows=_rows(base, best, criteria=crit), n_resamples=200)
    data = json.loads((tmp_path / "summary.json").read_text())
    table = {c["criterion"]: c for c in data["report_by_criterion"]}
    assert table["clarity"]["best_passed"] == 8 and table["clarity"]["pvalue_holm"] < 0.05
    assert [c["criterion"] for c in data["regressions"]["criteria"]] == ["clarity"]
    assert "but criterion clarity got worse: passed 40/40 -> 8/40 (McNemar, Holm p " in data["headline"]
    md = (tmp_path / "summary.md").read_text()
    assert "### Per criterion (report split)" in md and "| clarity | judged | 40 | 40/40 (100%) | 8/40 (20%) |" in md
    up = "up" if table["format"]["pvalue_holm"] < 0.05 else None
    assert "clarity down (40 -> 8 of 40)" in md and (up is None or "format up" in md)


def test_criterion_outcomes_of_reward_records():
    from rubric_reward.results import ErrorKind, JudgeError, ScoreResult, Verdict
    from rubric_reward.rewards.records import RewardRecord
    from rubric_reward.rubric import load_rubric
    from rubric_reward.recipes.grpo.report_stage import criterion_outcomes

    rubric = load_rubric({"name": "r", "criteria": [
        {"name": "clear", "requirement": "It is clear."},
        {"name": "short", "check": "ifeval:length_constraints:number_words",
         "kwargs": {"relation": "less than", "num_words": 40}},
        {"name": "copies", "check": "ifeval:keywords:existence", "weight": -4, "kwargs": {"keywords": ["x"]}}]})
    verdicts = (Verdict("clear", "UNMET", 0.0), Verdict("short", "MET", 1.0), Verdict("copies", "UNMET", 0.0))
    record = RewardRecord(0.2, ScoreResult(0.2, verdicts), rubric=rubric)
    assert criterion_outcomes(record) == {"clear": {"kind": "judged", "passed": False},
                                          "short": {"kind": "check", "passed": True},
                                          "copies": {"kind": "check", "passed": True}}  # penalty absent
    failed = (Verdict("clear", None, None, error=JudgeError(ErrorKind.TIMEOUT, "slow")),) + verdicts[1:]
    unscored = RewardRecord(None, ScoreResult(None, failed), rubric=rubric)
    assert {v["passed"] for v in criterion_outcomes(unscored).values()} == {None}
    assert criterion_outcomes(RewardRecord(None, None, error="data: bad row")) == {}


# ------------------------------------------------------------------------------------------- environment
def test_run_environment_is_recorded_in_the_first_lines(tmp_path):
    from importlib import metadata

    import torch

    from rubric_reward.judges.transformers_backend import resolve_dtype
    from rubric_reward.recipes.grpo.report_stage import run_environment
    from rubric_reward.recipes.grpo.summary import environment_line

    env = run_environment(seed=3, dtype=None, bf16=False)
    assert env["seed"] == 3 and env["torch_threads"] == torch.get_num_threads() and env["dtype"] == "float32"
    assert env["bf16_kernels_available"] == (resolve_dtype("auto", env["device"]) == "bfloat16")
    assert env["bf16_kernels_used"] is False and env["eval_dtype"] is None
    evaluated = run_environment(seed=3, dtype="float32", eval_dtype="auto")
    assert evaluated["eval_dtype"] == resolve_dtype("auto", env["device"])
    assert evaluated["bf16_kernels_used"] == (evaluated["eval_dtype"] == "bfloat16")
    assert "evaluation " + evaluated["eval_dtype"] in environment_line(evaluated)
    assert env["versions"] == {k: metadata.version(k) for k in ("torch", "transformers", "trl", "peft")}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file() and "model name" in cpuinfo.read_text():
        assert env["cpu"] and env["cpu"] in cpuinfo.read_text()
    write_summary(tmp_path, report_rows=_rows([0.5, 0.25], [0.75, 0.25]), n_resamples=100,
                  meta={"model": "m", "environment": env})
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["environment"] == env
    third = (tmp_path / "summary.md").read_text().split("\n\n")[2]
    assert third.startswith(f"Run: seed 3; torch threads {env['torch_threads']}; dtype float32 (bfloat16 kernels "
                            "not used")
    assert f"torch {env['versions']['torch']}, transformers {env['versions']['transformers']}" in third
    assert f"trl {env['versions']['trl']}, peft {env['versions']['peft']}" in third


# ------------------------------------------------------------------------------------------- the command
def test_sweep_command_line(tmp_path):
    sweep = _sweep_module()
    args, extra = sweep.parse_args(["--seeds", "0", "1", "--max_steps", "3", "--config", "c.yaml",
                                    "--ifeval", "false"])
    assert args.seeds == [0, 1] and extra == ["--ifeval", "false"]
    cmd = sweep.recipe_command(args, extra, 1, tmp_path / "seed_1")
    assert cmd[1:3] == ["launch", "--config_file"] and cmd[5:] == [
        "train/grpo.py", "--config", "c.yaml", "--seed", "1", "--output_dir", str(tmp_path / "seed_1"),
        "--max_steps", "3", "--ifeval", "false"]
    with pytest.raises(SystemExit):
        sweep.parse_args(["--seeds", "0", "--output_dir", "x"])


def test_sweep_does_not_rerun_a_finished_seed(tmp_path, capsys):
    sweep = _sweep_module()
    for seed, shift in ((0, 1), (1, 2)):
        run = _seed_run(tmp_path, seed, shift)
        (run / "sweep.json").write_text(json.dumps({"seed": seed, "wall_s": 61.0, "peak_rss_kib": 1048576}))
    # the launcher would fail: nothing may be launched for finished seeds
    assert sweep.main(["--seeds", "0", "1", "--root", str(tmp_path), "--launcher", "python",
                       "--no_such_recipe_flag", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("not rerun") == 2 and "| pooled |" in out
    data = json.loads((tmp_path / "seeds_summary.json").read_text())
    assert [r["wall_s"] for r in data["seeds"]] == [61.0, 61.0]


# ------------------------------------------------------------------------------------------- slow
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_seed_sweep_of_the_shortened_offline_default(tmp_path):
    """Two seeds of the offline default, shortened (1 step of 2 x 2 completions, 10 report prompts, no monitor,
    no IFEval); seeds_summary's pooled numbers recomputed from each seed's report_completions.jsonl."""
    root = tmp_path / "sweep"
    cmd = [sys.executable, "benchmarks/main_job_seeds.py", "--seeds", "0", "1", "--root", str(root),
           "--launcher", "python", "--max_steps", "1", "--save_steps", "1", "--per_device_train_batch_size", "2",
           "--gradient_accumulation_steps", "1", "--num_generations", "2", "--max_completion_length", "16",
           "--eval_max_new_tokens", "16", "--monitor", "false", "--ifeval", "false",
           "--data", '{"selection": 5, "report": 10, "train": 4}', "--bootstrap_resamples", "200",
           "--disable_tqdm", "true"]
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="2")
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=570)
    wall = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((root / "seeds_summary.json").read_text())
    assert [r["seed"] for r in data["seeds"]] == [0, 1]
    means = []
    for seed, r in zip((0, 1), data["seeds"]):
        run = root / f"seed_{seed}"
        rows = read_report_rows(run / "report_completions.jsonl")
        assert len(rows) == 10 and all(row["criteria"]["judge"] for row in rows)  # per-criterion verdicts
        means.append(float(_by_hand(rows)))
        assert r["difference"]["estimate"] == pytest.approx(means[-1], abs=1e-12)
        assert r["peak_rss_kib"] > 100_000 and r["wall_s"] > 0
        summary = json.loads((run / "summary.json").read_text())
        assert summary["environment"]["seed"] == seed and summary["environment"]["torch_threads"] == 2
        assert (run / "summary.md").read_text().split("\n\n")[2].startswith(f"Run: seed {seed}; torch threads 2")
        assert summary["report_by_criterion"]
    pooled = data["pooled"]
    assert pooled["mean"] == pytest.approx(sum(means) / 2, abs=1e-12)
    if means[0] != means[1]:
        mean, low, high = _t_interval(means)
        assert (pooled["ci"]["low"], pooled["ci"]["high"]) == (pytest.approx(low), pytest.approx(high))
    assert pooled["same_report_prompts"]
    assert "| pooled |" in (root / "seeds_summary.md").read_text() and "| pooled |" in proc.stdout
    print(f"shortened 2-seed sweep: {wall:.0f} s")
    # rerun: both seeds are finished, nothing is trained again
    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stdout.count("not rerun") == 2
