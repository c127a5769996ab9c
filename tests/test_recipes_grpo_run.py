"""The GRPO recipe (train/grpo.py, rubric_reward.recipes.grpo / monitor) end to end on CPU.

Fast tests: argument parsing (YAML + command line through TRL's TrlParser), the judge/base-URL overrides, the
monitor's bookkeeping. Slow tests run ``train/grpo.py`` as a user does, each in a subprocess:

* the tiny config under ``accelerate launch --cpu`` against the loopback judge, then resumed;
* the offline default (no ``--config``) shortened: SmolLM2 policy, checks as reward, the summary checked;
* two processes (``torchrun --nproc_per_node 2``): the judge limit holds across both, the monitor runs once;
* vLLM colocate generation in the vLLM CPU venv, and its weight sync on every CPU kernel (marker ``vllm``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "grpo" / "tiny_cpu.yaml"
BIN = Path(sys.executable).parent



def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1", ACCELERATE_USE_CPU="1")
    env.update(extra)
    return env


def _run(cmd: list[str], log: Path, timeout: float, *, peak_rss_kib: list[int] | None = None, **env: str) -> str:
    """Run ``cmd`` to ``log``; ``peak_rss_kib`` gets this child's own peak RSS (not every earlier child's)."""
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(**env), stdout=fh, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
    if peak_rss_kib is not None:
        peak_rss_kib.append(usage.ru_maxrss)
    text = log.read_text()
    assert proc.returncode == 0, f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{text[-4000:]}"
    return text


def _judge(response: str, body: dict) -> str:
    """Scripted verdicts that vary with the completion, so rewards spread within a group."""
    return "MET" if len(response.split()) % 2 == 0 else "UNMET"


def _log_history(out: Path) -> list[dict]:
    last = max(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    return json.loads((last / "trainer_state.json").read_text())["log_history"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------ fast


def test_parse_yaml_then_command_line(tmp_path: Path) -> None:
    from rubric_reward.recipes.grpo.launch import parse_args
    from rubric_reward.recipes.grpo import reward_config

    recipe, training, model = parse_args([
        "--config", str(TINY), "--model_name_or_path", "m", "--max_steps", "7", "--judge_base_url",
        "http://127.0.0.1:9/v1", "--second_judge", '{"model": "other", "max_tokens": 64}', "--ifeval_limit", "3",
        "--output_dir", str(tmp_path)])
    assert training.max_steps == 7 and training.save_steps == 2 and training.num_generations == 4  # CLI > YAML
    assert model.use_peft and model.lora_r == 8 and model.model_name_or_path == "m"
    assert recipe.data == {"selection": 2, "report": 2, "train": "rest", "seed": 0}
    assert recipe.second_judge == {"model": "other", "max_tokens": 64} and recipe.ifeval_limit == 3
    config = reward_config(recipe)
    # the command line's base URL reaches the judge mapping of the YAML file (which names none)
    assert config.base_url == "http://127.0.0.1:9/v1" and config.judge["model"] == "scripted"
    assert [j.base_url for j in config.judge_configs()] == ["http://127.0.0.1:9/v1"]
    assert config.guards.degenerate is False and config.reward == "score"


def test_no_config_means_offline_default() -> None:
    from rubric_reward.recipes.grpo.launch import parse_args

    recipe, training, model = parse_args(["--max_steps", "1"])
    assert model.model_name_or_path == "smollm2-135m-instruct" and recipe.dataset_name == "offline-instructions"
    assert recipe.judge is None and training.max_steps == 1 and recipe.reward_config["reward"] == "score"
    assert "punctuation:no_comma" in recipe.ifeval_types and training.num_generations == 8
    assert model.dtype == "auto"


@pytest.mark.parametrize(("asked", "kernels", "use_cpu", "expected"), [
    ("auto", True, True, "bfloat16"), ("auto", False, True, "float32"), ("float32", True, True, "float32"),
    ("bfloat16", False, True, "bfloat16"), (None, True, True, None)])
def test_policy_dtype_auto_follows_the_cpu_kernels(monkeypatch: pytest.MonkeyPatch, asked: str | None,
                                                   kernels: bool, use_cpu: bool, expected: str | None) -> None:
    """``dtype: auto`` is resolved by the local judge's rule (bfloat16 only where oneDNN has the kernels); the
    resolved name is what the model loads with and what the summary records."""
    from types import SimpleNamespace

    import torch

    from rubric_reward.recipes.grpo.run import resolve_policy_dtype

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: kernels, raising=False)
    model = SimpleNamespace(dtype=asked)
    assert resolve_policy_dtype(model, SimpleNamespace(use_cpu=use_cpu)) == expected and model.dtype == expected


def test_bad_recipe_values_are_named() -> None:
    from rubric_reward.recipes.grpo import RecipeArguments

    with pytest.raises(ValueError, match="generation_backend"):
        RecipeArguments(generation_backend="tgi")
    with pytest.raises(ValueError, match="could not parse"):
        RecipeArguments(judge="{model: [")
    with pytest.raises(ValueError, match="eval_dtype must be one of auto, float32, bfloat16, float16, got 'bf16'"):
        RecipeArguments(eval_dtype="bf16")


@pytest.mark.parametrize(("asked", "kernels", "loaded"), [
    (None, True, "float32"), ("auto", True, "bfloat16"), ("auto", False, "float32"), ("float32", True, "float32")])
def test_eval_dtype_reaches_the_generation_weights(monkeypatch: pytest.MonkeyPatch, asked: str | None,
                                                    kernels: bool, loaded: str) -> None:
    """The monitor's and report's ``generation_kwargs`` carry ``eval_dtype``; the transformers backend loads the
    weights at the dtype the local judge's rule resolves it to (None: float32 on a CPU, as before)."""
    import torch
    from transformers import AutoModelForCausalLM

    from rubric_reward.evaluation import rollouts
    from rubric_reward.recipes.grpo import RecipeArguments
    from rubric_reward.recipes.grpo.builders import generation_kwargs

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: kernels, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    seen: list[torch.dtype] = []

    def fake_load(path: str, dtype: torch.dtype) -> object:
        seen.append(dtype)
        raise OSError("stop after the dtype is chosen")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", fake_load)
    kwargs = generation_kwargs(RecipeArguments(**({} if asked is None else {"eval_dtype": asked})))
    assert kwargs["dtype"] == (asked or "auto")
    with pytest.raises(RuntimeError, match="could not load model"):
        rollouts._load_transformers("some/model", None, False, asked)
    assert seen == [getattr(torch, loaded)]


def test_step_line_is_short_and_skips_monitor_records() -> None:
    from rubric_reward.recipes.grpo.console import step_line

    logs = {"loss": 0.01, "reward": 0.4123, "reward_std": 0.18, "frac_reward_zero_std": 0.25,
            "rubric/judge_calls": 48.0, "rubric/unscored_frac": 0.0625, "step_time": 12.34, "entropy": 6.5}
    assert step_line(logs, 3, 30) == ("[grpo] step 3/30: reward 0.412, spread 0.180, flat groups 25%, judge 48 "
                                      "calls, unscored 6%, 12.3 s")
    assert step_line({"monitor/mean": 0.5}, 2, 30) is None
    # per-criterion or shaping rewards: TRL's reward is not the rubric's score, so the line shows both
    assert step_line({"reward": 2.3, "rubric/reward_mean": 0.61}, 1, 2) == "[grpo] step 1/2: reward 2.300, rubric 0.610"
    assert step_line({"reward": 0.61, "rubric/reward_mean": 0.61}, 1, 2) == "[grpo] step 1/2: reward 0.610"
    assert step_line({"train_runtime": 81.5, "train_loss": 0.1}, 30, 30) == "[grpo] trained 30 steps in 81.5 s"
    assert step_line({"loss": 0.0, "reward": float("nan")}, 1, 2) == "[grpo] step 1/2: reward n/a"


def test_monitor_records_best_and_resume_truncation(tmp_path: Path) -> None:
    from rubric_reward.recipes.grpo.monitor import best_record, read_records

    path = tmp_path / "monitor.jsonl"
    lines = [{"step": 0, "mean": 0.5}, {"step": 2, "mean": 0.7}, {"step": 4, "mean": 0.7}, {"step": 2, "mean": 0.6}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"step": 6, "me')  # torn last line
    records = read_records(path)
    assert [r["step"] for r in records] == [0, 2, 4] and records[1]["mean"] == 0.6  # one per step, last wins
    assert best_record(records)["step"] == 4
    assert best_record([{"step": 0, "mean": 0.9}]) is None  # the base model is never "best"
    assert best_record([{"step": 3, "mean": 0.7}, {"step": 1, "mean": 0.7}])["step"] == 1  # earlier wins a tie


def test_best_record_passes_over_flagged_checkpoints() -> None:
    from rubric_reward.recipes.grpo.comparison import best_record, passed_over, selection_table

    flagged = ["repetition: 12% of completions repeat themselves (base 5%)"]
    records = [{"step": 0, "mean": 0.59}, {"step": 10, "mean": 0.64, "watch": []},
               {"step": 15, "mean": 0.64, "watch": flagged}, {"step": 20, "mean": 0.69, "watch": flagged}]
    assert best_record(records)["step"] == 10  # the higher means were flagged by the watch
    assert selection_table(records)["best_step"] == 10  # the summary's table says the same
    assert passed_over(records) == [20]  # step 15 ties step 10, and the earlier step wins a tie
    every = [{"step": 0, "mean": 0.5}, {"step": 5, "mean": 0.6, "watch": flagged},
             {"step": 10, "mean": 0.7, "watch": flagged}]
    assert best_record(every)["step"] == 10  # all flagged: the best of them, not none


# ------------------------------------------------------------------------------------------ slow


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_tiny_end_to_end_then_resume(tmp_path: Path, tiny_model: Path, judge_server) -> None:
    from rubric_reward.recipes.grpo.monitor import best_record, read_records

    server = judge_server({}, default=_judge)
    out = tmp_path / "run"
    cmd = [str(BIN / "accelerate"), "launch", "--config_file", str(REPO / "configs" / "accelerate" / "one_process.yaml"),
           "--quiet", "train/grpo.py", "--config", str(TINY),
           "--model_name_or_path", str(tiny_model), "--judge_base_url", server.base_url, "--output_dir", str(out),
           "--shaping_rewards", '{"repetition_penalty": {"max_penalty": -0.5}}']
    log = _run(cmd, tmp_path / "first.log", 300)

    # the console: one short line per step, no library warnings, no metrics dicts; the full metrics in the log file
    assert "[grpo] step 1/4: reward " in log and "[grpo] trained 4 steps" in log
    for noise in ("FutureWarning", "pin_memory", "{'loss'", "Loading weights", "were not passed to `accelerate"):
        assert noise not in log, noise
    logged = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert sum("rewards/rubric/mean" in r and "rubric/judge_calls" in r for r in logged) == 4
    # a shaping term reaches the trainer beside the rubric (training only: the monitor scores the rubric)
    shaped = [r["rewards/repetition_penalty_reward/mean"] for r in logged if "rewards/repetition_penalty_reward/mean" in r]
    assert len(shaped) == 4 and all(-0.5 <= x <= 0 for x in shaped)

    # rewards reached the trainer; the reward's own metrics and TRL's zero-spread fraction are in the logs
    steps = [h for h in _log_history(out) if "rewards/rubric/mean" in h]
    assert len(steps) == 4 and all(math.isfinite(h["rewards/rubric/mean"]) for h in steps)
    assert all("rubric/unscored_frac" in h and "frac_reward_zero_std" in h for h in steps)
    assert server.requests > 0
    # checkpoints, and one monitor record per monitored step (0 = base), each from its reloaded adapter
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    records = read_records(out / "monitor.jsonl")
    assert [r["step"] for r in records] == [0, 2, 4]
    assert len((out / "monitor.jsonl").read_text().splitlines()) == 3
    for r in records:
        assert r["n"] == 2 and r["judge_calls"] > 0 and r["mean"] is not None and r["ci_low"] <= r["mean"]
        assert (out / r["completions"]).is_file()
    assert [r["adapter_sha256"] for r in records[1:]] == [
        _sha(out / f"checkpoint-{s}" / "adapter_model.safetensors") for s in (2, 4)]
    # through the trainer's loggers, once a record is scored (beside training: after its save, so maybe after
    # the last checkpoint's trainer_state)
    logged_steps = [r["monitor/step"] for r in map(json.loads, (out / "train_log.jsonl").read_text().splitlines())
                    if "monitor/mean" in r]
    assert sorted(logged_steps) == [0, 2, 4]
    from rubric_reward.util.threads import available_cpus

    if available_cpus() > 1:  # auto: a CPU the 1-thread run leaves idle
        assert "side process" in log and "generated beside training" in log
    # best/ holds the adapter of the best selection mean
    best = json.loads((out / "best" / "best.json").read_text())
    assert best["step"] == best_record(records)["step"]
    assert _sha(out / "best" / "adapter_model.safetensors") == \
        _sha(out / f"checkpoint-{best['step']}" / "adapter_model.safetensors")
    assert (out / "monitor.png").stat().st_size > 0
    # the report split is disjoint from the selection and train splits
    manifest = json.loads((out / "splits.json").read_text())
    ids = {s: set(manifest[f"{s}_ids"]) for s in ("train", "selection", "report")}
    assert ids["report"] and ids["selection"] and ids["train"]
    assert not (ids["report"] & ids["selection"]) and not (ids["report"] & ids["train"])
    assert not (ids["selection"] & ids["train"])
    # the summary has every section, and the path is printed
    summary = (out / "summary.md").read_text()
    for section in ("Report split", "Selection split", "IFEval"):
        assert section in summary
    data = json.loads((out / "summary.json").read_text())
    assert data and f"[grpo] files in {out.resolve()}: summary.md" in log  # the console ends with the result
    assert f"[grpo] result: {data['headline']}" in log

    # a rerun with resume_from_checkpoint continues from step 4 and adds one record per new step
    resumed = _run(cmd + ["--max_steps", "6", "--resume_from_checkpoint", str(out / "checkpoint-4")],
                   tmp_path / "resume.log", 300)
    assert (out / "checkpoint-6").is_dir()
    assert [r["step"] for r in read_records(out / "monitor.jsonl")] == [0, 2, 4, 6]
    assert len((out / "monitor.jsonl").read_text().splitlines()) == 4
    assert "base model: generating" not in resumed  # step 0 was already recorded
    assert max(h["step"] for h in _log_history(out)) == 6


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_offline_default_shortened(tmp_path: Path) -> None:
    """No --config: the offline default (SmolLM2 policy, offline-instructions, checks), shortened; the summary's
    headline, counts and hacking indicators agree with report_completions.jsonl, IFEval holds trained types."""
    from fractions import Fraction

    from rubric_reward.recipes.grpo.hacks import contained_in_prompt
    from rubric_reward.recipes.grpo.summary import read_report_rows

    out = tmp_path / "run"
    cmd = [sys.executable, "train/grpo.py", "--output_dir", str(out), "--max_steps", "2", "--save_steps", "2",
           "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1", "--num_generations", "4",
           "--max_completion_length", "24", "--eval_max_new_tokens", "24", "--ifeval_limit", "2",
           "--data", '{"selection": 5, "report": 10, "train": 10}', "--bootstrap_resamples", "200",
           "--disable_tqdm", "true"]
    peak: list[int] = []
    log = _run(cmd, tmp_path / "offline.log", 840, peak_rss_kib=peak, OMP_NUM_THREADS="2")
    steps = [h for h in _log_history(out) if "rewards/rubric/mean" in h]
    assert len(steps) == 2 and all("frac_reward_zero_std" in h for h in steps)
    records = [json.loads(x) for x in (out / "monitor.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 2] and all(r["metric"] == "score" for r in records)
    assert "[grpo] result: GRPO trained" in log and f"[grpo] files in {out.resolve()}" in log
    assert peak[0] < 6 * 1024 * 1024  # KiB: under 6 GB

    # the summary's numbers, recomputed from the report rows
    rows = read_report_rows(out / "report_completions.jsonl")
    assert len(rows) == 10 and len({r["benchmark"] for r in rows}) == 5  # stratified by instruction type
    diffs = []
    for r in rows:
        s = r["scores"]["judge"]
        same = r["completions"]["base"] == r["completions"]["best"]
        diffs.append(Fraction(0) if same else Fraction(s["best"]).limit_denominator(4)
                     - Fraction(s["base"]).limit_denominator(4))
    summary = json.loads((out / "summary.json").read_text())
    judge = summary["report"]["judge"]
    assert (judge["improved"], judge["worse"], judge["tied"]) == (sum(d > 0 for d in diffs), sum(d < 0 for d in diffs),
                                                                  sum(d == 0 for d in diffs))
    md = (out / "summary.md").read_text()
    assert md.split("\n\n")[1] == summary["headline"] and summary["headline"].startswith("GRPO trained")
    assert f"{judge['improved']} better, {judge['worse']} worse, {judge['tied']} tied" in summary["headline"]
    assert "Wilcoxon signed-rank" in md and "Does the gain look like reward hacking?" in md
    contained = contained_in_prompt([r["prompt"] for r in rows], [r["completions"]["best"] for r in rows])
    assert summary["hacking"]["contained"]["count"] == contained["count"]
    # IFEval transfer on prompts that carry a trained instruction type
    wanted = set(summary["ifeval"]["types_wanted"])
    ifeval_rows = [json.loads(x) for x in (out / "ifeval" / "base" / "eval_results_strict.jsonl").read_text().splitlines()]
    assert len(ifeval_rows) == 2 and all(wanted & set(r["instruction_id_list"]) for r in ifeval_rows)
    from rubric_reward.judges.transformers_backend import resolve_dtype

    assert summary["environment"]["dtype"] == resolve_dtype("auto", "cpu")  # dtype: auto, resolved


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_two_processes_share_the_judge_limit_and_monitor_once(tmp_path: Path, tiny_model: Path,
                                                               judge_server) -> None:
    server = judge_server({}, default=_judge, latency_s=0.05)
    out = tmp_path / "run"
    judge = json.dumps({"model": "scripted", "max_concurrency": 2, "limit_scope": "world", "max_retries": 1})
    cmd = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2", "train/grpo.py",
           "--config", str(TINY), "--model_name_or_path", str(tiny_model), "--judge", judge,
           "--judge_base_url", server.base_url, "--output_dir", str(out), "--max_steps", "2",
           "--per_device_train_batch_size", "2", "--final_report", "false"]
    log = _run(cmd, tmp_path / "ddp.log", 300)
    assert server.requests > 0 and server.max_in_flight <= 2  # 2 in all: each rank takes 2 / WORLD_SIZE
    lines = (out / "monitor.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [0, 2]  # one record per save, not one per rank
    assert log.count("[monitor] base model: generating") == 1
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]


@pytest.fixture(scope="module")
def vllm_python() -> str:
    """The vLLM CPU venv's Python, with trl and peft (skipped without the venv unless CI requires it)."""
    from rubric_reward.testing.vllm_server import VLLMUnavailable, find_vllm_python

    try:
        python = find_vllm_python()
    except VLLMUnavailable as exc:
        if os.environ.get("RUBRIC_REWARD_REQUIRE_VLLM") == "1":
            raise
        pytest.skip(f"vLLM venv not available: {exc}")
    probe = subprocess.run([python, "-c", "import trl, peft"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.fail(f"the vLLM venv has no trl/peft (rerun scripts/setup_vllm_cpu.sh): {probe.stderr[-300:]}")
    return python


VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "0-1", "VLLM_NO_USAGE_STATS": "1",
            "VLLM_CPU_CI_ENV": "1"}


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.timeout(600)
def test_vllm_colocate_generation(tmp_path: Path, judge_server, vllm_python: str) -> None:
    from rubric_reward.testing.tiny_model import build_tiny_qwen3

    tiny_model = build_tiny_qwen3(tmp_path / "qwen3", hidden_size=128, heads=2)  # vLLM's CPU attention: head_dim 64
    server = judge_server({}, default=_judge)
    out = tmp_path / "run"
    cmd = [vllm_python, "train/grpo.py", "--config", str(TINY), "--model_name_or_path", str(tiny_model),
           "--judge_base_url", server.base_url, "--output_dir", str(out), "--max_steps", "2", "--save_steps", "2",
           "--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_gpu_memory_utilization", "0.2",
           "--vllm_max_model_length", "512", "--monitor", "false", "--final_report", "false"]
    _run(cmd, tmp_path / "vllm.log", 560, **VLLM_ENV, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
         MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
    steps = [h for h in _log_history(out) if "rewards/rubric/mean" in h]
    assert len(steps) == 2 and all(math.isfinite(h["rewards/rubric/mean"]) for h in steps)
    assert server.requests > 0


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("dtype", "kernel"), [("float32", "picked"), ("float32", "torch"), ("bfloat16", "picked")])
def test_vllm_colocate_sync_reaches_the_kernels(tmp_path: Path, vllm_python: str, dtype: str, kernel: str) -> None:
    """After TRL's colocate sync, vLLM generates what the synced policy generates, whichever CPU GEMM kernel
    vLLM picked on this machine (oneDNN / AMX packing replace the weights TRL writes into) or the fallback."""
    from rubric_reward.testing.tiny_model import build_tiny_qwen3

    tiny_model = build_tiny_qwen3(tmp_path / "qwen3", hidden_size=128, heads=2)
    proc = subprocess.run([vllm_python, str(REPO / "tests" / "helpers" / "vllm_colocate_sync.py"), str(tiny_model),
                           dtype, kernel], cwd=REPO, env=_env(**VLLM_ENV), capture_output=True, text=True,
                          timeout=280)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, f"no result ({proc.returncode}):\n{proc.stderr[-3000:]}"
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert "error" not in result, result["error"]
    assert result["wrapped"] and result["after"] == result["expected"] != result["before"]
