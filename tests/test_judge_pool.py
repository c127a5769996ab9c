"""Judge pools and one cap across processes: prefix-affinity routing over several base URLs (deterministic,
bounded load, spills counted, a replica down and back), the machine-wide cap (processes that are not
accelerate ranks, a process killed while holding slots, verl's Ray reward workers), a router as the base
URL, and the pool figures on the service's /metrics."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from rubric_reward import Scorer
from rubric_reward.judges import ChatRequest, Judge, JudgeConfig
from rubric_reward.judges import limits as limits_mod
from rubric_reward.judges.limits import _FileSlots, endpoint_limiter
from rubric_reward.judges.replicas import Replicas, affinity_hash
from rubric_reward.testing.judge_server import Fault, FaultPlan, JudgeServer

try:  # tests/ may or may not be a package
    from ._clients_fixtures import ask, fresh_limiters, items, rubric, run  # noqa: F401
except ImportError:
    from _clients_fixtures import ask, fresh_limiters, items, rubric, run  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
FAST = dict(backoff_base_s=0.01, backoff_max_s=0.2)


def cfg(url, **kw) -> JudgeConfig:
    return JudgeConfig(**{"model": "judge", "base_url": url, **FAST, **kw})


def request(i: int | str, criterion: str = "c0") -> ChatRequest:
    shared = f"## Response to judge\n```response\nresponse #{i}\n```\n\n"
    return ChatRequest(({"role": "user", "content": shared + f"## Criterion\n### {criterion}\nBe good.\n"},),
                       affinity=shared)


def routes(servers) -> dict[int, set[int]]:
    """Response number -> the servers (by index) that saw a call about it."""
    out: dict[int, set[int]] = defaultdict(set)
    for k, s in enumerate(servers):
        for body in s.bodies:
            out[int(re.search(r"#(\d+)", body["messages"][-1]["content"]).group(1))].add(k)
    return out


# ---------------------------------------------------------------------------- routing
def test_a_responses_calls_stay_on_one_replica_and_route_the_same_way_every_run():
    with JudgeServer(latency_s=0.005) as a, JudgeServer(latency_s=0.005) as b, JudgeServer(latency_s=0.005) as c:
        servers = [a, b, c]
        urls = [s.base_url for s in servers]
        seen = []
        for order, factor in ((urls, 100.0), (urls[::-1], 100.0), (urls, 1.25)):
            for s in servers:
                s.reset_stats()
            limits_mod._REGISTRY.clear()
            with Scorer(rubric(6), cfg(order, max_concurrency=32, replica_load_factor=factor)) as scorer:
                results = scorer.score_batch(items(48))
                stats = scorer.grader.judges[0].pool_stats()["replicas"]
            assert all(r.ok for r in results)
            where = routes(servers)
            assert len(where) == 48 and all(len(v) == 1 for v in where.values())  # every response on one replica
            assert sum(r["calls"] for r in stats) == 48 * 6
            seen.append((where, stats))
        (first, stats), (again, _), (bounded, bstats) = seen
        assert first == again  # the same request set routes the same way, whatever the order of the URLs
        assert all(r["spills"] == 0 and r["affinity_share"] == 1.0 for r in stats)
        assert min(len(a.bodies), len(b.bodies), len(c.bodies)) > 0
        # under the default bound, a spilled response moves whole: its calls still share one replica
        spilled = sum(r["spills"] for r in bstats)
        assert sum(r["affine"] for r in bstats) + spilled == 48 * 6


def test_a_key_spills_to_its_next_replica_only_over_the_load_bound():
    pool = Replicas(["http://a", "http://b", "http://c"], load_factor=1.0)
    keys = [h for h in range(5000) if pool.ranking(h)[0] == 0][:9]
    got = [run(pool.acquire(None, h)) for h in keys]  # held: nine new keys that all prefer replica 0
    stats = pool.stats()
    assert got[0] == 0 and got.count(0) < 9
    assert stats[1]["spills"] + stats[2]["spills"] == 9 - got.count(0) and stats[0]["spills"] == 0
    assert max(s["in_flight"] for s in stats) - min(s["in_flight"] for s in stats) <= 1  # bound 1 x mean
    assert run(pool.acquire(None, keys[0])) == 0  # a placed key's next call follows it, over the bound too
    for i, h in zip([*got, 0], [*keys, keys[0]], strict=True):
        pool.release(i, True, h)
    assert [run(pool.acquire(None, h)) for h in keys[:1]] == [0]  # idle again: the first choice
    # rendezvous order depends on the URLs, not on the order they are listed in
    other = Replicas(["http://c", "http://a", "http://b"])
    assert all(other.urls[other.ranking(h)[0]] == pool.urls[pool.ranking(h)[0]] for h in range(500))


def test_a_replica_down_fails_over_and_rejoins_when_back():
    with JudgeServer() as good, JudgeServer(faults=FaultPlan(rate=1.0, kinds=(Fault(status=500),))) as bad:
        judge = Judge(cfg([good.base_url, bad.base_url], max_concurrency=1, breaker_failures=2,
                          breaker_cooldown_s=0.3))
        pool = judge.backend.replicas
        reqs = [request(i) for i in range(30)]
        prefer_bad = [r for r in reqs if pool.ranking(affinity_hash(r))[0] == 1]
        assert 5 <= len(prefer_bad) <= 25

        async def go(rs):
            try:
                return [await judge.complete(r) for r in rs]
            finally:
                await judge.aclose()

        assert all(r.ok for r in run(go(reqs)))
        assert bad.requests == 2 and pool.is_open(1)  # two failures open the breaker
        assert pool.stats()[0]["failovers"] >= len(prefer_bad) - 1
        time.sleep(0.35)
        bad.faults = FaultPlan()  # back
        bad.reset_stats()
        good.reset_stats()
        again = [request(f"{i}", "c1") for i in range(30)]  # the same responses, another criterion
        assert all(r.ok for r in run(go(again)))
        assert bad.requests == len(prefer_bad) and good.requests == 30 - len(prefer_bad)  # its keys came back


def test_a_replica_that_answers_prose_with_200_is_routed_around_and_its_re_asks_go_elsewhere():
    prose = FaultPlan(rate=1.0, kinds=(Fault(content="Looks fine to me overall, nicely written."),))
    with JudgeServer() as a, JudgeServer() as b, JudgeServer(faults=prose) as bad:
        config = cfg([a.base_url, b.base_url, bad.base_url], max_concurrency=4, breaker_failures=3,
                     breaker_cooldown_s=30)
        with Scorer(rubric(2), config) as scorer:
            results = scorer.score_batch(items(60))
            stats = scorer.grader.judges[0].pool_stats()["replicas"]
        assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
        # every call the bad replica answered was refused and re-asked on another one; it stops getting calls
        # once three refusals in a row open its breaker (a few more may be in flight by then)
        assert 3 <= bad.requests <= 3 + 4 and stats[2]["refused"] == bad.requests and stats[2]["open"]
        assert a.requests + b.requests == 120  # 120 - bad.requests first asks, bad.requests re-asks
        assert stats[0]["failovers"] + stats[1]["failovers"] >= bad.requests


def test_an_unusable_answer_sends_the_key_s_next_call_to_another_replica():
    pool = Replicas(["http://a", "http://b", "http://c"], failures=3)
    h = next(h for h in range(5000) if pool.ranking(h)[0] == 0)
    assert run(pool.acquire(None, h)) == 0
    pool.release(0, True, h, refused=True)  # the answer was a 200 the caller could not use
    again = run(pool.acquire(None, h))
    assert again == pool.ranking(h)[1] and pool.stats()[again]["failovers"] == 1
    assert run(pool.acquire(None, h)) == again  # the key's later calls follow it there
    stats = pool.stats()[0]
    assert stats["refused"] == 1 and not stats["open"]  # one refusal: a failure, not yet an open breaker
    other = next(k for k in range(5000) if k != h and pool.ranking(k)[0] == 0)
    assert run(pool.acquire(None, other)) == 0  # other keys still prefer it


def test_single_url_pools_are_untouched_and_group_calls_share_a_task_key():
    from rubric_reward.grading.group_prompt import render_group_call

    rub = rubric(2)
    orders = [tuple(o.label for o in c.options) for c in rub.criteria]
    one = render_group_call(rub, "Task A", [("r1", "x"), ("r2", "y")], rub.criteria[:1], orders[:1])
    two = render_group_call(rub, "Task A", [("r3", "z")], rub.criteria[1:], orders[1:])
    other = render_group_call(rub, "Task B", [("r1", "x")], rub.criteria[:1], orders[:1])
    assert one.affinity == two.affinity != other.affinity


# ---------------------------------------------------------------------------- one cap across processes
WORKER = """
import asyncio, sys
from rubric_reward.judges import ChatRequest, Judge, JudgeConfig
url, conc, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
judge = Judge(JudgeConfig(model="judge", base_url=url, max_concurrency=conc))  # limit_scope: auto
async def main():
    replies = await asyncio.gather(*(judge.complete(ChatRequest(({"role": "user", "content": f"{tag} {i}"},)))
                                     for i in range(30)))
    assert all(r.ok for r in replies), [r.error for r in replies if not r.ok][:3]
    await judge.aclose()
print("READY", flush=True)
sys.stdin.readline()
asyncio.run(main())
"""


def test_processes_that_are_not_ranks_share_one_cap(tmp_path):
    """A process pool, several services, Ray workers: no WORLD_SIZE, one machine-wide cap all the same."""
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK")}
    env.update(PYTHONPATH=str(ROOT), RUBRIC_REWARD_LIMIT_DIR=str(tmp_path / "limits"))
    with JudgeServer(latency_s=0.03, record_bodies=False) as srv:
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, srv.base_url, "5", f"w{k}"], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for k in range(4)]
        for p in procs:
            assert p.stdout.readline().strip() == "READY", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            _, err = p.communicate(timeout=90)
            assert p.returncode == 0, err
        assert srv.requests == 120
        print(f"4 processes, cap 5: peak {srv.max_in_flight} in flight")
        assert srv.max_in_flight <= 5  # 4 processes x max_concurrency 5 would be 20 without the shared cap


HOLDER = """
import sys, time
from pathlib import Path
from rubric_reward.judges.limits import _FileSlots
slots = _FileSlots(4, Path(sys.argv[1]))
assert all(slots.try_acquire() for _ in range(4))
print("HELD", flush=True)
time.sleep(60)
"""


def test_a_killed_process_gives_its_slots_back(tmp_path):
    folder = tmp_path / "limits"
    folder.mkdir(mode=0o700)  # a private folder (a 0755 one would fall back per process)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "HELD"
        slots = _FileSlots(4, folder)
        assert not slots.try_acquire()

        async def wait_for_one():
            return await slots.acquire(timeout=5)

        async def scenario():
            waiter = asyncio.ensure_future(wait_for_one())
            await asyncio.sleep(0.05)
            assert not waiter.done()
            os.kill(holder.pid, signal.SIGKILL)  # dies holding every slot: the kernel drops its locks
            return await waiter

        assert run(scenario())
        assert sum(slots.try_acquire() for _ in range(4)) == 3 and slots.in_use == 4
    finally:
        holder.kill()
        holder.wait()


def test_slots_go_to_this_process_s_waiters_first_and_never_leak_on_timeout(tmp_path):
    slots = _FileSlots(2, tmp_path)

    async def scenario():
        assert slots.try_acquire() and slots.try_acquire()
        assert not await slots.acquire(timeout=0.02)  # timed out: nothing taken
        waiter = asyncio.ensure_future(slots.acquire(timeout=5))
        await asyncio.sleep(0.01)
        slots.release()  # handed to the waiter, without unlocking the file
        assert await waiter and slots.in_use == 2
        slots.release()
        slots.release()
        assert slots.in_use == 0

    run(scenario())
    other = _FileSlots(2, tmp_path)  # another limiter on the same folder (another process's view)
    assert other.try_acquire() and other.try_acquire() and not other.try_acquire()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ray_reward_workers_hold_one_cap(tmp_path):
    """verl's reward workers are Ray actors on a node: 4 of them, one judge cap of 4 between them."""
    ray = pytest.importorskip("ray")
    rub = {"name": "pool", "criteria": [{"name": f"c{i}", "requirement": f"Requirement {i}."} for i in range(3)]}
    with JudgeServer(latency_s=0.05, record_bodies=False) as srv:
        config = tmp_path / "reward.yaml"
        config.write_text(yaml.safe_dump({"judge": {"model": "judge", "base_url": srv.base_url, "max_concurrency": 4},
                                          "rubric": rub, "deadline_s": 60}))
        env = {"PYTHONPATH": str(ROOT), "RUBRIC_REWARD_LIMIT_DIR": str(tmp_path / "limits"), "OMP_NUM_THREADS": "1"}
        ray.init(num_cpus=2, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": env})
        try:
            @ray.remote(num_cpus=0.25)
            class RewardWorker:
                async def score(self, tag: str, n: int) -> list[float]:
                    from rubric_reward.integrations.verl import compute_score_async

                    out = await asyncio.gather(*(compute_score_async("d", f"answer {tag} {i}", None,
                                                                     {"prompt": "Say something."},
                                                                     config=str(config)) for i in range(n)))
                    return [o["score"] for o in out]

            workers = [RewardWorker.remote() for _ in range(4)]
            scores = ray.get([w.score.remote(f"w{k}", 10) for k, w in enumerate(workers)], timeout=240)
        finally:
            ray.shutdown()
        assert [len(s) for s in scores] == [10] * 4 and all(x == 1.0 for s in scores for x in s)
        assert srv.requests == 4 * 10 * 3
        print(f"4 Ray reward workers, cap 4: peak {srv.max_in_flight} in flight")
        assert srv.max_in_flight <= 4, srv.max_in_flight  # 4 workers x 4 would be 16 without one cap


def test_auto_scope_uses_lock_files_only_for_remote_judges():
    assert endpoint_limiter(cfg("http://127.0.0.1:9/v1")).directory is not None
    assert endpoint_limiter(JudgeConfig(model="Qwen/Qwen3-0.6B", backend="transformers")).directory is None


# ---------------------------------------------------------------------------- a router as the base URL
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(120)
def test_a_router_base_url_gives_the_same_rewards():
    router_bin = shutil.which("vllm-router") or (str(Path(sys.executable).parent / "vllm-router")
                                                 if (Path(sys.executable).parent / "vllm-router").exists() else None)
    if router_bin is None:
        pytest.skip("vllm-router is not installed (pip install vllm-router)")
    script = {"c0": lambda r, b: "MET" if "even" in r else "UNMET", "c1": "MET", "c2": "UNMET"}
    from rubric_reward.testing.judge_server import ScriptedJudge

    data = [{"prompt": "Say a number.", "response": f"{i} is {'even' if i % 2 == 0 else 'odd'}"} for i in range(24)]
    with JudgeServer(ScriptedJudge(script)) as a, JudgeServer(ScriptedJudge(script)) as b:
        port = _free_port()
        workers = [s.base_url.removesuffix("/v1") for s in (a, b)]
        proc = subprocess.Popen([router_bin, "--host", "127.0.0.1", "--port", str(port), "--worker-urls", *workers,
                                 "--policy", "cache_aware"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        pytest.fail(f"vllm-router did not start: {proc.stderr.read1(2000) if proc.poll() else ''}")
                    time.sleep(0.2)
            with Scorer(rubric(3), cfg(a.base_url)) as direct:
                want = [r.score for r in direct.score_batch(data)]
            a.reset_stats()
            with Scorer(rubric(3), cfg(f"http://127.0.0.1:{port}/v1")) as routed:
                got = routed.score_batch(data)
        finally:
            proc.terminate()
            proc.wait(10)
    assert all(r.ok for r in got) and [r.score for r in got] == want
    assert a.requests + b.requests == 24 * 3


# ---------------------------------------------------------------------------- /metrics
def test_metrics_report_the_cap_and_each_replica():
    from rubric_reward.serve.prometheus import ServeMetrics

    with JudgeServer() as a, JudgeServer() as b:
        judge = Judge(cfg([a.base_url, b.base_url], max_concurrency=8))
        ask(judge, *(request(i, c) for i in range(10) for c in ("c0", "c1")))
        metrics = ServeMetrics()
        metrics.watch_pools(lambda: [judge.pool_stats()])
        text = metrics.render()[0].decode()
    assert 'rubric_reward_judge_cap{judge="judge",shared="1"} 8.0' in text
    calls = re.findall(r'rubric_reward_judge_replica_calls_total\{judge="judge",url="[^"]+"\} (\S+)', text)
    assert sum(float(x) for x in calls) == 20
    assert "rubric_reward_judge_replica_spills_total" in text and "rubric_reward_judge_replica_affinity_share" in text
