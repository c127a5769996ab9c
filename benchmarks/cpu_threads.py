"""torch's CPU threads on a small shared machine: intra-op count x how idle OpenMP threads wait.

    python benchmarks/cpu_threads.py                 # SmolLM2-135M greedy generate, 3 rows x 48 tokens
    python benchmarks/cpu_threads.py --repeats 3 --tokens 96

Each combination runs in its own process (``OMP_WAIT_POLICY`` is read when torch loads), interleaved with the
others repeat by repeat, so a shared machine's drift hits every row alike; the table gives each one's fastest
and slowest wall time. ``unset`` is libgomp's default (spin, then sleep); ``PASSIVE`` sleeps at once, which is
what ``rubric_reward.util.threads.prepare_environment`` sets for the GRPO recipe.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _bench import ROOT
COMBOS = [(1, None), (2, None), (1, "PASSIVE"), (2, "PASSIVE")]


def child(threads: int, tokens: int) -> None:
    import time

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rubric_reward.io.models import DEFAULT_LOCAL_MODEL, resolve_model

    torch.set_num_threads(threads)
    path = resolve_model(DEFAULT_LOCAL_MODEL)
    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    enc = tok(["Write a haiku about rain.", "Name three colours.", "Say hello."], return_tensors="pt", padding=True)
    with torch.inference_mode():
        model.generate(**enc, max_new_tokens=2, do_sample=False, pad_token_id=tok.pad_token_id)  # warm up
        t0 = time.perf_counter()
        model.generate(**enc, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                       pad_token_id=tok.pad_token_id)
    print("RESULT " + json.dumps({"wall_s": time.perf_counter() - t0}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(*args.child)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, 3 rows x {args.tokens} tokens, "
          f"{args.repeats} repeats")
    walls: dict[tuple, list[float]] = {c: [] for c in COMBOS}
    for _ in range(args.repeats):
        for threads, policy in COMBOS:
            env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
            env.update(PYTHONPATH=str(ROOT), TQDM_DISABLE="1", **({"OMP_WAIT_POLICY": policy} if policy else {}))
            cmd = [sys.executable, __file__, "--child", str(threads), str(args.tokens)]
            try:
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout).stdout
                line = next(x for x in out.splitlines() if x.startswith("RESULT "))
                walls[(threads, policy)].append(json.loads(line[7:])["wall_s"])
            except (subprocess.TimeoutExpired, StopIteration):
                walls[(threads, policy)].append(float("inf"))
    print("| intra-op threads | OMP_WAIT_POLICY | fastest s | slowest s |")
    print("|---|---|---|---|")
    for (threads, policy), w in walls.items():
        print(f"| {threads} | {policy or 'unset'} | {min(w):.2f} | {max(w):.2f} |")


if __name__ == "__main__":
    main()
