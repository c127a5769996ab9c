"""Reward-service overhead: items/s through ``rubric-reward serve`` vs ``Scorer`` in-process.

The same N responses x K binary criteria are scored, at judge concurrency C, for each judge
latency L (default 0 and 50 ms), by:

* in-process: ``Scorer.ascore_batch`` on all items (the baseline);
* service, batches: ``POST /score`` with B items per request, all requests sent at once;
* service, OpenRLHF-style: ``POST /openrlhf`` with one sample per request, R requests in flight
  (OpenRLHF asks one sample per call from its vLLM actors).

The judge server and the service each run in their own process (``python -m
rubric_reward.testing.judge_server``, ``python -m rubric_reward.cli serve``), so neither shares
the client's GIL. Every item must come back scored. Each row is the best of ``--repeats`` runs;
"overhead" is in-process items/s over service items/s, minus one. Usage::

    python benchmarks/reward_server.py [--n 512] [--criteria 4] [--concurrency 64] [--latency-ms 0 50]
                                       [--batch 64] [--inflight 128] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rubric_reward import JudgeConfig, Scorer  # noqa: E402

WORDS = ("the quick brown fox jumps over a lazy dog while careful graders read every claim and check "
         "each cited source against the stated requirement before any verdict is written down").split()


def make_rubric(k: int) -> dict:
    return {"name": "bench", "criteria": [
        {"name": f"criterion_{i}", "requirement": f"The response addresses aspect {i} of the task completely."}
        for i in range(k)]}


def make_items(n: int, words: int = 150) -> list[dict]:
    return [{"id": str(i), "prompt": "Explain how rubric-based rewards work.",
             "response": f"[{i}] " + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(words))} for i in range(n)]


def _start(cmd: list[str], ready: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = proc.stdout.readline()
    if ready not in line:
        proc.kill()
        raise RuntimeError(f"{cmd[2]} did not start: {line!r}")
    return proc, line


def start_judge(latency_ms: float) -> tuple[subprocess.Popen, str]:
    proc, line = _start([sys.executable, "-m", "rubric_reward.testing.judge_server", "--port", "0",
                         "--latency-ms", str(latency_ms)], "PORT ")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def start_service(config: dict, folder: Path) -> tuple[subprocess.Popen, str]:
    path = folder / "reward.yaml"
    path.write_text(json.dumps(config))
    proc, line = _start([sys.executable, "-m", "rubric_reward.cli", "serve", "--config", str(path), "--port", "0",
                         "--no-access-log", "--log-level", "warning"], "listening on")
    return proc, line.strip().rsplit(" ", 1)[1]


async def in_process(judge: dict, rubric: dict, items: list[dict]) -> float:
    scorer = Scorer(rubric, JudgeConfig(**judge), scoring={"abstention": "zero"})
    await scorer.ascore_batch(items[:8])  # warm the pool
    start = time.perf_counter()
    results = await scorer.ascore_batch(items)
    wall = time.perf_counter() - start
    await scorer.aclose()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return wall


async def through_service(url: str, items: list[dict], *, batch: int | None, inflight: int) -> float:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=600)) as session:
        async def post(path: str, body: dict) -> dict:
            async with session.post(url + path, json=body) as resp:
                assert resp.status == 200, await resp.text()
                return await resp.json()

        await post("/score", {"items": items[:8]})  # warm the service's judge pool
        start = time.perf_counter()
        if batch:
            chunks = [items[i:i + batch] for i in range(0, len(items), batch)]
            answers = await asyncio.gather(*(post("/score", {"items": c}) for c in chunks))
            results = [r for a in answers for r in a["results"]]
            ok = all(not r["unscored"] for r in results) and len(results) == len(items)
        else:
            gate = asyncio.Semaphore(inflight)

            async def one(it: dict) -> dict:
                async with gate:
                    prompt = f"<|im_start|>user\n{it['prompt']}<|im_end|>\n<|im_start|>assistant\n"
                    return await post("/openrlhf", {"query": [prompt + it["response"] + "<|im_end|>"],
                                                    "prompts": [prompt], "labels": [None]})

            answers = await asyncio.gather(*(one(it) for it in items))
            ok = all(a["unscored"] == [False] for a in answers)
        wall = time.perf_counter() - start
    assert ok, "some items came back unscored"
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--criteria", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 50.0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--inflight", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    rubric, items = make_rubric(args.criteria), make_items(args.n)
    calls = args.n * args.criteria
    print(f"N = {args.n} items x {args.criteria} criteria = {calls} judge calls, judge concurrency "
          f"{args.concurrency}, batches of {args.batch}, {args.inflight} OpenRLHF requests in flight, "
          f"best of {args.repeats}")
    print("| latency | path | items/s | seconds | ideal s | overhead vs in-process |")
    print("|---|---|---|---|---|---|")
    for latency in args.latency_ms:
        judge_proc, base_url = start_judge(latency)
        judge = {"model": "judge", "base_url": base_url, "max_concurrency": args.concurrency,
                 "limit_scope": "process"}
        ideal = math.ceil(calls / args.concurrency) * latency / 1000
        try:
            base = min(asyncio.run(in_process(judge, rubric, items)) for _ in range(args.repeats))
            rows = [("in-process `Scorer.ascore_batch`", base)]
            with tempfile.TemporaryDirectory() as tmp:
                service, url = start_service({"judge": judge, "rubric": rubric, "deadline_s": 600,
                                              "scoring": {"abstention": "zero"}}, Path(tmp))
                try:
                    for label, kw in ((f"service `/score`, {args.batch} items per request",
                                       {"batch": args.batch, "inflight": 0}),
                                      ("service `/openrlhf`, 1 item per request",
                                       {"batch": None, "inflight": args.inflight})):
                        wall = min(asyncio.run(through_service(url, items, **kw)) for _ in range(args.repeats))
                        rows.append((label, wall))
                finally:
                    service.terminate()
                    service.wait(30)
        finally:
            judge_proc.terminate()
            judge_proc.wait(10)
        for label, wall in rows:
            overhead = "-" if wall is base else f"{(wall / base - 1) * 100:+.1f}%"
            print(f"| {latency:g} ms | {label} | {args.n / wall:,.0f} | {wall:.2f} | "
                  f"{ideal:.2f} | {overhead} |", flush=True)


if __name__ == "__main__":
    main()
