"""verl's reward loop over the rubric reward: judge calls in flight and wall time per step, by entry point.

verl's reward loop starts one task per sample and awaits an async reward function, or runs a sync
one in the loop's default thread pool (``min(32, cpus + 4)`` threads). N samples x K criteria are
scored against the loopback judge (latency L, limit C) by:

* ``compute_score`` (sync, in the default pool): what verl does with a sync function;
* ``to_thread`` (the earlier ``compute_score_async``: the sync path in ``asyncio.to_thread``);
* ``compute_score_async`` (natively async on the adapter's one shared loop).

Usage: ``python benchmarks/verl_reward_loop.py [--n 128] [--criteria 2] [--latency-ms 200] [--concurrency 64]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from _bench import filler, rubric_spec

import yaml

from rubric_reward.integrations.verl import compute_score, compute_score_async
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge


async def _reward_loop(call, n: int, kwargs: dict) -> float:
    loop = asyncio.get_running_loop()
    start = time.perf_counter()

    async def one(i: int):
        args = dict(data_source="bench", solution_str=f"answer {i}: {filler(i, 12)}", ground_truth=None,
                    extra_info={"index": i}, **kwargs)
        if call == "compute_score":
            return await loop.run_in_executor(None, lambda: compute_score(**args))
        if call == "to_thread":
            return await asyncio.to_thread(compute_score, **args)
        return await compute_score_async(**args)

    out = await asyncio.gather(*(one(i) for i in range(n)))
    assert all(o["rubric_unscored"] == 0.0 for o in out), "every sample must be scored"
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--criteria", type=int, default=2)
    ap.add_argument("--latency-ms", type=float, default=200)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    with JudgeServer(ScriptedJudge({}), latency_s=args.latency_ms / 1000) as server, \
            tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reward.yaml"
        path.write_text(yaml.safe_dump({"judge": {"model": "judge", "base_url": server.base_url,
                                                  "max_concurrency": args.concurrency},
                                        "rubric": rubric_spec(args.criteria), "deadline_s": 60}))
        kwargs = {"config": str(path)}
        asyncio.run(_reward_loop("compute_score_async", 2, kwargs))  # build the judge pool once
        print(f"{args.n} samples x {args.criteria} criteria, judge latency {args.latency_ms:g} ms, limit "
              f"{args.concurrency}, default pool {min(32, (os.cpu_count() or 1) + 4)} threads")
        print(f"{'entry point':<22}{'wall s':>8}{'samples/s':>11}{'judge calls in flight (max)':>30}")
        for call in ("compute_score", "to_thread", "compute_score_async"):
            server.reset_stats()
            wall = asyncio.run(_reward_loop(call, args.n, kwargs))
            print(f"{call:<22}{wall:>8.2f}{args.n / wall:>11.1f}{server.max_in_flight:>30}")


if __name__ == "__main__":
    main()
