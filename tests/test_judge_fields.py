"""Which JudgeConfig fields change a verdict: declared once on the field, read by the cache key and both
fingerprints; the retry policy is the one source of the retry count."""

from __future__ import annotations

import dataclasses

import pytest

from rubric_reward.evaluation.config import EvalConfig
from rubric_reward.evaluation.runner import run_fingerprint
from rubric_reward.judges import ChatRequest, Judge, JudgeConfig
from rubric_reward.judges.config import judge_fields
from rubric_reward.judges.retry import RetryPolicy
from rubric_reward.results import ErrorKind
from rubric_reward.judges.cache import cache_key
from rubric_reward.judges.fingerprint import judge_fingerprint
from rubric_reward.testing.judge_server import Fault, FaultPlan

try:  # tests/ may or may not be a package
    from ._clients_fixtures import ask, fresh_limiters, server  # noqa: F401
except ImportError:
    from _clients_fixtures import ask, fresh_limiters, server  # noqa: F401

REQUEST = ChatRequest(({"role": "user", "content": "Is it good?"},), schema={"type": "object"}, logprobs=True)
# a value each field can take that differs from its default (any field added to JudgeConfig must be listed)
CHANGED = {
    "model": "other", "name": "renamed", "backend": "litellm", "base_url": "http://127.0.0.1:2/v1",
    "api_key_env": "OTHER_KEY", "temperature": 0.5, "top_p": 0.9, "max_tokens": 64, "seed": 7,
    "extra_body": {"x": 1}, "structured_output": False, "logprobs": True, "top_logprobs": 3,
    "verdict_mode": "generate", "engine_args": {"dtype": "float32"}, "mode": "per_item", "samples": 2,
    "group_size": 4, "group_criteria": 2, "group_passes": 1,
    "weight": 2.0, "max_concurrency": 3, "rpm": 10, "tpm": 1000, "timeout_s": 5.0, "max_retries": 1,
    "backoff_base_s": 0.1, "backoff_max_s": 1.0, "call_deadline_s": 9.0, "batch_deadline_s": 9.0,
    "replica_concurrency": 2, "breaker_failures": 9, "breaker_cooldown_s": 1.0, "limit_scope": "process",
    "replica_load_factor": 2.0,
    "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
}


def test_every_judge_field_is_classified():
    names = {f.name for f in dataclasses.fields(JudgeConfig)}
    classified = judge_fields("answer") | judge_fields("calls") | judge_fields("nothing")
    assert names - classified == set(), "declare what the new JudgeConfig field changes (metadata=ANSWER/CALLS/...)"
    assert set(CHANGED) == names, "add the new field to CHANGED in this test"


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_cache_key_and_fingerprints_follow_the_declaration(name):
    base = JudgeConfig(model="judge", base_url="http://127.0.0.1:1/v1")
    changed = dataclasses.replace(base, **{name: CHANGED[name]})
    affects = next(k for k in ("answer", "calls", "nothing") if name in judge_fields(k))
    same_key = cache_key(base, REQUEST) == cache_key(changed, REQUEST)
    same_fp = judge_fingerprint(base) == judge_fingerprint(changed)
    run = run_fingerprint(EvalConfig(data="items.jsonl", judges=(base,)))
    run_changed = run_fingerprint(EvalConfig(data="items.jsonl", judges=(changed,)))
    assert same_key == (affects != "answer"), name
    assert same_fp == (affects == "nothing") == (run == run_changed), name


def test_operational_retry_and_breaker_settings_do_not_re_judge():
    """The fields added after the two hand-kept lists (backoff, deadlines, breakers, limit scope)."""
    base = JudgeConfig(model="judge")
    for name in ("backoff_base_s", "backoff_max_s", "call_deadline_s", "replica_concurrency", "breaker_failures",
                 "breaker_cooldown_s", "limit_scope", "replica_load_factor"):
        changed = dataclasses.replace(base, **{name: CHANGED[name]})
        assert cache_key(base, REQUEST) == cache_key(changed, REQUEST), name
        assert judge_fingerprint(base) == judge_fingerprint(changed), name


def test_the_retry_policy_is_what_the_transport_obeys(server):
    server.faults = FaultPlan(rate=1.0, kinds=(Fault(status=500),))
    judge = Judge(JudgeConfig(model="judge", base_url=server.base_url, max_retries=3, backoff_base_s=0.01))
    judge.transport.policy = RetryPolicy(max_retries=1, base_s=0.01, max_s=0.02)
    reply = ask(judge, REQUEST)[0]
    assert reply.error.kind is ErrorKind.SERVER and reply.attempts == 2 and server.requests == 2
