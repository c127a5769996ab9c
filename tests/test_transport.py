"""The judge transport against the scripted loopback server: faults, retries, limits, dedupe,
deadlines, replicas, secrets. Timings are generous: the machine is small and shared."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
from email.utils import formatdate
from pathlib import Path

import pytest

from rubric_reward import Scorer
from rubric_reward.grading.grader import GradingConfig
from rubric_reward.judges import ChatReply, ChatRequest, Judge, JudgeConfig, load_judges
from rubric_reward.judges import limits as limits_mod
from rubric_reward.judges.limits import Rate, Slots, endpoint_limiter
from rubric_reward.judges.retry import RetryPolicy, parse_retry_after
from rubric_reward.judges.transport import request_key
from rubric_reward.results import ErrorKind
from rubric_reward.testing.judge_server import Fault, FaultPlan, JudgeServer, ScriptedJudge

try:  # tests/ may or may not be a package
    from ._clients_fixtures import SENTINEL_KEY, ask, fresh_limiters, items, rubric, run, sentinel_env, server  # noqa: F401
except ImportError:
    from _clients_fixtures import SENTINEL_KEY, ask, fresh_limiters, items, rubric, run, sentinel_env, server  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
FAST = dict(backoff_base_s=0.01, backoff_max_s=0.2)


def request(i: int | str = 0, criterion: str = "c0") -> ChatRequest:
    text = f"## Response to judge\nx\n```response\nresponse {i}\n```\n\n## Criterion\n### {criterion}\nBe good.\n"
    return ChatRequest(({"role": "user", "content": text},))


def cfg(url: str, **kw) -> JudgeConfig:
    return JudgeConfig(**{"model": "judge", "base_url": url, **FAST, **kw})



# ---------------------------------------------------------------------------- faults
FAULTS = (
    Fault(status=429, retry_after=0.01), Fault(status=500), Fault(status=503), Fault(hang_s=1.5),
    Fault(body="{not json"), Fault(body='{"choices": []}'), Fault(content="I refuse to answer in JSON."),
)
INJECTED_KINDS = {ErrorKind.RATE_LIMIT, ErrorKind.SERVER, ErrorKind.TIMEOUT, ErrorKind.PARSE}


def test_thirty_percent_faults_give_exact_scores_or_explicit_failures():
    script = ScriptedJudge({"c0": "MET", "c1": "UNMET", "c2": "MET"})
    data = items(200)
    with JudgeServer(script) as srv:
        with Scorer(rubric(3), cfg(srv.base_url, max_concurrency=32)) as s:
            clean = s.score_batch(data)
    assert all(r.score == pytest.approx(2 / 3) for r in clean)

    max_retries = 2
    with JudgeServer(script, faults=FaultPlan(rate=0.3, kinds=FAULTS, seed=7)) as srv:
        judge = cfg(srv.base_url, max_concurrency=32, timeout_s=0.5, max_retries=max_retries)
        start = time.monotonic()
        with Scorer(rubric(3), judge) as s:
            noisy = s.score_batch(data)
        elapsed = time.monotonic() - start
        served = srv.requests
    assert elapsed < 20
    unscored = 0
    for fault_free, r in zip(clean, noisy, strict=True):
        if r.score is None:
            unscored += 1
            failed = [v for v in r.verdicts if v.error is not None]
            assert failed and r.error
            assert {v.error.kind for v in failed} <= INJECTED_KINDS
            assert all(v.value is None and not v.abstained for v in failed)
        else:
            assert r.score == fault_free.score
            assert [v.label for v in r.verdicts] == [v.label for v in fault_free.verdicts]
    assert unscored > 0  # with 2 retries some calls do run out of attempts (else the test proves little)
    calls = [c for r in noisy for c in r.calls]
    bound = (1 + max_retries) * 2  # a re-ask after an unparseable answer is a second logical request
    assert max(c.attempts for c in calls) <= bound
    assert served <= sum(c.attempts for c in calls)  # every request the server saw was counted


def test_request_count_is_exact_without_timeouts():
    faults = FaultPlan(rate=0.3, kinds=(Fault(status=429, retry_after=0), Fault(status=500),
                                        Fault(body="{not json")), seed=3)
    with JudgeServer(faults=faults) as srv:
        with Scorer(rubric(2), cfg(srv.base_url, max_retries=4, max_concurrency=16)) as s:
            results = s.score_batch(items(60))
        attempts = sum(c.attempts for r in results for c in r.calls)
        assert srv.requests == attempts
    assert all(c.attempts <= 5 for r in results for c in r.calls)


def test_retries_are_bounded_and_only_for_retryable_errors(server):
    server.faults = FaultPlan(rate=1.0, kinds=(Fault(status=500),))
    judge = Judge(cfg(server.base_url, max_retries=3))
    reply = ask(judge, request())[0]
    assert reply.error.kind is ErrorKind.SERVER and reply.attempts == 4 and server.requests == 4
    assert "gave up after 4 attempts" in reply.error.message

    server.reset_stats()
    server.faults = FaultPlan(rate=1.0, kinds=(Fault(status=400),))
    reply = ask(judge, request(1))[0]
    assert reply.error.kind is ErrorKind.CLIENT and reply.attempts == 1 and server.requests == 1


def test_retry_after_is_honoured(server):
    server.faults = FaultPlan(fixed={1: Fault(status=429, retry_after=0.4)})
    [reply] = ask(Judge(cfg(server.base_url, backoff_max_s=1)), request())
    assert reply.ok and reply.attempts == 2
    gap = server.arrivals[1] - server.arrivals[0]
    assert gap >= 0.4


def test_retry_after_http_date_is_honoured(server):
    when = formatdate(time.time() + 2, usegmt=True)  # second resolution: waits 1-2 s
    server.faults = FaultPlan(fixed={1: Fault(status=429, retry_after=when)})
    reply = ask(Judge(cfg(server.base_url, backoff_max_s=5)), request())[0]
    assert reply.ok and reply.attempts == 2
    assert server.arrivals[1] - server.arrivals[0] >= 0.9


def test_retry_after_longer_than_the_cap_ends_retries(server):
    server.faults = FaultPlan(fixed={1: Fault(status=429, retry_after=120)})
    reply = ask(Judge(cfg(server.base_url, backoff_max_s=1)), request())[0]
    assert reply.error.kind is ErrorKind.RATE_LIMIT and reply.attempts == 1
    assert "Retry-After" in reply.error.message


def test_retry_policy_and_header_parsing():
    policy = RetryPolicy(max_retries=5, base_s=1.0, max_s=8.0)
    for n, step in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)):
        d = policy.delay(n)
        assert step / 2 <= d <= step
    assert 3.0 <= policy.delay(1, retry_after_s=3.0) <= 3.0 + 1.0
    assert policy.delay(1, retry_after_s=9.0) is None
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after(formatdate(time.time() - 10, usegmt=True)) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


# ---------------------------------------------------------------------------- limits
def test_max_concurrency_is_observed_at_the_server():
    with JudgeServer(latency_s=0.02) as srv:
        judge = Judge(cfg(srv.base_url, max_concurrency=5))
        replies = ask(judge, *(request(i) for i in range(60)))
        assert all(r.ok for r in replies)
        assert 3 <= srv.max_in_flight <= 5


def test_limits_are_shared_per_endpoint_across_judges_and_event_loops():
    with JudgeServer(latency_s=0.02) as srv:
        a = Judge(cfg(srv.base_url, max_concurrency=4, name="a"))
        b = Judge(cfg(srv.base_url, max_concurrency=4, name="b", temperature=0.5))
        assert a.transport.limiter is b.transport.limiter

        def worker(judge: Judge, tag: str) -> None:
            async def go():
                replies = await asyncio.gather(*(judge.complete(request(f"{tag}{i}")) for i in range(40)))
                assert all(r.ok for r in replies)
                await judge.aclose()

            asyncio.run(go())  # each thread runs its own event loop

        threads = [threading.Thread(target=worker, args=(j, t)) for j, t in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert srv.requests == 80
        assert srv.max_in_flight <= 4


def test_endpoint_key_is_base_url_and_model():
    base = cfg("http://127.0.0.1:9/v1")
    assert endpoint_limiter(base) is endpoint_limiter(cfg("http://127.0.0.1:9/v1", temperature=1.0))
    assert endpoint_limiter(base) is endpoint_limiter(cfg("http://127.0.0.1:9/v1", model="hosted_vllm/judge"))
    assert endpoint_limiter(base) is not endpoint_limiter(cfg("http://127.0.0.1:9/v1", model="other"))
    assert endpoint_limiter(base) is not endpoint_limiter(cfg("http://127.0.0.1:10/v1"))
    assert endpoint_limiter(JudgeConfig("openai/gpt-a")) is not endpoint_limiter(JudgeConfig("openai/gpt-b"))
    # the strictest limits given for one endpoint (by judges alive together) apply
    loose = endpoint_limiter(base)
    strict = endpoint_limiter(cfg("http://127.0.0.1:9/v1", max_concurrency=3, rpm=100))
    assert strict is loose and loose.slots.capacity == 3 and loose.rpm.per_minute == 100


def _max_in_window(times: list[float], window: float, weights: list[float] | None = None) -> float:
    weights = weights or [1.0] * len(times)
    pairs = sorted(zip(times, weights, strict=True))
    best, j, acc = 0.0, 0, 0.0
    for i in range(len(pairs)):
        acc += pairs[i][1]
        while pairs[i][0] - pairs[j][0] >= window:
            acc -= pairs[j][1]
            j += 1
        best = max(best, acc)
    return best


def test_rpm_is_observed_at_the_server(server):
    rpm, n = 1200, 60
    judge = Judge(cfg(server.base_url, rpm=rpm))
    rate = judge.transport.limiter.rpm
    burst = int(rpm // 60)
    assert all(r.ok for r in ask(judge, *(request(i) for i in range(n))))
    span = max(server.arrivals) - min(server.arrivals)
    assert span >= (n - burst) * rate.interval - 0.3  # less 0.3 s: the burst's arrivals straggle in
    # the 60 s guarantee, scaled: any 2 s window holds at most ceil(2 / T60) + burst - 1 sends (T60 = 60 s
    # / (rpm - burst + 1), the pacing without its 1 s slack; +4 for the
    # jitter between a send and its arrival, which a 60 s window would not notice; the exact bound is
    # checked on a fake clock in test_rate_pacing_never_exceeds_rpm_in_any_minute)
    assert _max_in_window(server.arrivals, 2.0) <= math.ceil(2.0 * (rpm - burst + 1) / 60) + burst + 3


def test_tpm_is_observed_at_the_server_with_the_servers_own_token_counts():
    tpm = 60_000  # 1,000 tokens/s, burst 1,000
    with JudgeServer(count_tokens=lambda body: 150) as srv:  # the server's tokenizer, not our estimate
        judge = Judge(cfg(srv.base_url, tpm=tpm, max_tokens=200))  # estimates exceed the actual counts
        assert all(r.ok for r in ask(judge, *(request(i) for i in range(14))))
        times = [t for t, _ in srv.tokens]
        counts = [float(k) for _, k in srv.tokens]
        total = sum(counts)
    span = max(times) - min(times)
    assert span >= (total - 2 * 1000) / 1000 * 0.9  # paced at ~1,000 tokens/s after the burst
    assert _max_in_window(times, 1.0, counts) <= 1000 + 1000 + 400  # rate + burst + one estimate


def test_rate_pacing_never_exceeds_rpm_in_any_minute(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(limits_mod, "_now", lambda: clock[0])
    for per_minute in (1, 7, 59, 60, 61, 600, 1500):
        rate = Rate(per_minute)
        times = []
        for _ in range(3 * per_minute + 5):
            wait = rate.reserve(1)
            times.append(clock[0] + wait)
            clock[0] += wait * 0.5  # callers arrive faster than they are served
        assert _max_in_window(times, 60.0) <= per_minute, per_minute


def test_slots_do_not_leak_on_cancel_or_timeout():
    slots = Slots(1)

    async def go():
        assert await slots.acquire()
        assert not await slots.acquire(timeout=0.05)
        waiter = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0.01)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        slots.release()
        assert slots.in_use == 0
        assert await slots.acquire(timeout=0.05)
        slots.release()

    run(go())
    assert slots.in_use == 0


def test_429_with_retry_after_pauses_the_endpoint(server):
    server.faults = FaultPlan(fixed={1: Fault(status=429, retry_after=0.5)})
    judge = Judge(cfg(server.base_url, max_concurrency=1, backoff_max_s=1))

    async def go():
        first = asyncio.ensure_future(judge.complete(request(0)))
        await asyncio.sleep(0.1)
        second = await judge.complete(request(1))  # sent after the 429: must wait out the pause
        await first
        await judge.aclose()
        return first.result(), second

    a, b = run(go())
    assert a.ok and b.ok
    assert min(server.arrivals[1:]) - server.arrivals[0] >= 0.45


# ---------------------------------------------------------------------------- dedupe and cache
def test_identical_in_flight_requests_are_sent_once(server):
    server.latency_s = 0.05
    judge = Judge(cfg(server.base_url, input_cost_per_token=1e-6, output_cost_per_token=2e-6))
    replies = ask(judge, *(request("same") for _ in range(10)))
    assert server.requests == 1
    paid = [r for r in replies if not r.cached]
    assert len(paid) == 1 and paid[0].attempts == 1 and paid[0].cost > 0
    assert all(r.cached and r.attempts == 0 and r.cost == 0 and r.text == paid[0].text for r in replies if r.cached)


def test_duplicate_items_in_a_batch_cost_nothing_new(server):
    judge = cfg(server.base_url, input_cost_per_token=1e-6)
    with Scorer(rubric(3), judge) as s:
        first, second = s.score_batch([items(1)[0], items(1)[0]])
    assert first.score == second.score == 1.0
    assert server.requests == 3
    calls = first.calls + second.calls
    assert sum(c.cached for c in calls) == 3 and sum(c.attempts for c in calls) == 3
    assert first.cost + second.cost == pytest.approx(sum(c.cost for c in calls if not c.cached))
    assert all(c.cost == 0 for c in calls if c.cached)


class DictCache:
    """A minimal ReplyCache: stores what it is given, returns it for the same request."""

    def __init__(self):
        self.store: dict = {}

    async def get(self, config, request):
        return self.store.get((config.model, request_key(request)))

    async def put(self, config, request, reply):
        self.store[(config.model, request_key(request))] = reply


def test_cache_hits_cost_nothing_and_unparseable_replies_are_not_cached(server):
    server.faults = FaultPlan(fixed={1: Fault(content="not json")})
    cache = DictCache()
    judge = Judge(cfg(server.base_url, max_concurrency=1, input_cost_per_token=1e-6), cache=cache)
    with Scorer(rubric(2), judge) as s:
        first = s.score_batch(items(2))
        sent, stored = server.requests, dict(cache.store)
        again = s.score_batch(items(2))
    assert sent == 5  # 4 calls + 1 re-ask
    assert len(stored) == 4 and all("not json" not in r.text for r in stored.values())
    # the call whose first answer was unparseable is asked afresh; the other three are cache hits
    assert server.requests == sent + 1
    assert [r.score for r in again] == [r.score for r in first] == [1.0, 1.0]
    hits = [c for r in again for c in r.calls if c.cached]
    assert len(hits) == 3 and all(c.attempts == 0 and c.cost == 0 for c in hits)
    assert sum(r.cost for r in first) > sum(r.cost for r in again) > 0


# ---------------------------------------------------------------------------- deadlines
def test_call_deadline_turns_a_straggler_into_a_deadline_failure():
    with JudgeServer(latency_s=2.0) as srv:
        judge = Judge(cfg(srv.base_url, call_deadline_s=0.3, timeout_s=10))
        start = time.monotonic()
        reply = ask(judge, request())[0]
        assert time.monotonic() - start < 1.5
    assert reply.error.kind is ErrorKind.DEADLINE and reply.text is None


def test_batch_deadline_fails_only_the_unfinished_verdicts():
    def latency(body):
        return 3.0 if "slow" in body["messages"][-1]["content"] and "### c1" in body["messages"][-1]["content"] else 0
    with JudgeServer(latency_s=latency) as srv:
        data = [{"prompt": "p", "response": f"fast {i}"} for i in range(6)] + [{"prompt": "p", "response": "slow"}]
        with Scorer(rubric(2), cfg(srv.base_url), grading=GradingConfig(batch_deadline_s=0.6)) as s:
            start = time.monotonic()
            results = s.score_batch(data)
            elapsed = time.monotonic() - start
    assert elapsed < 2.0
    assert all(r.score == 1.0 for r in results[:6])
    slow = results[6]
    assert slow.score is None and "deadline" in slow.error
    assert slow.verdict("c0").label == "MET"  # finished before the deadline: kept
    assert slow.verdict("c1").error.kind is ErrorKind.DEADLINE


def test_judge_batch_deadline_from_config():
    with JudgeServer(latency_s=lambda body: 3.0 if "slow" in body["messages"][-1]["content"] else 0) as srv:
        with Scorer(rubric(1), cfg(srv.base_url, batch_deadline_s=0.5)) as s:
            start = time.monotonic()
            fast, slow = s.score_batch([{"response": "fast"}, {"response": "slow"}])
            assert time.monotonic() - start < 2.5
    assert fast.score == 1.0 and slow.verdict("c0").error.kind is ErrorKind.DEADLINE


# ---------------------------------------------------------------------------- replicas
def test_replicas_share_load_with_per_replica_caps():
    with JudgeServer(latency_s=0.02) as a, JudgeServer(latency_s=0.02) as b:
        judge = Judge(cfg([a.base_url, b.base_url], max_concurrency=8, replica_concurrency=3))
        assert all(r.ok for r in ask(judge, *(request(i) for i in range(60))))
        assert a.requests + b.requests == 60 and min(a.requests, b.requests) >= 15
        assert a.max_in_flight <= 3 and b.max_in_flight <= 3


def test_a_failing_replica_is_skipped_until_it_recovers():
    with JudgeServer() as good, JudgeServer(faults=FaultPlan(rate=1.0, kinds=(Fault(status=500),))) as bad:
        judge = Judge(cfg([bad.base_url, good.base_url], max_concurrency=1, breaker_failures=2,
                          breaker_cooldown_s=0.5))
        replica_state = judge.backend.replicas

        async def go(n, tag):
            try:
                return [await judge.complete(request(f"{tag}{i}")) for i in range(n)]
            finally:
                await judge.aclose()

        assert all(r.ok for r in run(go(20, "a")))
        assert bad.requests == 2 and replica_state.is_open(0)  # two failures open the breaker
        time.sleep(0.6)
        bad.faults = FaultPlan()  # recovered
        assert all(r.ok for r in run(go(20, "b")))
        assert bad.requests >= 2 + 5  # the probe succeeded: it takes its share again


def test_dead_replica_connection_errors_fail_over():
    with JudgeServer() as good:
        judge = Judge(cfg(["http://127.0.0.1:9/v1", good.base_url], max_concurrency=4, breaker_cooldown_s=60))
        replies = ask(judge, *(request(i) for i in range(20)))
    assert all(r.ok for r in replies) and good.requests == 20
    # the breaker opens after 3 failures; calls already in flight to the dead replica (up to max_concurrency 4,
    # more of them since a response's calls keep to one replica) fail once more before failing over
    assert sum(r.attempts for r in replies) - 20 <= 3 + 4


# ---------------------------------------------------------------------------- secrets
def test_api_key_never_appears_in_logs_results_or_errors(server, sentinel_env, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    server.faults = FaultPlan(fixed={1: Fault(status=401, echo_headers=True), 2: Fault(status=500, echo_headers=True),
                                     3: Fault(status=500, echo_headers=True)})
    config = cfg(server.base_url, api_key_env=sentinel_env, max_retries=1, max_concurrency=1)
    judge = Judge(config)
    with Scorer(rubric(2), judge) as s:
        results = s.score_batch(items(3))
    assert server.headers[0]["Authorization"] == f"Bearer {SENTINEL_KEY}"  # the key was used ...
    assert any(r.score is None for r in results) and any(r.error and "[redacted]" in r.error for r in results)
    dumped = json.dumps([r.to_dict() for r in results])
    texts = [dumped, repr(judge), repr(judge.backend), repr(config), str(config.to_dict()), caplog.text,
             *capsys.readouterr()]
    for t in texts:  # ... and never shown
        assert SENTINEL_KEY not in t
    with pytest.raises(ValueError) as err:
        JudgeConfig.from_dict({"model": "m", "api_key": SENTINEL_KEY})
    assert SENTINEL_KEY not in str(err.value)


# ---------------------------------------------------------------------------- config
def test_judge_yaml_config(tmp_path):
    path = tmp_path / "judges.yaml"
    path.write_text(
        "judges:\n"
        "  - model: Qwen/Qwen2.5-7B-Instruct\n"
        "    base_url: [http://10.0.0.1:8000/v1, http://10.0.0.2:8000/v1]\n"
        "    api_key_env: VLLM_KEY\n"
        "    max_concurrency: 128\n    replica_concurrency: 64\n    rpm: 6000\n    tpm: 2000000\n"
        "    call_deadline_s: 60\n    limit_scope: shared\n    mode: 3\n"
        "  - model: gemini/gemini-2.5-flash\n    weight: 2\n"
    )
    a, b = load_judges(path)
    assert a.base_urls == ("http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1") and a.mode == 3
    assert a.resolved_backend() == "http" and b.resolved_backend() == "litellm"
    assert (a.rpm, a.tpm, a.call_deadline_s, a.limit_scope, b.weight) == (6000, 2000000, 60, "shared", 2)
    example = load_judges(ROOT / "configs" / "judges" / "example.yaml")
    assert example and all(c.api_key_env is None or c.api_key_env.isupper() for c in example)
    for bad, field in (({"limit_scope": "galaxy"}, "limit_scope"), ({"call_deadline_s": 0}, "call_deadline_s"),
                       ({"replica_concurrency": 0}, "replica_concurrency"), ({"backoff_base_s": -1}, "backoff_base_s"),
                       ({"max_retries": 1.5}, "max_retries")):
        with pytest.raises(ValueError, match=field):
            JudgeConfig(model="m", **bad)


# ---------------------------------------------------------------------------- several processes
CHILD = """
import asyncio, sys
from rubric_reward.judges import ChatRequest, Judge, JudgeConfig
url, scope, conc, rpm, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
judge = Judge(JudgeConfig(model="judge", base_url=url, limit_scope=scope, max_concurrency=conc,
                          rpm=int(rpm) if rpm != "-" else None))
async def main():
    text = "## Criterion\\n### c0\\nBe good. {}"
    replies = await asyncio.gather(*(judge.complete(ChatRequest(({"role": "user", "content": text.format(tag + str(i))},)))
                                     for i in range(40)))
    assert all(r.ok for r in replies), [r.error for r in replies if not r.ok][:3]
    await judge.aclose()
print("READY", flush=True)
sys.stdin.readline()  # both ranks start together
asyncio.run(main())
"""


def _two_ranks(url: str, scope: str, conc: int, rpm: str, tmp_path: Path) -> None:
    procs = []
    for rank in range(2):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "WORLD_SIZE": "2", "RANK": str(rank),
               "RUBRIC_REWARD_LIMIT_DIR": str(tmp_path / "limits")}
        procs.append(subprocess.Popen([sys.executable, "-c", CHILD, url, scope, str(conc), rpm, f"r{rank}-"],
                                      env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for p in procs:
        assert p.stdout.readline().strip() == "READY", p.stderr.read()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err


@pytest.mark.parametrize("scope", ["world", "shared"])
def test_two_processes_stay_within_the_concurrency_limit(scope, tmp_path):
    with JudgeServer(latency_s=0.03) as srv:
        _two_ranks(srv.base_url, scope, 3, "-", tmp_path)
        assert srv.requests == 80
        # world: each rank gets 3 // 2 = 1; shared: lock files hold both ranks to 3 together
        assert srv.max_in_flight <= (2 if scope == "world" else 3)


def test_two_processes_share_one_rpm_limit(tmp_path):
    rpm = 1200
    with JudgeServer() as srv:
        _two_ranks(srv.base_url, "shared", 64, str(rpm), tmp_path)
        arrivals = list(srv.arrivals)
    rate = Rate(rpm)
    burst = int(rpm // 60)
    assert len(arrivals) == 80
    # paced after the burst (less 0.3 s: the burst's arrivals straggle in behind new connections)
    assert max(arrivals) - min(arrivals) >= (80 - burst) * rate.interval - 0.3
    assert _max_in_window(arrivals, 2.0) <= math.ceil(2.0 * (rpm - burst + 1) / 60) + burst + 3  # as in the rpm test


def test_world_share_divides_limits(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    lim = endpoint_limiter(cfg("http://127.0.0.1:9/v1", max_concurrency=64, rpm=600, tpm=100_000,
                               limit_scope="world"))
    assert lim.slots.capacity == 16 and lim.rpm.per_minute == 150 and lim.tpm.per_minute == 25_000
    lim = endpoint_limiter(cfg("http://127.0.0.1:9/v1", max_concurrency=64, limit_scope="process"))
    assert lim.slots.capacity == 64


def test_auto_scope_shares_a_remote_judge_per_machine_and_keeps_a_local_one_per_process(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")  # one machine, 4 ranks: the machine holds the whole cap
    lim = endpoint_limiter(cfg("http://127.0.0.1:9/v1", max_concurrency=64, rpm=600))
    assert lim.directory is not None and lim.slots.capacity == 64 and lim.rpm.per_minute == 600
    limits_mod._REGISTRY.clear()
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two machines of 2 ranks: each holds half
    lim = endpoint_limiter(cfg("http://127.0.0.1:9/v1", max_concurrency=64, rpm=600))
    assert lim.slots.capacity == 32 and lim.rpm.per_minute == 300
    local = endpoint_limiter(JudgeConfig(model="Qwen/Qwen3-0.6B", backend="transformers", max_concurrency=8))
    assert local.directory is None and local.slots.capacity == 8


def test_backend_that_raises_is_reported_not_raised(sentinel_env, caplog):
    class Broken:
        name = "broken"

        async def complete(self, request):
            raise RuntimeError(f"boom with {SENTINEL_KEY}")

        async def aclose(self):
            return None

    config = JudgeConfig(model="m", backend="http", base_url="http://127.0.0.1:9/v1", api_key_env=sentinel_env)
    judge = Judge(config, backend=Broken())
    reply = ask(judge, request())[0]
    assert isinstance(reply, ChatReply) and reply.error.kind is ErrorKind.INTERNAL and reply.attempts == 1
    # the exception's own text (paths, internals) goes to the log, redacted, never into the result
    assert "RuntimeError" in reply.error.message and "boom" not in reply.error.message
    assert "boom" in caplog.text and SENTINEL_KEY not in caplog.text


def test_request_key_tells_every_difference_that_changes_the_answer():
    def req(*messages, **kw):
        return ChatRequest(tuple(messages), **kw)

    sys_, user = {"role": "system", "content": "judge"}, {"role": "user", "content": "text"}
    assert request_key(req(sys_, user)) == request_key(req(dict(sys_), {"content": "text", "role": "user"}))
    keys = [request_key(r) for r in (
        req(sys_, user), req(user, sys_), req(user), req({"role": "user", "content": "textjudge"}),
        req({"role": "system", "content": "judgetext"}, {"role": "user", "content": ""}),
        req({"role": "user", "content": [{"type": "text", "text": "text"}]}),
        req({"role": "user", "content": "text", "name": "x"}),
        req(sys_, user, max_tokens=5), req(sys_, user, sample_index=1), req(sys_, user, schema={"a": 1}),
        req(sys_, user, logprobs=True),
    )]
    assert len(set(map(repr, keys))) == len(keys)
