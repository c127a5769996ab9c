"""The dpo-loop's offline default against its targets: wall time, CPU time and peak memory, per stage.

    python benchmarks/dpo_loop.py                          # configs/dpo/offline_default.yaml, a fresh folder
    python benchmarks/dpo_loop.py --config X.yaml --out-dir runs/bench-dpo

Runs ``rubric-reward dpo-loop`` in a child process (so its peak RSS is the loop's own), then prints one row per
stage from the loop's completion markers, the totals, the held-out result and the targets (under 20 minutes
on 2 idle cores, under 8 GB; the trained generator's held-out agreement above the base one's with the interval
above 0 and p < 0.05). On a machine shared with other jobs the wall times are contended: CPU seconds are the
steadier figure (on 2 idle cores wall is about CPU / 2 for the parallel parts).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import ROOT

from rubric_reward.evaluation import ci_text, fmt, pvalue

TARGET_WALL_S = 20 * 60
TARGET_RSS_GB = 8.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(ROOT / "configs" / "dpo" / "offline_default.yaml"))
    p.add_argument("--out-dir", help="run folder (default: a fresh temporary folder)")
    p.add_argument("--iterations", type=int)
    args = p.parse_args()
    out = Path(args.out_dir or tempfile.mkdtemp(prefix="bench-dpo-"))
    cmd = [sys.executable, "-m", "rubric_reward.cli", "dpo-loop", "--config", args.config, "--out-dir", str(out),
           "--quiet", *(["--iterations", str(args.iterations)] if args.iterations else [])]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    rows = []
    for marker in sorted(out.glob("iter_*/*.done.json"), key=lambda m: (int(m.parent.name[5:]), m.stat().st_mtime)):
        info = json.loads(marker.read_text())
        detail = {"preferences": lambda: f"{info['n_pairs']} pairs from {info['n_prompts']} prompts",
                  "adapter": lambda: f"{info.get('global_step')} DPO steps, loss {info.get('train_loss', 0):.4f}",
                  "merged": lambda: "",
                  "heldout": lambda: f"agreement {info['base_agreement']:.3f} -> {info['trained_agreement']:.3f}",
                  }[info["stage"]]()
        rows.append(f"| {marker.parent.name} | {info['stage']} | {info['seconds']:.0f} | {detail} |")
    cpu = usage.ru_utime + usage.ru_stime
    rss_gb = usage.ru_maxrss / 1e6  # kilobytes on Linux
    print("| iteration | stage | seconds | what |\n| --- | --- | --- | --- |\n" + "\n".join(rows))
    held = json.loads((out / "heldout.json").read_text()) if (out / "heldout.json").is_file() else None
    d = held["difference"] if held else None
    gain = bool(held and d["low"] is not None and d["low"] > 0 and held["pvalue"] < 0.05)
    print("\n| target | measured | met |\n| --- | --- | --- |")
    print(f"| wall < {TARGET_WALL_S // 60} min on 2 idle cores | {wall / 60:.1f} min wall, {cpu / 60:.1f} min CPU | "
          f"{'yes' if wall < TARGET_WALL_S else 'no (or contended)'} |")
    print(f"| peak RSS < {TARGET_RSS_GB:g} GB | {rss_gb:.2f} GB | {'yes' if rss_gb < TARGET_RSS_GB else 'no'} |")
    if held:
        print(f"| held-out gain, interval above 0, p < 0.05 | {fmt(held['base']['agreement'])} -> "
              f"{fmt(held['trained']['agreement'])}, difference {ci_text(d, signed=True)}, "
              f"p = {pvalue(held['pvalue'])} | "
              f"{'yes' if gain else 'no'} |")
    print(f"\nrun folder: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
