"""Prefix-affinity routing measured on real vLLM replicas: vLLM's own prefix-cache hit rate, wall, tokens/s.

Two vLLM CPU servers of the bundled SmolLM2-135M with prefix caching (``scripts/setup_vllm_cpu.sh``; each server
bound to its own CPU), judged ``mode: per_criterion`` (one call per criterion: a response's calls share the
prefix instructions + task + response). Rows, in alternating order over ``--repeats`` rounds:

* **single**: one server (the other idle): the hit rate a pool can at best keep;
* **scattered**: both servers, every call its own routing key at ``replica_load_factor: 1``: a response's
  criteria spread over the replicas as a least-loaded router or the pool before affinity routing sends them;
* **affinity**: both servers, the pool's routing (a response's calls keep to one replica) at each
  ``--load-factors`` value (default 2, the pool's default).

Each row judges fresh responses (its own filler texts), so no row is served from another row's cache. The hit
rate is ``vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total`` summed over the servers, taken as
the difference of their ``/metrics`` before and after the row. Judge tokens/s: prompt + generated tokens over
wall.

    .venv-vllm/bin/python benchmarks/judge_pool_vllm.py        # or RUBRIC_REWARD_VLLM_PYTHON=... python ...
    python benchmarks/judge_pool_vllm.py --responses 24 --criteria 8 --concurrency 32 --repeats 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import zlib
from pathlib import Path

import _bench  # noqa: F401  (first: puts this checkout on sys.path)

from vllm_judges import prefix_counters  # noqa: E402


def _items(n: int, words: int, offset: int) -> list[tuple[str, str]]:
    """``n`` distinct responses of ``words`` seeded random words (no two rows or responses share a text)."""
    import random

    vocab = _bench.WORDS + "refund store receipt days policy customer manager exchange credit card".split()
    rngs = [random.Random(offset + i) for i in range(n)]
    return [("Answer the customer's question about refunds, in the store's voice.",
             " ".join(rng.choice(vocab) for _ in range(words))) for rng in rngs]


def _rubric(k: int):
    from rubric_reward import Rubric

    return Rubric.from_obj([{"name": f"c{i}", "requirement": f"Criterion {i}: the response states requirement "
                             f"number {i} of the refund policy in plain words."} for i in range(k)])


def _counters(urls: list[str]) -> tuple[float, float]:
    pairs = [prefix_counters(u) for u in urls]
    return sum(h for h, _ in pairs), sum(q for _, q in pairs)


@contextlib.contextmanager
def _scattered():
    """Every call its own routing key (its whole prompt), as a router that knows no prefix would spread them."""
    from rubric_reward.judges import http

    original = http.affinity_hash

    def per_call(request):
        return zlib.crc32(json.dumps(request.messages, sort_keys=True).encode())

    http.affinity_hash = per_call
    try:
        yield
    finally:
        http.affinity_hash = original


def _row(name: str, urls: list[str], all_urls: list[str], items, rubric, args, factor: float = 2.0) -> dict:
    from rubric_reward import JudgeConfig, Scorer

    cfg = JudgeConfig(model="judge", base_url=tuple(urls) if len(urls) > 1 else urls[0], max_tokens=args.max_tokens,
                      max_concurrency=args.concurrency, replica_load_factor=factor, limit_scope="process")
    hits0, queries0 = _counters(all_urls)
    with _scattered() if name == "scattered" else contextlib.nullcontext(), Scorer(rubric, cfg) as scorer:
        start = time.perf_counter()
        results = scorer.score_batch(items)
        wall = time.perf_counter() - start
    hits1, queries1 = _counters(all_urls)
    calls = [c for r in results for c in r.calls]
    tokens = sum(c.usage.prompt_tokens + c.usage.completion_tokens for c in calls)
    label = f"affinity, load factor {factor:g}" if name == "affinity" else name
    return {"row": label, "wall_s": wall, "calls": len(calls), "failed": sum(r.score is None for r in results),
            "tokens": tokens, "hit_rate": (hits1 - hits0) / max(queries1 - queries0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--responses", type=int, default=32)
    ap.add_argument("--criteria", type=int, default=8)
    ap.add_argument("--words", type=int, default=220, help="words per response (~300 tokens)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--load-factors", type=float, nargs="+", default=[2.0], help="affinity rows' replica_load_factor")
    ap.add_argument("--python", help="the vLLM venv's python (default: RUBRIC_REWARD_VLLM_PYTHON or .venv-vllm)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()

    from rubric_reward.io.models import resolve_model
    from rubric_reward.testing.vllm_server import vllm_cpu_server

    model = resolve_model(args.model)
    rubric = _rubric(args.criteria)
    rows = []
    serve = {"python": args.python, "timeout_s": 900, "served_model_name": "judge",
             "extra_args": ["--enable-prefix-caching"]}
    with vllm_cpu_server(model, env={"VLLM_CPU_OMP_THREADS_BIND": "0"}, **serve) as a, \
            vllm_cpu_server(model, env={"VLLM_CPU_OMP_THREADS_BIND": "1"}, **serve) as b:
        both = [a, b]
        plan = [("single", 2.0), ("scattered", 1.0)] + [("affinity", f) for f in args.load_factors]
        for r in range(args.repeats):
            for j, (name, factor) in enumerate(plan if r % 2 == 0 else plan[::-1]):
                items = _items(args.responses, args.words, offset=1000 * (len(plan) * r + j))
                rows.append(_row(name, [a] if name == "single" else both, both, items, rubric, args, factor))
                print(f"[pool] round {r}: {rows[-1]}", file=sys.stderr)
    print(f"\n{args.responses} responses (~{args.words} words) x {args.criteria} criteria, concurrency "
          f"{args.concurrency}, 2 vLLM CPU servers of {args.model} (prefix caching, one CPU each)\n")
    print("| row | calls | failed | wall s | judge tokens/s | prefix-cache hit rate |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['row']} | {row['calls']} | {row['failed']} | {row['wall_s']:.1f} | "
              f"{row['tokens'] / row['wall_s']:.0f} | {row['hit_rate']:.3f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
