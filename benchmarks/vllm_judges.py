"""Judge throughput through both vLLM backends: the OpenAI-compatible server (fast path) and in-process.

Run with a Python that has vLLM (the GPU build, or the CPU build from scripts/setup_vllm_cpu.sh):

    python benchmarks/vllm_judges.py --model Qwen/Qwen2.5-0.5B-Instruct --items 64      # GPU
    .venv-vllm/bin/python benchmarks/vllm_judges.py --model smollm2-135m-instruct --items 4 --device cpu

It scores ``items`` responses against a ``criteria``-criterion rubric (one call per criterion, so one
response's calls share their prefix) and prints a table: judge calls/s, prompt and generated tokens/s, and
the prefix-cache hit rate (server: ``vllm:prefix_cache_hits_total / queries_total`` from ``/metrics``;
in-process: the engine's own counters).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.request
from pathlib import Path

import _bench  # noqa: F401  (first: puts this checkout on sys.path)

WORDS = ("the response explains the refund policy clearly and offers a next step for the customer "
         "while keeping a warm and professional tone throughout").split()


def rubric_and_items(n_criteria: int, n_items: int):
    from rubric_reward import Rubric

    rubric = Rubric.from_obj([{"name": f"c{i}", "requirement": f"Criterion {i}: the response mentions "
                               f"'{WORDS[i % len(WORDS)]}' explicitly."} for i in range(n_criteria)])
    items = [("Answer the customer's question about refunds.",
              " ".join(WORDS[(i + j) % len(WORDS)] for j in range(300))) for i in range(n_items)]
    return rubric, items


def prefix_counters(base_url: str) -> tuple[float, float]:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=30) as r:  # noqa: S310
        text = r.read().decode()

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? ([0-9.eE+]+)$", text, re.M))

    return total("vllm:prefix_cache_hits_total"), total("vllm:prefix_cache_queries_total")


def run(scorer, items) -> dict:
    start = time.perf_counter()
    results = scorer.score_batch(items)
    wall = time.perf_counter() - start
    calls = [c for r in results for c in r.calls]
    return {
        "wall_s": wall, "calls": len(calls), "failed": sum(r.score is None for r in results),
        "prompt_tokens": sum(c.usage.prompt_tokens for c in calls),
        "completion_tokens": sum(c.usage.completion_tokens for c in calls),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="hub id, local folder, or smollm2-135m-instruct")
    ap.add_argument("--items", type=int, default=64)
    ap.add_argument("--criteria", type=int, default=10)
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--skip-server", action="store_true")
    ap.add_argument("--skip-in-process", action="store_true")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()

    from rubric_reward import JudgeConfig, Scorer
    from rubric_reward.io.models import resolve_model
    from rubric_reward.testing.vllm_server import vllm_cpu_server

    model = resolve_model(args.model)
    rubric, items = rubric_and_items(args.criteria, args.items)
    rows = []
    if not args.skip_server:
        server_args = {"dtype": "float32"} if args.device == "cpu" else {"dtype": "auto", "max_model_len": 4096}
        with vllm_cpu_server(model, python=sys.executable, timeout_s=900, served_model_name="judge",
                             extra_args=["--enable-prefix-caching"], **server_args) as url:
            cfg = JudgeConfig(model="judge", base_url=url, max_tokens=args.max_tokens, max_concurrency=256)
            with Scorer(rubric, cfg) as scorer:
                row = run(scorer, items)
            hits, queries = prefix_counters(url)
        rows.append({"backend": "vllm serve + fast path", **row,
                     "prefix_hit_rate": hits / queries if queries else None})
    if not args.skip_in_process:
        for mode in ("generate", "logprob"):
            cfg = JudgeConfig(model=model, backend="vllm", verdict_mode=mode, max_tokens=args.max_tokens,
                              engine_args={"disable_log_stats": False})
            with Scorer(rubric, cfg) as scorer:
                run(scorer, items[:1])  # start the engine outside the timing
                row = run(scorer, items)
                llm = scorer.grader.judges[0].backend._llm
                counters = {m.name: getattr(m, "value", 0) for m in llm.get_metrics() if "prefix_cache" in m.name}
            hits = counters.get("vllm:prefix_cache_hits", 0)
            queries = counters.get("vllm:prefix_cache_queries", 0)
            rows.append({"backend": f"in-process vllm.LLM ({mode})", **row,
                         "prefix_hit_rate": hits / queries if queries else None})

    print(f"\n{args.items} responses x {args.criteria} criteria on {args.device} with {args.model}\n")
    print("| backend | calls | failed items | calls/s | prompt tok/s | generated tok/s | prefix-cache hit rate |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        rate = "n/a" if r["prefix_hit_rate"] is None else f"{r['prefix_hit_rate']:.2f}"
        print(f"| {r['backend']} | {r['calls']} | {r['failed']} | {r['calls'] / r['wall_s']:.1f} | "
              f"{r['prompt_tokens'] / r['wall_s']:.0f} | {r['completion_tokens'] / r['wall_s']:.0f} | {rate} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
