"""The prepared GPU check of the main job (run by ``scripts/gpu_check.sh``; see there for the usage).

Stages, each printing ``[gpu-check] <stage>: ...`` and, when it cannot run, one line saying why:

1. ``environment``: Python, torch, CUDA device, transformers / peft / accelerate versions.
2. ``wheels``: trl and datasets (and datasets' small dependencies when missing) installed offline from the
   wheels carried in ``.whl/gpu-check/`` into a work folder that comes first on the path.
3. ``models``: the tiny test model, and randomly initialised models of Qwen3-0.6B's and Qwen3-4B's shapes
   (built on the GPU in bf16; in the dry run only counted on the meta device).
4. ``generation``: one plain batched sampling ``generate`` of each policy at the GRPO batch (tokens/s).
5. ``grpo``: ``accelerate launch train/grpo.py --config configs/grpo/gpu_check.yaml`` for each policy, the
   0.6B-shaped model as the local transformers judge on the same GPU (the tiny model in the dry run):
   step time, judge calls/s and peak GPU memory from the run's ``train_log.jsonl``.
6. ``dpo-loop``: one shortened iteration of ``rubric-reward dpo-loop`` (configs/dpo/tiny.yaml, 3 prompts, K = 3,
   one DPO step, merge, the held-out stage on 2 labelled prompts) in a child process, on CUDA in bf16 with the
   0.6B-shaped model as the generator (the tiny model in the dry run). A random model writes no rubric, so its
   samples are turned into one (``WordRubricSampler``: the model's sampled words become criteria), and the
   meta-judge and held-out judge are scripted (the loopback judge server: the longer rubric wins; verdicts MET):
   the stage measures the loop's own machinery (sampling, DPO, merge, stage bookkeeping), not rubric quality.

Then one table. Stages that would pass the time budget (8 minutes) are skipped with a line saying so.
``--dry-run`` runs every stage on the CPU at the tiny size, with the carried wheels first on the path and the
packages the GPU machine lacks (vllm, litellm) made unimportable, so CI rehearses what the GPU machine runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".whl" / "gpu-check"
CONFIG = ROOT / "configs" / "grpo" / "gpu_check.yaml"
ACCELERATE_CONFIG = ROOT / "configs" / "accelerate" / "one_process.yaml"
CARRIED = ("trl", "datasets")  # always from the carried wheels
DEPENDENCIES = ("dill", "multiprocess", "xxhash", "fsspec")  # installed from wheels only when missing
# On this venv but not on the GPU machine (torch, transformers, peft, accelerate, safetensors, tokenizers, numpy,
# scipy, pandas, pyarrow, aiohttp, pyyaml, rich, matplotlib there): the dry run makes them absent.
ABSENT_THERE = ("vllm", "litellm", "prometheus_client", "gguf", "sklearn", "krippendorff", "langdetect")
ABSENT = """import importlib.machinery, sys
class _PathFinder(importlib.machinery.PathFinder):  # finds nothing of the packages the GPU machine lacks
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return None if name.partition(".")[0] in {names!r} else super().find_spec(name, path, target)
sys.meta_path[:] = [_PathFinder if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""


def say(stage: str, text: str) -> None:
    print(f"[gpu-check] {stage}: {text}", flush=True)


class Check:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dry = args.dry_run
        self.work = Path(args.work).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        self.site = self.work / "site"
        self.started = time.monotonic()
        self.rows: dict[str, dict] = {}
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(self.site), str(ROOT)]), HF_HUB_OFFLINE="1",
                        TOKENIZERS_PARALLELISM="false", LITELLM_LOCAL_MODEL_COST_MAP="True")
        if self.dry:
            self.env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")

    def left_s(self) -> float:
        return self.args.budget_s - (time.monotonic() - self.started)

    # ------------------------------------------------------------------ 1. environment
    def environment(self) -> bool:
        try:
            import accelerate
            import peft
            import torch
            import transformers
        except ImportError as exc:
            say("environment", f"cannot run: {exc} (torch, transformers, peft and accelerate must be installed)")
            return False
        device = "no CUDA device"
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            device = f"{props.name}, {props.total_memory / 2**30:.0f} GiB"
        say("environment", f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers "
                           f"{transformers.__version__}, peft {peft.__version__}, accelerate {accelerate.__version__}, "
                           f"{device}, {os.cpu_count()} CPUs")
        if not torch.cuda.is_available() and not self.dry:
            say("environment", "cannot run the GPU stages: torch sees no CUDA device (--dry-run rehearses them "
                               "on the CPU)")
            return False
        return True

    # ------------------------------------------------------------------ 2. wheels
    def wheels(self) -> bool:
        import importlib.util

        wheels = sorted(WHEELS.glob("*.whl"))
        tag = f"py{sys.version_info.major}{sys.version_info.minor}"
        cp = f"cp{sys.version_info.major}{sys.version_info.minor}"
        chosen = []
        for name in CARRIED + DEPENDENCIES:
            found = [w for w in wheels if w.name.split("-")[0].lower() == name
                     and ("-py3-" in w.name or f"-{tag}-" in w.name or f"-{cp}-" in w.name)]
            if name in DEPENDENCIES and importlib.util.find_spec(name) is not None:
                continue
            if not found:
                if importlib.util.find_spec(name) is not None:
                    say("wheels", f"no carried wheel for {name}: using the installed one")
                    continue
                say("wheels", f"cannot run: {name} is not installed and {WHEELS.relative_to(ROOT)}/ has no wheel "
                              f"of it for Python {sys.version_info.major}.{sys.version_info.minor} (run "
                              "`bash scripts/gpu_check.sh --download` where the registry is reachable)")
                return False
            chosen.append(found[-1])
        if chosen:
            cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
                   "--no-deps", "--upgrade", "--target", str(self.site), *map(str, chosen)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                say("wheels", f"cannot run: pip could not install the carried wheels: {proc.stderr.strip()[-300:]}")
                return False
        if self.dry:
            self.site.mkdir(parents=True, exist_ok=True)  # no wheel installed there when all were already present
            (self.site / "sitecustomize.py").write_text(ABSENT.format(names=set(ABSENT_THERE)))
        probe = subprocess.run([sys.executable, "-c", "import trl, datasets; print(trl.__version__, "
                                "datasets.__version__, trl.__file__)"], capture_output=True, text=True, env=self.env)
        if probe.returncode != 0:
            say("wheels", f"cannot run: trl/datasets do not import: {probe.stderr.strip().splitlines()[-1:]}")
            return False
        trl_v, datasets_v, where = probe.stdout.split()
        size = sum(w.stat().st_size for w in chosen) / 2**20
        say("wheels", f"trl {trl_v}, datasets {datasets_v} from {Path(where).parents[1]} ({len(chosen)} wheels, "
                      f"{size:.1f} MiB)" + (f"; {', '.join(ABSENT_THERE)} made unimportable" if self.dry else ""))
        return True

    # ------------------------------------------------------------------ 3. models
    def models(self) -> dict[str, Path]:
        import torch
        from transformers import Qwen3ForCausalLM

        from rubric_reward.testing.tiny_model import build_random_qwen3, build_tiny_qwen3, qwen3_config

        out: dict[str, Path] = {}
        t0 = time.monotonic()
        out["tiny"] = build_tiny_qwen3(self.work / "tiny-qwen3", hidden_size=128, heads=2)
        say("models", f"tiny: {_params(out['tiny'])}, {time.monotonic() - t0:.1f} s")
        for shape in ("qwen3-0.6b", "qwen3-4b"):
            t0 = time.monotonic()
            if self.dry:
                with torch.device("meta"):
                    n = sum(p.numel() for p in Qwen3ForCausalLM(qwen3_config(shape)).parameters())
                say("models", f"{shape}: {n / 1e9:.2f}B parameters (dry run: counted on the meta device, not built)")
                continue
            try:
                out[shape] = build_random_qwen3(self.work / shape, shape, tokenizer_dir=out["tiny"], device="cuda")
            except (RuntimeError, OSError) as exc:  # CUDA out of memory, disk full
                say("models", f"{shape}: cannot build it: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                continue
            torch.cuda.empty_cache()
            size = sum(f.stat().st_size for f in out[shape].glob("*.safetensors")) / 2**30
            say("models", f"{shape}: {_params(out[shape])}, random init in bf16, {size:.1f} GiB on disk, "
                          f"{time.monotonic() - t0:.1f} s")
        return out

    # ------------------------------------------------------------------ 4. generation
    def generation(self, name: str, path: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = "cpu" if self.dry else "cuda"
        batch, new_tokens = self.grpo_shape()
        try:
            tok = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).to(device).eval()
            chat = tok.apply_chat_template([{"role": "user", "content": "Write a short note to a customer."}],
                                           add_generation_prompt=True, return_tensors="pt", return_dict=True)
            ids = chat["input_ids"].to(device).repeat(batch, 1)
            with torch.inference_mode():
                model.generate(ids[:1], max_new_tokens=4, do_sample=True, pad_token_id=tok.pad_token_id)  # warm up
                _sync(device)
                t0 = time.perf_counter()
                out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True,
                                     temperature=1.0, pad_token_id=tok.pad_token_id)
                _sync(device)
                seconds = time.perf_counter() - t0
        except (RuntimeError, OSError, ValueError) as exc:
            say("generation", f"{name}: cannot run: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            return
        tokens = (out.shape[1] - ids.shape[1]) * batch
        self.rows.setdefault(name, {})["generation_tokens_per_s"] = tokens / seconds
        say("generation", f"{name}: {batch} x {out.shape[1] - ids.shape[1]} tokens in {seconds:.1f} s = "
                          f"{tokens / seconds:,.0f} tokens/s (plain batched sampling, bf16, {device})")
        del model
        if device == "cuda":
            torch.cuda.empty_cache()

    def grpo_shape(self) -> tuple[int, int]:
        """(completions per step, completion tokens) of the GRPO stage."""
        return (4, 16) if self.dry else (16, 256)

    # ------------------------------------------------------------------ 5. grpo
    def grpo(self, name: str, policy: Path, judge: Path) -> None:
        completions, tokens = self.grpo_shape()
        out = self.work / f"run-{name}"
        shutil.rmtree(out, ignore_errors=True)  # a fresh run, not a resumed one
        judge_cfg = {"model": str(judge), "backend": "transformers", "verdict_mode": "logprob", "max_concurrency": 64}
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ACCELERATE_CONFIG), "--quiet",
               str(ROOT / "train" / "grpo.py"), "--config", str(CONFIG), "--model_name_or_path", str(policy),
               "--judge", json.dumps(judge_cfg), "--output_dir", str(out),
               "--per_device_train_batch_size", str(completions), "--max_completion_length", str(tokens)]
        if self.dry:
            cmd += ["--use_cpu", "true", "--max_steps", "2", "--num_generations", "2"]
        limit = min(self.args.step_timeout_s, self.left_s() - 5)
        log = self.work / f"run-{name}.log"
        t0 = time.monotonic()
        try:
            with log.open("w") as fh:
                proc = subprocess.run(cmd, cwd=ROOT, env=self.env, stdout=fh, stderr=subprocess.STDOUT,
                                      timeout=limit)
        except subprocess.TimeoutExpired:
            say("grpo", f"{name}: stopped after {limit:.0f} s (time budget); log {log}")
            return
        if proc.returncode != 0:
            tail = [x for x in log.read_text(errors="replace").splitlines() if x.strip()][-1:] or ["no output"]
            say("grpo", f"{name}: failed (exit {proc.returncode}): {tail[0][:300]}; log {log}")
            return
        steps = [r for r in map(json.loads, (out / "train_log.jsonl").read_text().splitlines()) if "step_time" in r]
        timed = steps[1:] or steps  # step 1 includes warm-up
        row = self.rows.setdefault(name, {})
        row["step_s"] = statistics.median(r["step_time"] for r in timed)
        calls = sum(r.get("rubric/judge_calls", 0) for r in timed)
        judge_s = sum(r.get("rubric/batch_s", 0) for r in timed)
        row["judge_calls_per_s"] = calls / judge_s if judge_s else None
        row["peak_gpu_gb"] = max((r.get("peak_gpu_memory_gb") or 0 for r in steps), default=None) or None
        row["completion_tokens"] = statistics.mean(r.get("completions/mean_length", 0) for r in timed)
        peak = "n/a (CPU)" if row["peak_gpu_gb"] is None else f"{row['peak_gpu_gb']:.1f} GB"
        say("grpo", f"{name}: {len(steps)} steps, median step {row['step_s']:.1f} s (steps 2+), judge "
                    f"{calls:.0f} calls in {judge_s:.1f} s, peak GPU {peak}, wall {time.monotonic() - t0:.0f} s")

    # ------------------------------------------------------------------ all
    def run(self) -> int:
        if not self.environment() or not self.wheels():
            return 1
        from transformers.utils import logging

        logging.disable_progress_bar()
        models = self.models()
        policies = ["tiny"] if self.dry else [m for m in ("qwen3-0.6b", "qwen3-4b") if m in models]
        judge = models["tiny"] if self.dry else models.get("qwen3-0.6b", models["tiny"])
        for name in policies:
            if self.left_s() < 60:
                say("generation", f"{name}: skipped, {self.left_s():.0f} s left of the time budget")
                continue
            self.generation(name, models[name])
        stages = set(self.args.stages.split(","))
        for name in policies if "grpo" in stages else ():
            if self.left_s() < 90:
                say("grpo", f"{name}: skipped, {self.left_s():.0f} s left of the time budget")
                continue
            self.grpo(name, models[name], judge)
        loop_ok = True
        if "dpo-loop" in stages:
            generator = "tiny" if self.dry else ("qwen3-0.6b" if "qwen3-0.6b" in models else "tiny")
            if self.left_s() < 60:
                say("dpo-loop", f"{generator}: skipped, {self.left_s():.0f} s left of the time budget")
                loop_ok = False
            else:
                loop_ok = self.dpo_loop(generator, models[generator])
        self.table()
        grpo_ok = "grpo" not in stages or all("step_s" in self.rows.get(p, {}) for p in policies)
        return 0 if grpo_ok and loop_ok else 1

    # ------------------------------------------------------------------ 6. dpo-loop
    def dpo_loop(self, name: str, model: Path) -> bool:
        out = self.work / f"dpo-loop-{name}"
        shutil.rmtree(out, ignore_errors=True)  # a fresh loop, not a resumed one
        cmd = [sys.executable, str(Path(__file__).resolve()), "--dpo-loop-child", str(model), "--work", str(out)]
        if self.dry:
            cmd.append("--dry-run")
        limit = min(self.args.step_timeout_s, self.left_s() - 5)
        log = self.work / f"dpo-loop-{name}.log"
        t0 = time.monotonic()
        try:
            with log.open("w") as fh:
                proc = subprocess.run(cmd, cwd=ROOT, env=self.env, stdout=fh, stderr=subprocess.STDOUT, timeout=limit)
        except subprocess.TimeoutExpired:
            say("dpo-loop", f"{name}: stopped after {limit:.0f} s (time budget); log {log}")
            return False
        if proc.returncode != 0:
            tail = [x for x in log.read_text(errors="replace").splitlines() if x.strip()][-1:] or ["no output"]
            say("dpo-loop", f"{name}: failed (exit {proc.returncode}): {tail[0][:300]}; log {log}")
            return False
        info = json.loads((out / "gpu_check_loop.json").read_text())
        self.rows.setdefault(name, {}).update({f"loop_{k}": v for k, v in info.items()})
        stages = ", ".join(f"{k} {v:.1f} s" for k, v in info["stage_s"].items())
        peak = "n/a (CPU)" if info["peak_gpu_gb"] is None else f"{info['peak_gpu_gb']:.1f} GB"
        say("dpo-loop", f"{name}: one iteration, {info['pairs']} pairs from {info['prompts']} prompts, DPO "
                        f"{info['dpo_steps']} step(s); {stages}; peak GPU {peak}, wall {time.monotonic() - t0:.0f} s")
        return True

    def table(self) -> None:
        print("| policy | step s (median, steps 2+) | generation tokens/s | judge calls/s | peak GPU GB | dpo-loop "
              "iteration s |")
        print("|---|---|---|---|---|---|")
        for name, row in self.rows.items():
            loop_s = sum(row["loop_stage_s"].values()) if row.get("loop_stage_s") else None
            cells = [_fmt(row.get("step_s"), "{:.1f}"), _fmt(row.get("generation_tokens_per_s"), "{:,.0f}"),
                     _fmt(row.get("judge_calls_per_s"), "{:.1f}"), _fmt(row.get("peak_gpu_gb"), "{:.1f}"),
                     _fmt(loop_s, "{:.1f}")]
            print(f"| {name} | " + " | ".join(cells) + " |")
        total = time.monotonic() - self.started
        print(f"[gpu-check] done in {total:.0f} s ({'dry run on the CPU' if self.dry else 'GPU'})", flush=True)
        if os.environ.get("OUT"):
            Path(os.environ["OUT"], "gpu_check.json").write_text(json.dumps(
                {"dry_run": self.dry, "seconds": total, "rows": self.rows}, indent=2))


class WordRubricSampler:
    """A generator backend sampling from the model at ``path`` (on ``device``, seeded per request) whose sampled
    words become a rubric's criteria (1-3 by sample index), since a randomly initialised model writes none."""

    def __init__(self, path: str, device: str) -> None:
        import threading

        self.name, self.path, self.device = "word-rubric", path, device
        self.lock = threading.Lock()
        self.lm = self.tok = None

    async def complete(self, request):
        import asyncio

        return await asyncio.to_thread(self.run, request)

    def run(self, request):
        import hashlib
        import re

        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from rubric_reward.judges.base import ChatReply
        from rubric_reward.results import Usage

        with self.lock:
            if self.lm is None:
                self.tok = AutoTokenizer.from_pretrained(self.path)
                dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
                self.lm = AutoModelForCausalLM.from_pretrained(self.path, dtype=dtype).to(self.device).eval()
            text = self.tok.apply_chat_template(list(request.messages), tokenize=False, add_generation_prompt=True)
            enc = self.tok(text, return_tensors="pt", add_special_tokens=False).to(self.device)
            torch.manual_seed(int(hashlib.sha256(f"{text}|{request.sample_index}".encode()).hexdigest()[:8], 16))
            with torch.inference_mode():
                out = self.lm.generate(**enc, do_sample=True, temperature=0.8, max_new_tokens=16,
                                       pad_token_id=self.tok.pad_token_id)
            words = re.findall(r"[A-Za-z]+", self.tok.decode(out[0, enc["input_ids"].shape[1]:],
                                                              skip_special_tokens=True))
        words = list(dict.fromkeys(w.lower() for w in words)) or ["nothing"]
        crits = [{"name": f"c{n}", "requirement": f"The response mentions {words[n % len(words)]}."}
                 for n in range(1 + request.sample_index % 3)]
        return ChatReply(json.dumps({"name": "sampled", "criteria": crits}),
                         usage=Usage(int(enc["input_ids"].shape[1]), 16), finish_reason="stop")

    async def aclose(self) -> None:
        return None


def _longer_rubric_wins(body) -> str | None:
    text = body["messages"][-1]["content"]
    if "## Rubric A" not in text:
        return None
    a, b = text.split("## Rubric A", 1)[1].split("## Rubric B", 1)
    return json.dumps({"winner": "A" if len(a) >= len(b) else "B", "reason": "more specific criteria"})


def dpo_loop_child(model: str, work: Path, dry: bool) -> int:
    """One shortened iteration of the dpo-loop (stage 6), in this process; writes ``work/gpu_check_loop.json``."""
    import torch
    import yaml

    from rubric_reward.judges.config import JudgeConfig
    from rubric_reward.judges.judge import Judge
    from rubric_reward.recipes.generator_dpo.loop import load_loop_config, run_loop
    from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

    device = "cpu" if dry or not torch.cuda.is_available() else "cuda"
    data = yaml.safe_load((ROOT / "configs" / "dpo" / "tiny.yaml").read_text())
    data["max_steps"] = 1
    if device == "cuda":
        data.update(use_cpu=False, bf16=True, dtype="bfloat16")
    work.mkdir(parents=True, exist_ok=True)
    path = work / "loop.yaml"
    path.write_text(yaml.safe_dump(data))
    server = JudgeServer(ScriptedJudge(reply=_longer_rubric_wins)).start()
    try:
        judge = {"model": "scripted", "base_url": server.base_url, "max_retries": 0}
        config = load_loop_config(path, generator=model, meta_judge=judge, out_dir=str(work / "loop"), iterations=1,
                                  progress=False, heldout={"prompts": "labelled:heldout", "limit": 2,
                                                           "n_resamples": 100})

        def factory(m: str, iteration: int):
            cfg = JudgeConfig(model=m, backend="transformers", verdict_mode="generate", temperature=0.8, max_tokens=64)
            return Judge(cfg, backend=WordRubricSampler(m, device))

        times: dict[str, float] = {}
        started: dict[str, float] = {}

        def hook(i: int, stage: str, event: str) -> None:
            if event == "start":
                started[stage] = time.monotonic()
            else:
                times[stage] = time.monotonic() - started[stage]

        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        summary = run_loop(config, generator_factory=factory, hook=hook)
    finally:
        server.stop()
    it = summary.iterations[0]
    info = {"device": device, "prompts": it["preferences"]["n_prompts"], "pairs": it["preferences"]["n_pairs"],
            "dpo_steps": it["adapter"].get("global_step"), "stage_s": times,
            "heldout_agreement": it["heldout"]["trained_agreement"],
            "peak_gpu_gb": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None}
    (work / "gpu_check_loop.json").write_text(json.dumps(info, indent=2))
    print(json.dumps(info))
    return 0


def _params(path: Path) -> str:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(path)
    with torch.device("meta"):
        n = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    return f"hidden {config.hidden_size}, {config.num_hidden_layers} layers, vocab {config.vocab_size}, {n / 1e6:,.1f}M parameters"


def _fmt(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def main() -> int:
    p = argparse.ArgumentParser(description="GPU check of the main job (see scripts/gpu_check.sh)")
    p.add_argument("--dry-run", action="store_true", help="every stage on the CPU at the tiny size")
    p.add_argument("--work", default=os.environ.get("GPU_CHECK_WORK", str(ROOT / "runs" / "gpu-check")))
    p.add_argument("--budget-s", type=float, default=480.0, help="the whole check's time budget (seconds)")
    p.add_argument("--step-timeout-s", type=float, default=240.0, help="one GRPO or dpo-loop run's limit (seconds)")
    p.add_argument("--stages", default="grpo,dpo-loop", help="of the run stages, which (comma-separated): grpo, dpo-loop")
    p.add_argument("--dpo-loop-child", metavar="MODEL", help=argparse.SUPPRESS)  # stage 6's child process
    args = p.parse_args()
    if args.dpo_loop_child:
        return dpo_loop_child(args.dpo_loop_child, Path(args.work), args.dry_run)
    return Check(args).run()


if __name__ == "__main__":
    sys.exit(main())
