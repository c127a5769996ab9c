"""Judge-client throughput against the scripted loopback server (a benchmark, not a timed test).

For N judge calls (default 2,560 = 256 responses x 10 criteria, 300 words each) at concurrency C
(default 64) and each server latency L (default 0 and 50 ms), it measures calls/s for:

* fast path, full grader: ``Scorer.ascore_batch`` (render, transport, parse, aggregate, score);
* fast path, transport: ``Judge.complete`` on pre-rendered requests;
* bare aiohttp: the same bodies posted with aiohttp under a semaphore of C (the HTTP floor);
* litellm path: ``Judge.complete`` with the litellm backend (``hosted_vllm/``), and bare
  ``litellm.acompletion`` with the same arguments under a semaphore of C, in the same run;

and prints them with the ideal time ceil(N / C) x L and each path's ratio to it. It also reports the
shared-prefix fraction of one response's criterion calls (a tokenizer-free proxy: the longest
common prefix of the rendered messages over their mean length, in characters and in whitespace
tokens) and the wall time of ``python -c "import rubric_reward"``.

The server runs in a separate process (``python -m rubric_reward.testing.judge_server``) so that
it does not share the client's GIL. Usage::

    python benchmarks/judge_throughput.py [--n 2560] [--concurrency 64] [--latency-ms 0 50]
                                          [--repeats 2] [--no-litellm] [--profile out.prof]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _bench import ROOT, filler, rubric_spec  # first: puts this checkout on sys.path

from rubric_reward import Scorer  # noqa: E402
from rubric_reward.items import Item  # noqa: E402
from rubric_reward.judges import ChatRequest, Judge, JudgeConfig  # noqa: E402
from rubric_reward.grading.criterion_prompt import render_call  # noqa: E402
from rubric_reward.rubric import Rubric  # noqa: E402
from rubric_reward.testing.judge_server import spawn as spawn_judge  # noqa: E402

def make_rubric(n_criteria: int) -> Rubric:
    return Rubric.from_obj(rubric_spec(n_criteria, "The response addresses aspect {i} of the task completely, "
                                                   "with a concrete example and no unsupported claims."))


def make_items(n: int, words: int) -> list[dict]:
    out = []
    for i in range(n):
        body = filler(i, words)
        out.append({"prompt": "Explain how rubric-based rewards work, with an example.", "response": f"[{i}] {body}"})
    return out


def prefix_share(rubric: Rubric, item: dict) -> tuple[float, float]:
    """Shared-prefix fraction of one response's criterion calls: (characters, whitespace tokens)."""
    calls = [render_call(rubric, Item(item["response"], item["prompt"]), [c]) for c in rubric.criteria]
    texts = ["\n".join(m["content"] for m in call.messages) for call in calls]
    chars = len(os.path.commonprefix(texts)) / statistics.mean(len(t) for t in texts)
    tokens = [t.split() for t in texts]
    common = 0
    for column in zip(*tokens, strict=False):
        if len(set(column)) != 1:
            break
        common += 1
    return chars, common / statistics.mean(len(t) for t in tokens)


def rendered_requests(rubric: Rubric, items: list[dict], n: int) -> list[ChatRequest]:
    out = []
    for it in items:
        for c in rubric.criteria:
            call = render_call(rubric, Item(it["response"], it["prompt"]), [c], judge="judge")
            out.append(ChatRequest(call.messages, schema=call.schema))
            if len(out) == n:
                return out
    return out


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system) the server process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SERVER_PID: int | None = None


class Timed:
    """Wall, client-CPU and server-CPU seconds of one measured run."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        self.server = server_cpu(SERVER_PID) if SERVER_PID else 0.0
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        self.server = (server_cpu(SERVER_PID) if SERVER_PID else 0.0) - self.server


async def run_grader(url: str, rubric: Rubric, items: list[dict], c: int) -> Timed:
    scorer = Scorer(rubric, JudgeConfig(model="judge", base_url=url, max_concurrency=c, limit_scope="process"))
    await scorer.ascore_batch(items[:8])  # warm the connection pool
    with Timed() as elapsed:
        results = await scorer.ascore_batch(items)
    await scorer.aclose()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return elapsed


async def run_judge(config: JudgeConfig, requests: list[ChatRequest]) -> Timed:
    judge = Judge(config, dedupe=False)
    await asyncio.gather(*(judge.complete(r) for r in requests[:8]))
    with Timed() as elapsed:
        replies = await asyncio.gather(*(judge.complete(r) for r in requests))
    await judge.aclose()
    assert all(r.ok for r in replies), [r.error for r in replies if not r.ok][:3]
    return elapsed


async def run_bare_aiohttp(url: str, requests: list[ChatRequest], c: int) -> Timed:
    """The floor: pre-serialised bodies posted with aiohttp under a semaphore, answers only read."""
    import json

    import aiohttp

    bodies = [json.dumps({"model": "judge", "messages": r.messages, "temperature": 0.0, "max_tokens": 512}).encode()
              for r in requests]
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                    headers={"Content-Type": "application/json"})
    sem = asyncio.Semaphore(c)

    async def one(body: bytes) -> bytes:
        async with sem, session.post(f"{url}/chat/completions", data=body) as resp:
            return await resp.read()

    await asyncio.gather(*(one(b) for b in bodies[:8]))
    with Timed() as elapsed:
        await asyncio.gather(*(one(b) for b in bodies))
    await session.close()
    return elapsed


async def run_bare_litellm(url: str, requests: list[ChatRequest], c: int) -> Timed:
    from rubric_reward.judges.litellm_backend import import_litellm

    litellm = import_litellm()
    sem = asyncio.Semaphore(c)

    async def one(r: ChatRequest):
        async with sem:
            return await litellm.acompletion(
                model="hosted_vllm/judge", messages=list(r.messages), api_base=url, temperature=0.0, max_tokens=512,
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "verdict", "schema": r.schema, "strict": True}},
                num_retries=0, max_retries=0, timeout=60,
            )

    await asyncio.gather(*(one(r) for r in requests[:8]))
    with Timed() as elapsed:
        await asyncio.gather(*(one(r) for r in requests))
    return elapsed


def best(fn, repeats: int) -> Timed:
    return min((fn() for _ in range(repeats)), key=lambda t: t.wall)


def import_time(repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import rubric_reward"], check=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2560)
    ap.add_argument("--criteria", type=int, default=10)
    ap.add_argument("--words", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 50.0])
    ap.add_argument("--repeats", type=int, default=2, help="best of this many runs per row")
    ap.add_argument("--no-litellm", action="store_true")
    ap.add_argument("--profile", help="write a cProfile of the grader run at the first latency here")
    args = ap.parse_args(argv)

    n, c = args.n, args.concurrency
    rubric = make_rubric(args.criteria)
    items = make_items(math.ceil(n / args.criteria), args.words)
    requests = rendered_requests(rubric, items, n)
    n_grader = len(items) * args.criteria
    share_chars, share_tokens = prefix_share(rubric, items[0])

    global SERVER_PID
    rows = []
    for latency in args.latency_ms:
        proc, url = spawn_judge(latency)
        SERVER_PID = proc.pid
        try:
            ideal = math.ceil(n / c) * latency / 1000
            fast = JudgeConfig(model="judge", base_url=url, max_concurrency=c, limit_scope="process")
            slow = JudgeConfig(model="hosted_vllm/judge", backend="litellm", base_url=url, max_concurrency=c,
                               limit_scope="process")
            if args.profile and latency == args.latency_ms[0]:
                import cProfile

                cProfile.runctx("asyncio.run(run_grader(url, rubric, items, c))", globals(), locals(), args.profile)
            measured = [
                ("fast path, full grader", n_grader, best(lambda: asyncio.run(run_grader(url, rubric, items, c)),
                                                          args.repeats)),
                ("fast path, transport", n, best(lambda: asyncio.run(run_judge(fast, requests)), args.repeats)),
                ("bare aiohttp (floor)", n, best(lambda: asyncio.run(run_bare_aiohttp(url, requests, c)),
                                                 args.repeats)),
            ]
            if not args.no_litellm:
                measured.append(("litellm path (ours)", n, best(lambda: asyncio.run(run_judge(slow, requests)),
                                                               args.repeats)))
                measured.append(("bare litellm.acompletion", n,
                                 best(lambda: asyncio.run(run_bare_litellm(url, requests, c)), args.repeats)))
            for name, calls, t in measured:
                rows.append((latency, name, calls, t.wall, calls / t.wall, ideal, t.cpu / calls * 1000,
                             t.server / calls * 1000))
        finally:
            proc.terminate()
            proc.wait(10)

    print(f"\nN = {n} calls ({n_grader} through the grader), concurrency {c}, best of {args.repeats}, "
          f"{os.cpu_count()} CPUs\n")
    print("| latency | path | calls | seconds | calls/s | ideal s | ratio to ideal | client CPU ms/call "
          "| server CPU ms/call |")
    print("|---|---|---|---|---|---|---|---|---|")
    for latency, name, calls, elapsed, rate, ideal, cpu, server in rows:
        ratio = f"{elapsed / ideal:.2f}x" if ideal else "-"
        print(f"| {latency:g} ms | {name} | {calls} | {elapsed:.2f} | {rate:,.0f} | {ideal:.2f} | {ratio} "
              f"| {cpu:.3f} | {server:.3f} |")
    by = {(r[0], r[1]): r[4] for r in rows}
    for latency in args.latency_ms:
        bare = by[(latency, "bare aiohttp (floor)")]
        grader = by[(latency, "fast path, full grader")]
        print(f"\nat {latency:g} ms, calls/s over bare aiohttp: full grader {grader / bare:.2f}x, "
              f"transport {by[(latency, 'fast path, transport')] / bare:.2f}x")
        ours, bare = by.get((latency, "litellm path (ours)")), by.get((latency, "bare litellm.acompletion"))
        if ours and bare:
            print(f"\nlitellm path / bare litellm at {latency:g} ms: {ours / bare:.2f}x")
    print(f"\nshared prefix of one response's {args.criteria} criterion calls ({args.words} words): "
          f"{share_chars:.3f} of characters, {share_tokens:.3f} of whitespace tokens")
    print(f"python -c 'import rubric_reward': {import_time():.2f} s (best of 3, interpreter start included)")


if __name__ == "__main__":
    main()
