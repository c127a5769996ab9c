"""Judge pool routing and the machine-wide cap against loopback replicas (a benchmark, not a timed test).

Routing: R scripted replicas (default 3, each its own process), N responses x K criteria (default 96 x 6)
graded with ``mode: per_criterion`` at concurrency C (default 64) and replica latency L (default 50 ms).
It reports, per ``replica_load_factor``:

* affinity share: the fraction of responses whose calls all went to one replica (the issue's figure),
  and of calls that went to their response's first-choice replica;
* balance: the busiest replica's calls over the mean;
* spills and failovers (pool stats), and the wall time against the ideal ceil(N x K / C) x L.

Cap overhead: acquire + release of one concurrency slot, in process (``limit_scope: process``) and
through the machine-wide lock files (``shared``, what ``auto`` picks for a remote judge), uncontended;
and transport calls/s at 0 ms with each scope.

Usage::

    python benchmarks/judge_pool.py [--replicas 3] [--responses 96] [--criteria 6] [--concurrency 64]
                                    [--latency-ms 50] [--load-factors 1.25 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from _bench import filler, rubric_spec  # first: puts this checkout on sys.path

from rubric_reward import Scorer  # noqa: E402
from rubric_reward.judges import ChatRequest, Judge, JudgeConfig  # noqa: E402
from rubric_reward.judges import limits  # noqa: E402
from rubric_reward.rubric import Rubric  # noqa: E402
from rubric_reward.testing.judge_server import spawn  # noqa: E402


def items(n: int, words: int) -> list[dict]:
    return [{"prompt": f"Task {i % 8}: explain rubric rewards.", "response": f"[{i}] {filler(i, words)}"}
            for i in range(n)]


async def routed_run(urls: list[str], rubric: Rubric, data: list[dict], c: int, factor: float) -> dict:
    config = JudgeConfig(model="judge", base_url=urls, max_concurrency=c, limit_scope="process",
                         replica_load_factor=factor)
    scorer = Scorer(rubric, config)
    judge = scorer.grader.judges[0]
    pool = judge.backend.replicas
    placed: dict[int, Counter] = defaultdict(Counter)  # key hash -> replica -> calls
    acquire = pool.acquire

    async def recording(timeout=None, key=0):
        i = await acquire(timeout, key)
        if i is not None:
            placed[key][i] += 1
        return i

    await scorer.ascore_batch(data[:4])  # warm the connection pools (not counted below)
    pool.acquire = recording
    for r in pool._state:
        r.calls = r.affine = r.spills = r.failovers = 0
    start = time.perf_counter()
    results = await scorer.ascore_batch(data[4:] + data[:4], )
    wall = time.perf_counter() - start
    await scorer.aclose()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    stats = pool.stats()
    calls = [s["calls"] for s in stats]
    return {"wall": wall, "together": sum(1 for v in placed.values() if len(v) == 1) / len(placed),
            "affine": sum(s["affine"] for s in stats) / sum(calls), "balance": max(calls) / statistics.mean(calls),
            "spills": sum(s["spills"] for s in stats), "failovers": sum(s["failovers"] for s in stats),
            "calls": calls}


def slot_overhead(n: int = 20000) -> dict[str, float]:
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, slots in (("process", limits.Slots(64)), ("shared", limits._FileSlots(64, Path(folder)))):
            start = time.perf_counter()
            for _ in range(n):
                slots.try_acquire()
                slots.release()
            out[name] = (time.perf_counter() - start) / n * 1e6
    return out


async def transport_rate(url: str, scope: str, n: int, c: int) -> float:
    judge = Judge(JudgeConfig(model="judge", base_url=url, max_concurrency=c, limit_scope=scope), dedupe=False)
    reqs = [ChatRequest(({"role": "user", "content": f"## Criterion\n### c0\nrequest {i} {filler(i, 50)}"},))
            for i in range(n)]
    await asyncio.gather(*(judge.complete(r) for r in reqs[:8]))
    start = time.perf_counter()
    replies = await asyncio.gather(*(judge.complete(r) for r in reqs))
    rate = n / (time.perf_counter() - start)
    await judge.aclose()
    assert all(r.ok for r in replies)
    return rate


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--responses", type=int, default=96)
    ap.add_argument("--criteria", type=int, default=6)
    ap.add_argument("--words", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--load-factors", type=float, nargs="+", default=[2.0, 1.25])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cap-calls", type=int, default=1500, help="calls per run of the 0 ms cap-overhead rows")
    args = ap.parse_args(argv)
    os.environ.setdefault("RUBRIC_REWARD_LIMIT_DIR", tempfile.mkdtemp(prefix="judge_pool_limits_"))

    rubric = Rubric.from_obj(rubric_spec(args.criteria))
    data = items(args.responses, args.words)
    n_calls = args.responses * args.criteria
    ideal = math.ceil(n_calls / args.concurrency) * args.latency_ms / 1000
    procs = [spawn(args.latency_ms) for _ in range(args.replicas)]
    urls = [u for _, u in procs]
    rows = []
    try:
        for factor in args.load_factors:
            for rep in range(args.repeats):
                rows.append((factor, rep, asyncio.run(routed_run(urls, rubric, data, args.concurrency, factor))))
    finally:
        for p, _ in procs:
            p.terminate()
            p.wait(10)

    print(f"\n{args.replicas} loopback replicas, {args.responses} responses x {args.criteria} criteria "
          f"(per_criterion, {n_calls} calls), concurrency {args.concurrency}, latency {args.latency_ms:g} ms, "
          f"{os.cpu_count()} CPUs; ideal {ideal:.2f} s\n")
    print("| load factor | run | responses on one replica | calls on first choice | balance | spills "
          "| calls per replica | wall s | wall / ideal |")
    print("|---|---|---|---|---|---|---|---|---|")
    for factor, rep, r in rows:
        print(f"| {factor:g} | {rep + 1} | {r['together']:.3f} | {r['affine']:.3f} | {r['balance']:.2f} "
              f"| {r['spills']} "
              f"| {'/'.join(map(str, r['calls']))} | {r['wall']:.2f} | {r['wall'] / ideal:.2f}x |")

    overhead = slot_overhead()
    proc, url = spawn(0.0)
    try:
        rates = {scope: [asyncio.run(transport_rate(url, scope, args.cap_calls, args.concurrency))
                         for _ in range(args.repeats)] for scope in ("process", "shared")}
    finally:
        proc.terminate()
        proc.wait(10)
    print("\n| cap scope | acquire + release, us (uncontended) | transport calls/s at 0 ms (runs) |")
    print("|---|---|---|")
    for scope in ("process", "shared"):
        print(f"| {scope} | {overhead[scope]:.2f} | {', '.join(f'{x:,.0f}' for x in rates[scope])} |")


if __name__ == "__main__":
    main()
