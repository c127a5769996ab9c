"""The litellm backend against the scripted loopback server (litellm is imported once per module)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rubric_reward import Scorer
from rubric_reward.judges import ChatRequest, Judge, JudgeConfig
from rubric_reward.results import ErrorKind
from rubric_reward.rubric import Rubric
from rubric_reward.testing.judge_server import Fault, FaultPlan, JudgeServer, ScriptedJudge

try:
    from ._clients_fixtures import SENTINEL_KEY, ask, fresh_limiters, items, litellm_module, run, sentinel_env  # noqa: F401
except ImportError:
    from _clients_fixtures import SENTINEL_KEY, ask, fresh_limiters, items, litellm_module, run, sentinel_env  # noqa: F401

pytestmark = pytest.mark.slow  # importing litellm takes several seconds
ROOT = Path(__file__).resolve().parents[1]
FAST = dict(backoff_base_s=0.01, backoff_max_s=0.5)

RUBRIC = Rubric.from_obj([
    {"name": "accurate", "requirement": "The response is factually accurate.", "weight": 3},
    {"name": "concise", "requirement": "The response is concise.", "weight": 1},
    {"name": "rude", "requirement": "The response is rude.", "weight": -2},
    {"name": "depth", "requirement": "How deep is the analysis?", "kind": "ordinal", "options": [
        {"label": "shallow", "value": 0.0}, {"label": "adequate", "value": 0.5}, {"label": "deep", "value": 1.0}]},
])


def script() -> ScriptedJudge:
    def depth(response, body):
        return "deep" if "1" in response else "adequate"

    return ScriptedJudge({"accurate": lambda r, b: "MET" if "3" not in r else "UNMET", "concise": "MET",
                          "rude": lambda r, b: "MET" if "7" in r else "UNMET", "depth": depth})


def judge_cfg(url: str, backend: str, **kw) -> JudgeConfig:
    model = "hosted_vllm/judge" if backend == "litellm" else "judge"
    # one judge name for both: the option shuffle is seeded per judge
    return JudgeConfig(**{"model": model, "name": "judge", "backend": backend, "base_url": url, **FAST, **kw})



def request(i=0) -> ChatRequest:
    return ChatRequest(({"role": "user", "content": f"## Criterion\n### c0\nBe good {i}.\n"},))


@pytest.mark.parametrize("mode", ["per_criterion", "per_item"])
def test_both_backends_give_identical_verdicts(litellm_module, mode):
    data = items(24)
    with JudgeServer(script()) as srv:
        results, bodies = {}, {}
        for backend in ("http", "litellm"):
            srv.reset_stats()
            with Scorer(RUBRIC, judge_cfg(srv.base_url, backend, mode=mode)) as s:
                results[backend] = s.score_batch(data)
            bodies[backend] = sorted(json.dumps({**b, "model": None}, sort_keys=True) for b in srv.bodies)
    assert bodies["http"] == bodies["litellm"]  # the same request, whichever client sends it
    fast, slow = results["http"], results["litellm"]
    assert all(r.ok for r in fast + slow)
    assert [r.score for r in fast] == [r.score for r in slow]
    assert [[v.label for v in r.verdicts] for r in fast] == [[v.label for v in r.verdicts] for r in slow]
    assert len({r.score for r in fast}) > 2  # the script makes the items differ


def test_litellm_makes_no_hidden_retries(litellm_module):
    with JudgeServer(faults=FaultPlan(rate=1.0, kinds=(Fault(status=500),))) as srv:
        reply = ask(Judge(judge_cfg(srv.base_url, "litellm", max_retries=0)), request())[0]
        assert reply.error.kind is ErrorKind.SERVER and srv.requests == 1
        srv.reset_stats()
        reply = ask(Judge(judge_cfg(srv.base_url, "litellm", max_retries=2)), request(1))[0]
        assert reply.attempts == 3 and srv.requests == 3  # ours is the only retry layer
    with JudgeServer(faults=FaultPlan(rate=1.0, kinds=(Fault(status=500),))) as srv:  # the openai/ route too
        config = JudgeConfig(model="openai/judge", backend="litellm", base_url=srv.base_url, max_retries=0)
        reply = ask(Judge(config), request(2))[0]
        assert reply.error.kind is ErrorKind.SERVER and srv.requests == 1


def test_litellm_errors_become_error_kinds(litellm_module):
    faults = {1: Fault(status=429, retry_after=0.25), 2: Fault(status=503), 3: Fault(status=400),
              4: Fault(body="{not json"), 5: Fault(hang_s=2.0)}
    with JudgeServer(faults=FaultPlan(fixed=faults)) as srv:
        judge = Judge(judge_cfg(srv.base_url, "litellm", max_retries=0, timeout_s=0.5, max_concurrency=1))
        replies = ask(judge, *(request(i) for i in range(6)))
    kinds = [r.error.kind if r.error else None for r in replies]
    assert kinds == [ErrorKind.RATE_LIMIT, ErrorKind.SERVER, ErrorKind.CLIENT, ErrorKind.SERVER,
                     ErrorKind.TIMEOUT, None]
    backend = judge.backend
    assert backend._error(type("RateLimitError", (Exception,), {})("x"))[0].kind is ErrorKind.RATE_LIMIT
    dead = Judge(judge_cfg("http://127.0.0.1:9/v1", "litellm", max_retries=0))
    assert ask(dead, request())[0].error.kind is ErrorKind.CONNECTION


def test_litellm_retry_after_is_honoured(litellm_module):
    with JudgeServer(faults=FaultPlan(fixed={1: Fault(status=429, retry_after=0.4)})) as srv:
        reply = ask(Judge(judge_cfg(srv.base_url, "litellm")), request())[0]
        assert reply.ok and reply.attempts == 2
        assert srv.arrivals[1] - srv.arrivals[0] >= 0.4


def test_litellm_cost_from_the_map_or_the_config(litellm_module):
    with JudgeServer() as srv:
        mapped = ask(Judge(JudgeConfig(model="openai/gpt-4o-mini", base_url=srv.base_url, backend="litellm")),
                     request())[0]
        priced = ask(Judge(judge_cfg(srv.base_url, "litellm", input_cost_per_token=1e-3, output_cost_per_token=0)),
                     request())[0]
        unpriced = ask(Judge(judge_cfg(srv.base_url, "litellm")), request())[0]
    assert mapped.ok and mapped.cost > 0
    assert priced.cost == pytest.approx(priced.usage.prompt_tokens * 1e-3)
    assert unpriced.ok and unpriced.cost == 0.0


def test_litellm_logprobs_reach_the_verdict(litellm_module):
    with JudgeServer(ScriptedJudge({"c0": {"MET": 0.8, "UNMET": 0.2}})) as srv:
        rubric = Rubric.from_obj([{"name": "c0", "requirement": "Be good."}])
        with Scorer(rubric, judge_cfg(srv.base_url, "litellm", logprobs=True, top_logprobs=5)) as s:
            [r] = s.score_batch(items(1))
    v = r.verdict("c0")
    assert v.label == "MET" and v.expected_value == pytest.approx(0.8)
    assert r.expected_score == pytest.approx(0.8)


def test_litellm_keeps_the_key_secret_and_stdout_quiet(litellm_module, sentinel_env, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    faults = FaultPlan(fixed={1: Fault(status=401, echo_headers=True), 2: Fault(status=500, echo_headers=True)})
    with JudgeServer(faults=faults) as srv:
        config = JudgeConfig(model="openai/judge", backend="litellm", base_url=srv.base_url,
                             api_key_env=sentinel_env, max_retries=0, max_concurrency=1)
        judge = Judge(config)
        with Scorer(Rubric.from_obj(["Be good."]), judge) as s:
            results = s.score_batch(items(3))
        assert srv.headers[0]["Authorization"] == f"Bearer {SENTINEL_KEY}"
    assert [r.ok for r in results] == [False, False, True]
    out, err = capfd.readouterr()
    texts = [json.dumps([r.to_dict() for r in results]), repr(judge), repr(judge.backend), repr(config),
             caplog.text, out, err]
    assert all(SENTINEL_KEY not in t for t in texts)
    assert "Provider List" not in out
    assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"
    assert litellm_module.suppress_debug_info is True


def test_importing_the_package_does_not_import_litellm():
    code = ("import sys, rubric_reward; from rubric_reward.judges import Judge, JudgeConfig; "
            "Judge(JudgeConfig(model='m', base_url='http://127.0.0.1:9/v1')); "
            "assert 'litellm' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
