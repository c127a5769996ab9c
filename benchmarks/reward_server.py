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

from _bench import ROOT, filler, rubric_spec  # first: puts this checkout on sys.path

from rubric_reward import JudgeConfig, Scorer  # noqa: E402
from rubric_reward.testing.judge_server import spawn as spawn_judge  # noqa: E402

def make_items(n: int, words: int = 150) -> list[dict]:
    return [{"id": str(i), "prompt": "Explain how rubric-based rewards work.",
             "response": f"[{i}] " + filler(i, words)} for i in range(n)]


def _start(cmd: list[str], ready: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = proc.stdout.readline()
    if ready not in line:
        proc.kill()
        raise RuntimeError(f"{cmd[2]} did not start: {line!r}")
    return proc, line


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Measure:
    """Wall seconds and CPU seconds of this process and of the given helper processes."""

    def __init__(self, *pids: int):
        self.pids = pids

    def __enter__(self) -> "Measure":
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        self.p0 = [cpu_s(p) for p in self.pids]
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        self.client = time.process_time() - self.c0
        self.helpers = [cpu_s(p) - p0 for p, p0 in zip(self.pids, self.p0, strict=True)]


def start_service(config: dict, folder: Path) -> tuple[subprocess.Popen, str]:
    path = folder / "reward.yaml"
    path.write_text(json.dumps(config))
    proc, line = _start([sys.executable, "-m", "rubric_reward.cli", "serve", "--config", str(path), "--port", "0",
                         "--no-access-log", "--log-level", "warning"], "listening on")
    return proc, line.strip().rsplit(" ", 1)[1]


async def in_process(judge: dict, rubric: dict, items: list[dict], pids: tuple[int, ...]) -> Measure:
    scorer = Scorer(rubric, JudgeConfig(**judge), scoring={"abstention": "zero"})
    await scorer.ascore_batch(items[:8])  # warm the pool
    with Measure(*pids) as m:
        results = await scorer.ascore_batch(items)
    await scorer.aclose()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return m


async def through_service(url: str, items: list[dict], *, batch: int | None, inflight: int,
                          pids: tuple[int, ...] = ()) -> Measure:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=600)) as session:
        async def post(path: str, body: dict) -> dict:
            async with session.post(url + path, json=body) as resp:
                assert resp.status == 200, await resp.text()
                return await resp.json()

        await post("/score", {"items": items[:8]})  # warm the service's judge pool
        m = Measure(*pids).__enter__()
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
        m.__exit__()
    assert ok, "some items came back unscored"
    return m


async def engine_work(judge: dict, rubric: dict, items: list[dict], repeats: int = 5) -> tuple[float, float]:
    """CPU ms per item the service spends outside the grader and HTTP: reading a /score body into
    pairs, and building the answer (JSON in and out included)."""
    from rubric_reward.serve.service import ServiceEngine

    engine = ServiceEngine({"judge": judge, "rubric": rubric, "scoring": {"abstention": "zero"}})
    body = json.dumps({"items": items}).encode()
    pairs, deadline = engine.score_request(json.loads(body))
    results = await engine.score(pairs, deadline_s=deadline)
    t0 = time.process_time()
    for _ in range(repeats):
        engine.score_request(json.loads(body))
    t1 = time.process_time()
    for _ in range(repeats):
        json.dumps({"results": [engine.item_result(r) for r in results]}).encode()
    t2 = time.process_time()
    await engine.aclose()
    per = repeats * len(items) / 1000
    return (t1 - t0) / per, (t2 - t1) / per


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

    rubric, items = rubric_spec(args.criteria), make_items(args.n)
    calls = args.n * args.criteria
    print(f"N = {args.n} items x {args.criteria} criteria = {calls} judge calls, judge concurrency "
          f"{args.concurrency}, batches of {args.batch}, {args.inflight} OpenRLHF requests in flight, "
          f"best of {args.repeats}")
    print("| latency | path | items/s | seconds | ideal s | wall overhead | CPU ms/item: client + service + judge "
          "= total | CPU overhead |")
    print("|---|---|---|---|---|---|---|---|")
    work: list[float] = []
    for latency in args.latency_ms:
        judge_proc, base_url = spawn_judge(latency)
        judge = {"model": "judge", "base_url": base_url, "max_concurrency": args.concurrency,
                 "limit_scope": "process"}
        ideal = math.ceil(calls / args.concurrency) * latency / 1000
        best = lambda runs: min(runs, key=lambda m: m.wall)  # noqa: E731
        try:
            base = best([asyncio.run(in_process(judge, rubric, items, (judge_proc.pid,)))
                         for _ in range(args.repeats)])
            base.helpers = [0.0, *base.helpers]  # no service process
            rows = [("in-process `Scorer.ascore_batch`", base)]
            if latency == args.latency_ms[0]:
                work.extend(asyncio.run(engine_work(judge, rubric, items)))
            with tempfile.TemporaryDirectory() as tmp:
                service, url = start_service({"judge": judge, "rubric": rubric, "deadline_s": 600,
                                              "scoring": {"abstention": "zero"}}, Path(tmp))
                try:
                    for label, kw in ((f"service `/score`, {args.batch} items per request",
                                       {"batch": args.batch, "inflight": 0}),
                                      ("service `/openrlhf`, 1 item per request",
                                       {"batch": None, "inflight": args.inflight})):
                        rows.append((label, best([asyncio.run(through_service(
                            url, items, pids=(service.pid, judge_proc.pid), **kw)) for _ in range(args.repeats)])))
                finally:
                    service.terminate()
                    service.wait(30)
        finally:
            judge_proc.terminate()
            judge_proc.wait(10)
        base_cpu = base.client + sum(base.helpers)
        for label, m in rows:
            cpu = [m.client, *m.helpers]
            total = sum(cpu)
            wall_over = "-" if m is base else f"{(m.wall / base.wall - 1) * 100:+.1f}%"
            cpu_over = "-" if m is base else f"{(total / base_cpu - 1) * 100:+.1f}%"
            parts = " + ".join(f"{c / args.n * 1000:.2f}" for c in cpu)
            print(f"| {latency:g} ms | {label} | {args.n / m.wall:,.0f} | {m.wall:.2f} | {ideal:.2f} | {wall_over} | "
                  f"{parts} = {total / args.n * 1000:.2f} | {cpu_over} |", flush=True)
    print(f"\nservice work outside the grader and HTTP, CPU per item: reading /score bodies {work[0]:.3f} ms, "
          f"building answers {work[1]:.3f} ms")


if __name__ == "__main__":
    main()
