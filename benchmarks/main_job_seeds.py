"""The GRPO recipe over several seeds: does its gain hold on every seed? (a seed sweep)

Runs ``accelerate launch train/grpo.py --seed S --output_dir ROOT/seed_S [--config ...] [--max_steps N] [extra
recipe args]`` for each seed, one at a time, each in its own process (``--launcher python`` runs
``python train/grpo.py`` instead, with ``OMP_NUM_THREADS`` as you set it). Resumable: a seed whose
``summary.json`` exists is not rerun; one interrupted after a checkpoint is resumed with
``--resume_from_checkpoint true``; one interrupted before any checkpoint is moved aside
(``seed_S.interrupted-N``) and run again. Each seed's wall time and peak RSS (the training process and its
children: the largest process from ``os.wait4``, and the sum over all its processes sampled each second from
``/proc``) go to ``ROOT/seed_S/sweep.json``.

It prints one row per seed and the pooled result, and writes ``ROOT/seeds_summary.{md,json}``: every number is
recomputed from each seed's ``report_completions.jsonl`` (``rubric_reward.recipes.grpo.seeds.seed_result``),
and the pooled gain is the mean of the seeds' mean differences with a Student t-interval over them
(``rubric_reward.recipes.grpo.comparison.pool_seeds``); a seed counts as significant with Wilcoxon p < 0.01
and its interval above 0.

    python benchmarks/main_job_seeds.py --seeds 0 1 2 3 4                       # the offline default, 5 seeds
    python benchmarks/main_job_seeds.py --seeds 0 1 --max_steps 2 --root runs/s --ifeval false
    python benchmarks/main_job_seeds.py --seeds 0 1 2 3 4 --summary-only         # rewrite the table only
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from _bench import ROOT  # first: puts this checkout on sys.path

from rubric_reward.recipes.grpo.seeds import seed_result, write_seeds_summary  # noqa: E402

SWEEP_FILE = "sweep.json"
RESERVED = ("--seed", "--output_dir", "--output-dir")


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", nargs="+", type=int, required=True, help="training seeds (TrainingArguments.seed)")
    p.add_argument("--root", default="runs/grpo-offline-seeds", help="the sweep's folder: ROOT/seed_S per seed")
    p.add_argument("--config", help="recipe YAML (default: the recipe's own, configs/grpo/offline_default.yaml)")
    p.add_argument("--max_steps", type=int, help="passed to the recipe")
    p.add_argument("--launcher", choices=["accelerate", "python"], default="accelerate",
                   help="accelerate launch (one process, configs/accelerate/one_process.yaml) or python")
    p.add_argument("--timeout", type=float, default=None, help="seconds per seed (default: none)")
    p.add_argument("--summary-only", action="store_true", help="run nothing; rewrite seeds_summary from the runs")
    args, extra = p.parse_known_args(argv)
    for arg in extra:
        if arg.split("=", 1)[0] in RESERVED:
            p.error(f"{arg.split('=', 1)[0]} is set per seed by the sweep (use --seeds / --root)")
    return args, extra


def recipe_command(args: argparse.Namespace, extra: list[str], seed: int, out: Path) -> list[str]:
    """The command line of one seed's run."""
    if args.launcher == "accelerate":
        accelerate = Path(sys.executable).parent / "accelerate"
        head = [str(accelerate) if accelerate.exists() else "accelerate", "launch", "--config_file",
                str(ROOT / "configs" / "accelerate" / "one_process.yaml"), "--quiet"]
    else:
        head = [sys.executable]
    cmd = head + ["train/grpo.py"]
    if args.config:
        cmd += ["--config", args.config]
    cmd += ["--seed", str(seed), "--output_dir", str(out)]
    if args.max_steps is not None:
        cmd += ["--max_steps", str(args.max_steps)]
    return cmd + list(extra)


def _checkpoints(out: Path) -> list[Path]:
    found = [p for p in out.glob("checkpoint-*") if p.name.split("-", 1)[1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-", 1)[1]))


def tree_rss_kib(root_pid: int) -> int:
    """The summed resident memory (KiB) of ``root_pid`` and its descendants, from /proc (0 where there is none)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree, grew = {root_pid}, True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    total = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total


class TreePeak:
    """Samples :func:`tree_rss_kib` every ``every_s`` seconds in a thread; ``peak`` is the largest sum seen."""

    def __init__(self, pid: int, every_s: float = 1.0):
        import threading

        self.pid, self.every_s, self.peak = pid, every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_kib(self.pid))
            self._stop.wait(self.every_s)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def run_seed(args: argparse.Namespace, extra: list[str], seed: int, root: Path) -> dict:
    """Run (or resume) one seed unless its summary exists; return its sweep record."""
    out = root / f"seed_{seed}"
    record_path = out / SWEEP_FILE
    if (out / "summary.json").is_file():
        record = json.loads(record_path.read_text()) if record_path.is_file() else {"seed": seed}
        print(f"[seeds] seed {seed}: finished before ({out}/summary.json), not rerun", flush=True)
        return {**record, "reused": True}
    resumed = None
    if out.exists():
        checkpoints = _checkpoints(out)
        if checkpoints:
            resumed = checkpoints[-1].name
        else:
            n = 1
            while out.with_name(f"{out.name}.interrupted-{n}").exists():
                n += 1
            out.rename(out.with_name(f"{out.name}.interrupted-{n}"))
            print(f"[seeds] seed {seed}: an interrupted run without checkpoints moved to "
                  f"{out.name}.interrupted-{n}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    cmd = recipe_command(args, extra, seed, out)
    if resumed:
        cmd += ["--resume_from_checkpoint", "true"]
    print(f"[seeds] seed {seed}: {shlex.join(cmd)}" + (f" (resuming from {resumed})" if resumed else ""),
          flush=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH")) if x)
    log = out / "sweep.log"
    start = time.perf_counter()
    with log.open("a") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
        sampler = TreePeak(proc.pid) if Path("/proc/self/status").is_file() else None
        timer = None
        if args.timeout:
            import threading

            timer = threading.Timer(args.timeout, proc.kill)
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, its descendants included
        finally:
            if timer is not None:
                timer.cancel()
        tree_peak = sampler.stop() if sampler is not None else None
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    record = {"seed": seed, "command": shlex.join(cmd), "returncode": proc.returncode, "wall_s": wall,
              "peak_rss_kib": usage.ru_maxrss, "peak_tree_rss_kib": tree_peak or None,
              "user_s": usage.ru_utime, "system_s": usage.ru_stime,
              "resumed_from": resumed, "log": str(log), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    record_path.write_text(json.dumps(record, indent=2) + "\n")
    if proc.returncode != 0 or not (out / "summary.json").is_file():
        tail = log.read_text(errors="replace").splitlines()[-15:]
        print(f"[seeds] seed {seed}: FAILED (exit {proc.returncode}; {log}):\n  " + "\n  ".join(tail), flush=True)
    else:
        print(f"[seeds] seed {seed}: done in {wall:.0f} s, peak RSS {usage.ru_maxrss / 1024 / 1024:.2f} GB "
              f"(largest process)" + (f", {tree_peak / 1024 / 1024:.2f} GB (all its processes)" if tree_peak else ""),
              flush=True)
    return record


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(argv)
    root = Path(args.root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    print(f"[seeds] {os.cpu_count()} CPUs, load average {load:.1f}; seeds {args.seeds}; runs in {root}", flush=True)
    results, failed = [], []
    for seed in args.seeds:
        out = root / f"seed_{seed}"
        if args.summary_only:
            path = out / SWEEP_FILE
            record = json.loads(path.read_text()) if path.is_file() else {}
        else:
            record = run_seed(args, extra, seed, root)
        if not (out / "summary.json").is_file() or not (out / "report_completions.jsonl").is_file():
            failed.append(seed)
            continue
        row = seed_result(out)
        row["seed"] = seed
        row.update({k: record.get(k) for k in ("wall_s", "peak_rss_kib", "peak_tree_rss_kib", "resumed_from",
                                                 "command")})
        results.append(row)
    if not results:
        print("[seeds] no seed finished: nothing to summarise", flush=True)
        return 1
    template = recipe_command(args, extra, 0, root / "seed_S")
    command = shlex.join(template).replace("--seed 0", "--seed S")
    path = write_seeds_summary(root, results, command=command)
    print(path.read_text(), flush=True)
    print(f"[seeds] wrote {path} and {path.with_suffix('.json')}" +
          (f"; seeds without a finished run: {failed}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
