"""Seconds per GRPO step of train/grpo.py on CPU: transformers generation vs vLLM colocate (a benchmark).

Each row is one ``train/grpo.py`` run in its own process (monitor, report and IFEval off) judged by the
scripted loopback judge at 0 ms latency, so the step time is the policy's: sampling, the LoRA
forward/backward and TRL's bookkeeping. Rows:

* ``tiny``: configs/grpo/tiny_cpu.yaml (tiny Qwen3 built from a config, 4 completions x 16 tokens);
* ``smollm2``: the offline default's policy (SmolLM2-135M-Instruct, LoRA, 4 completions x 96 tokens);
* ``smollm2-vllm``: the same with ``use_vllm: true, vllm_mode: colocate`` in the vLLM CPU venv
  (``$RUBRIC_REWARD_VLLM_PYTHON`` or ``.venv-vllm``).

It prints every step's ``step_time`` (TRL's own) and the median after the first (vLLM warms up its engine
in step 1). Compare rows of one run.

    python benchmarks/grpo_step.py [--rows tiny smollm2 smollm2-vllm] [--steps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import ROOT  # first: puts this checkout on sys.path

from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge  # noqa: E402


def _verdict(response: str, body: object) -> str:
    return "MET" if len(response.split()) % 2 else "UNMET"  # reward spread, so the loss is not zero


def _python(row: str) -> str:
    if not row.endswith("vllm"):
        return sys.executable
    from rubric_reward.testing.vllm_server import find_vllm_python

    return find_vllm_python()


def run_row(row: str, steps: int, base_url: str, out: Path, timeout: float) -> dict:
    if row == "tiny":
        from rubric_reward.testing.tiny_model import build_tiny_qwen3

        model = str(build_tiny_qwen3(out / "tiny-qwen3"))
        args = ["--config", "configs/grpo/tiny_cpu.yaml", "--model_name_or_path", model]
    else:
        args = ["--config", "configs/grpo/offline_default.yaml",
                "--judge", json.dumps({"model": "scripted", "max_concurrency": 16, "timeout_s": 30})]
    args += ["--judge_base_url", base_url, "--output_dir", str(out / "run"), "--max_steps", str(steps),
             "--save_steps", str(steps), "--monitor", "false", "--final_report", "false", "--ifeval", "false",
             "--reward_config", json.dumps({"reward": "score", "guards": {"degenerate": False}})]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if row.endswith("vllm"):
        args += ["--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_gpu_memory_utilization", "0.2",
                 "--vllm_max_model_length", "1024"]
        env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="0-1", VLLM_NO_USAGE_STATS="1",
                   RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29531")
    start = time.perf_counter()
    log = out / "train.log"
    with log.open("w") as fh:
        proc = subprocess.run([_python(row), "train/grpo.py", *args], cwd=ROOT, env=env, stdout=fh,
                              stderr=subprocess.STDOUT, timeout=timeout)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return {"row": row, "error": f"exit {proc.returncode}; see {log}"}
    state = json.loads((out / "run" / f"checkpoint-{steps}" / "trainer_state.json").read_text())
    times = [h["step_time"] for h in state["log_history"] if "step_time" in h]
    return {"row": row, "steps": times, "median_after_first": statistics.median(times[1:]) if len(times) > 1
            else None, "wall": wall}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", nargs="+", default=["tiny", "smollm2", "smollm2-vllm"],
                   choices=["tiny", "smollm2", "smollm2-vllm"], help="which runs to time")
    p.add_argument("--steps", type=int, default=4, help="GRPO steps per run")
    p.add_argument("--timeout", type=float, default=1200, help="seconds per run")
    args = p.parse_args()
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.1f}, {args.steps} steps per run")
    print("| row | step_time s (each step) | median after step 1 | run wall s |")
    print("|---|---|---|---|")
    with JudgeServer(ScriptedJudge(default=_verdict)) as srv, tempfile.TemporaryDirectory() as tmp:
        for row in args.rows:
            out = Path(tmp) / row
            out.mkdir()
            try:
                r = run_row(row, args.steps, srv.base_url, out, args.timeout)
            except subprocess.TimeoutExpired:
                r = {"row": row, "error": f"> {args.timeout:.0f} s"}
            except Exception as exc:  # noqa: BLE001 - a missing vLLM venv is one row's failure
                r = {"row": row, "error": f"{type(exc).__name__}: {exc}"}
            if "error" in r:
                print(f"| {row} | {r['error']} | - | - |", flush=True)
                continue
            each = ", ".join(f"{t:.1f}" for t in r["steps"])
            med = "-" if r["median_after_first"] is None else f"{r['median_after_first']:.1f}"
            print(f"| {row} | {each} | {med} | {r['wall']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
