"""Batch-wide dedupe: calls made vs unique calls, and wall time vs ideal, for duplicated items.

    python benchmarks/batch_dedupe.py [--unique 100] [--copies 8] [--latency-ms 50] [--concurrency 64]

Two layouts of the same batch (``unique`` items x ``copies``, a one-criterion rubric) against the
loopback judge: copies spread at random through the batch, and copies in a row. Ideal wall time is
ceil(unique / concurrency) x latency.
"""

from __future__ import annotations

import argparse
import math
import random
import time

import _bench  # noqa: F401  (first: puts this checkout on sys.path)

from rubric_reward import JudgeConfig, Scorer  # noqa: E402
from rubric_reward.rubric import Rubric  # noqa: E402
from rubric_reward.testing.judge_server import JudgeServer  # noqa: E402


def run(items: list[dict], latency_s: float, concurrency: int) -> tuple[int, int, float]:
    rubric = Rubric.from_obj([{"name": "c", "requirement": "The answer is right."}])
    with JudgeServer(latency_s=latency_s, record_bodies=False) as server:
        config = JudgeConfig(model="judge", base_url=server.base_url, max_concurrency=concurrency,
                             limit_scope="process")
        with Scorer(rubric, config) as scorer:
            scorer.score_batch([{"prompt": "warm", "response": "up"}])
            server.reset_stats()
            start = time.perf_counter()
            results = scorer.score_batch(items)
            wall = time.perf_counter() - start
    assert all(r.ok for r in results)
    return server.requests, server.max_in_flight, wall


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unique", type=int, default=100)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args(argv)
    unique = [{"prompt": "Answer briefly.", "response": f"answer number {i}"} for i in range(args.unique)]
    spread = unique * args.copies
    random.Random(0).shuffle(spread)
    in_a_row = [u for u in unique for _ in range(args.copies)]
    ideal = math.ceil(args.unique / args.concurrency) * args.latency_ms / 1000
    print(f"{args.unique} unique items x {args.copies} copies, {args.latency_ms:g} ms latency, "
          f"concurrency {args.concurrency}\n")
    print("| layout | calls made | unique calls | peak in flight | seconds | ideal s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, items in (("no copies (reference)", unique), ("copies spread", spread), ("copies in a row", in_a_row)):
        calls, peak, wall = run(items, args.latency_ms / 1000, args.concurrency)
        print(f"| {name} | {calls} | {args.unique} | {peak} | {wall:.2f} | {ideal:.2f} | {wall / ideal:.2f}x |")


if __name__ == "__main__":
    main()
