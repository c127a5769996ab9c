"""The reward service on 127.0.0.1 against the scripted loopback judge: scoring, shapes, errors, auth."""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request

import pytest

from rubric_reward import Scorer
from rubric_reward.serve import RewardClient, RewardServiceError, ServeConfig, ServiceThread
from rubric_reward.rewards.text import chat_text_to_prompt, split_query
from rubric_reward.util.think import strip_think

RUBRIC = {"name": "support", "criteria": [
    {"name": "answers", "requirement": "Answers the question.", "weight": 10},
    {"name": "tone", "kind": "ordinal", "requirement": "Tone?", "weight": 4, "options": [
        {"label": "rude", "value": 0}, {"label": "neutral", "value": 0.5}, {"label": "warm", "value": 1}]},
    {"name": "invents", "requirement": "Invents a policy.", "weight": -6},
    {"name": "short", "check": "ifeval:length_constraints:number_words",
     "kwargs": {"relation": "less than", "num_words": 12}, "weight": 1},
]}
# verdicts depend on the response, so a mix-up between items would show
SCRIPT = {
    "answers": lambda response, body: "MET" if "refund" in response else "UNMET",
    "tone": lambda response, body: "warm" if "please" in response else "neutral",
    "invents": lambda response, body: "MET" if "guarantee" in response else "UNMET",
}
ITEMS = [
    {"id": "a", "prompt": "When is my refund?", "response": "Your refund arrives Friday, please wait."},
    {"id": "b", "prompt": "When is my refund?", "response": "We guarantee a refund in one hour."},
    {"id": "c", "conversation": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                                 {"role": "user", "content": "Refund?"}], "response": "I cannot say."},
    {"id": "d", "prompt": None, "response": "<think>maybe refund</think>No idea, sorry, " + "word " * 20},
]
TOKEN = "s3cret-token-value-123"


def _config(server, **kw):
    return ServeConfig.from_dict({"judge": {"model": "judge", "base_url": server.base_url}, "rubric": RUBRIC,
                                  "deadline_s": 30, **kw})


def _post(url, body, *, token=None, raw=None, headers=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _get(url, token=None):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.timeout(60)
def test_batch_scored_identically_to_scorer(judge_server):
    server = judge_server(SCRIPT)
    with ServiceThread(_config(server, strip_think=False)) as svc, RewardClient(svc.url) as client:
        served = client.score(ITEMS)
    items = [{"id": x["id"], "prompt": x.get("prompt") or x.get("conversation"), "response": x["response"]} for x in ITEMS]
    with Scorer(RUBRIC, {"model": "judge", "base_url": server.base_url},
                scoring={"abstention": "zero", "on_failure": "unscored"}) as scorer:
        local = scorer.score_batch(items)
    assert [r["id"] for r in served] == ["a", "b", "c", "d"]
    for got, want in zip(served, local, strict=True):
        assert got["score"] == want.score and got["reward"] == want.score
        assert got["raw_score"] == want.raw_score and got["expected_score"] == want.expected_score
        assert got["verdicts"] == [v.to_dict() for v in want.verdicts]
        assert got["unscored"] is False and got["error"] is None
    assert served[0]["score"] == pytest.approx((10 + 4 + 1) / 15)  # answers, warm, no invention, short
    assert served[1]["score"] == pytest.approx((10 + 2 - 6 + 1) / 15)
    assert served[0]["judge_calls"] == 3 and len({r["score"] for r in served}) == 4


@pytest.mark.timeout(60)
def test_strip_think_rubric_ids_labels_and_reward_field(judge_server, tmp_path):
    server = judge_server(SCRIPT)
    (tmp_path / "polite.yaml").write_text("criteria:\n  - name: polite\n    requirement: Polite?\n")
    cfg = _config(server, rubric_dir=str(tmp_path), reward="raw_score")
    with ServiceThread(cfg) as svc, RewardClient(svc.url) as client:
        think = client.score([ITEMS[3]])[0]
        by_id = client.score([{"response": "please"}], rubric_id="polite")[0]
        questions = client.score([{"response": "x", "label": json.dumps(["Answers the question?"])}])[0]
        advancedif = client.score([{"response": "x", "label": {"rubrics": json.dumps(["Q1?", "Q2?"])}}])[0]
        inline_yaml = client.score([{"response": "x", "rubric": "criteria:\n  - requirement: Q?\n"}])[0]
    # the <think> block is not judged: "refund" only appears inside it
    assert think["verdicts"][0]["label"] == "UNMET"
    judged = [b["messages"][-1]["content"] for b in server.bodies]
    assert not any("maybe refund" in m for m in judged)
    assert by_id["score"] == 1.0 and [v["criterion"] for v in by_id["verdicts"]] == ["polite"]
    assert questions["score"] == 1.0 and len(advancedif["verdicts"]) == 2 and inline_yaml["score"] == 1.0
    assert think["reward"] == think["raw_score"]


@pytest.mark.timeout(60)
def test_openrlhf_request_answered_in_its_shape(judge_server):
    server = judge_server({"c1": lambda response, body: "MET" if response == "Friday, please." else "UNMET"})
    prompt = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhen is my refund?<|im_end|>\n<|im_start|>assistant\n"
    query = prompt + "Friday, please.<|im_end|><|endoftext|>"
    label = json.dumps(["Does the reply say when the refund arrives?"])
    with ServiceThread(_config(server)) as svc:
        status, out = _post(svc.url + "/openrlhf", {"query": [query], "prompts": [prompt], "labels": [label]})
        status2, out2 = _post(svc.url + "/get_reward", {"query": [query, query + "x"], "prompts": [prompt] * 2,
                                                         "labels": [label, None]})
    assert status == 200 and out["rewards"] == [1.0] and out["scores"] == [1.0]
    assert out["extra_logs"]["rubric_unscored"] == [0.0] and out["unscored"] == [False]
    body = server.bodies[0]["messages"][-1]["content"]
    assert "<|im_end|>" not in body and "When is my refund?" in body and "Be brief." in body
    # the second label is empty: the config's default rubric (4 criteria) applies
    assert status2 == 200 and len(out2["rewards"]) == 2 and all(isinstance(r, float) for r in out2["rewards"])


@pytest.mark.timeout(60)
def test_bad_requests_get_clear_4xx_and_the_service_keeps_serving(judge_server, tmp_path, monkeypatch, caplog):
    server = judge_server(SCRIPT)
    monkeypatch.setenv("TEST_REWARD_TOKEN", TOKEN)
    (tmp_path / "known.yaml").write_text("criteria: ['Q?']\n")
    cfg = _config(server, rubric_dir=str(tmp_path),
                  serve={"auth_token_env": "TEST_REWARD_TOKEN", "max_body_bytes": 4096, "max_batch_items": 5})
    caplog.set_level(logging.DEBUG)
    good = {"items": [{"prompt": "q", "response": "refund"}]}
    with ServiceThread(cfg, access_log=True) as svc:
        url = svc.url + "/score"
        cases = [
            (_post(url, None, raw=b"{not json", token=TOKEN), 400, "malformed_json", None),
            (_post(url, {"items": [{"prompt": "q"}]}, token=TOKEN), 422, "missing_field", "items[0].response"),
            (_post(url, {"rubric": RUBRIC}, token=TOKEN), 422, "missing_field", "items"),
            (_post(url, {"items": "x"}, token=TOKEN), 422, "invalid_field", "items"),
            (_post(url, {"items": [{"response": 3}]}, token=TOKEN), 422, "invalid_field", "items[0].response"),
            (_post(url, {"items": [{"response": "a", "colour": 1}]}, token=TOKEN), 422, "unknown_field",
             "items[0].colour"),
            (_post(url, {"items": [{"response": "x" * 5000}]}, token=TOKEN), 413, "body_too_large", None),
            (_post(url, {"items": [{"response": "x"}] * 6}, token=TOKEN), 413, "too_many_items", "items"),
            (_post(url, {"items": [{"response": "x", "rubric_id": "nope"}]}, token=TOKEN), 422,
             "unknown_rubric_id", "items[0].rubric_id"),
            (_post(url, {"items": [{"response": "x", "rubric_id": "../etc"}]}, token=TOKEN), 422,
             "invalid_field", "items[0].rubric_id"),
            (_post(url, {"items": [{"response": "x", "rubric": {"criteria": []}}]}, token=TOKEN), 422,
             "invalid_rubric", "items[0].rubric"),
            (_post(url, good, token="wrong-token"), 401, "unauthorized", "Authorization"),
            (_post(url, good), 401, "unauthorized", "Authorization"),
            (_post(svc.url + "/openrlhf", {"query": ["abc"], "prompts": ["a", "b"]}, token=TOKEN), 422,
             "invalid_field", "prompts"),
            (_post(svc.url + "/openrlhf", {"prompts": ["zzz"]}, token=TOKEN), 422, "missing_field", "query"),
            (_post(svc.url + "/nowhere", good, token=TOKEN), 404, "not_found", None),
        ]
        for (status, body), want_status, code, field in cases:
            assert (status, body["error"]["code"], body["error"]["field"]) == (want_status, code, field), body
            assert body["error"]["message"]
        assert _get(svc.url + "/health")[0] == 200  # open without a token
        assert _get(svc.url + "/metrics")[0] == 401
        status, body = _post(url, good, token=TOKEN)
        assert status == 200 and body["results"][0]["score"] is not None
        metrics = _get(svc.url + "/metrics", TOKEN)[1]
    assert 'rubric_reward_failures_total{kind="request:unauthorized"} 3.0' in metrics
    assert 'rubric_reward_requests_total{endpoint="score",status="413"} 2.0' in metrics
    assert TOKEN not in caplog.text and "wrong-token" not in caplog.text
    assert '"POST /score HTTP/1.1" 401' in caplog.text  # the access log is on, without headers


@pytest.mark.timeout(60)
def test_metrics_count_items_calls_failures_and_latency(judge_server):
    from rubric_reward.testing.judge_server import Fault, FaultPlan

    server = judge_server(SCRIPT, faults=FaultPlan(fixed={1: Fault(status=400)}))
    with ServiceThread(_config(server)) as svc, RewardClient(svc.url) as client:
        results = client.score(ITEMS[:2])
        text = _get(svc.url + "/metrics")[1]
    assert [r["unscored"] for r in results].count(True) == 1  # a 400 from the judge is not retried
    bad = next(r for r in results if r["unscored"])
    assert bad["reward"] is None and "client" in bad["error"]
    assert 'rubric_reward_items_total{endpoint="score",outcome="scored"} 1.0' in text
    assert 'rubric_reward_items_total{endpoint="score",outcome="unscored"} 1.0' in text
    assert 'rubric_reward_judge_calls_total{outcome="scored"} 3.0' in text
    assert 'rubric_reward_judge_calls_total{outcome="unscored"} 3.0' in text
    assert 'rubric_reward_failures_total{kind="client"} 1.0' in text
    assert 'rubric_reward_request_latency_seconds_count{endpoint="score"} 1.0' in text
    assert "rubric_reward_judge_cost_dollars_total" in text and "rubric_reward_judge_cache_hits_total" in text


@pytest.mark.timeout(60)
def test_per_request_deadline_gives_explicit_unscored_entries(judge_server):
    server = judge_server(SCRIPT, latency_s=5.0)
    cfg = _config(server, deadline_s=0.5)
    with ServiceThread(cfg) as svc, RewardClient(svc.url) as client:
        start = time.monotonic()
        results = client.score(ITEMS[:2], deadline_s=30)  # a request may only lower the deadline
        elapsed = time.monotonic() - start
    assert elapsed < 3.0
    assert all(r["unscored"] and r["reward"] is None and "deadline" in r["error"] for r in results)


def test_config_errors_name_the_field(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="'reward'"):
        ServeConfig.from_dict({"reward": "mean"})
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['colour'\]"):
        ServeConfig.from_dict({"colour": 1})
    with pytest.raises(ValueError, match=r"ServeConfig\.serve: field 'max_batch_items' must be >= 1"):
        ServeConfig.from_dict({"serve": {"max_batch_items": 0}})
    with pytest.raises(ValueError, match=r"ServeConfig\.scoring: field 'abstention' must be one of"):
        ServeConfig.from_dict({"scoring": {"abstention": "never"}})
    monkeypatch.delenv("NO_SUCH_TOKEN_VAR", raising=False)
    with pytest.raises(ValueError, match="NO_SUCH_TOKEN_VAR"):
        ServiceThread({"serve": {"auth_token_env": "NO_SUCH_TOKEN_VAR"}}).start()
    # RewardConfig's trainer-side fields are accepted, so one file can drive both
    assert ServeConfig.from_dict({"rubric_column": "rubric", "metric_prefix": "r"}).reward == "score"
    path = tmp_path / "reward.yaml"
    path.write_text("rubric: r.yaml\nserve: {port: 9000}\n")
    (tmp_path / "r.yaml").write_text("criteria: ['Q?']\n")
    cfg = ServeConfig.from_yaml(path)
    assert cfg.rubric == str(tmp_path / "r.yaml") and cfg.serve.port == 9000
    with pytest.raises(ValueError, match="has no 'judge'"):
        ServiceThread(cfg).start()


def test_client_raises_4xx_and_retries_when_unreachable():
    client = RewardClient("http://127.0.0.1:9", retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(RewardServiceError, match="unavailable after 2 tries"):
        client.score([{"response": "x"}])
    client.close()
    assert "token" not in repr(RewardClient("http://x", token="abc"))


def test_text_helpers():
    prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert split_query(prompt + "Hello!<|im_end|>", prompt) == "Hello!"
    assert split_query("<s>" + prompt + "Yo</s>", prompt) == "Yo"  # a BOS token in front
    assert split_query("something else", prompt) is None
    assert chat_text_to_prompt(prompt) == [{"role": "user", "content": "Hi"}]
    llama = ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert chat_text_to_prompt(llama) == [{"role": "user", "content": "Hi"}]
    assert chat_text_to_prompt("<s>plain question") == "plain question"
    assert strip_think("<think>a</think> answer") == "answer"
    assert strip_think("<think>never closed") == ""
    assert strip_think("a </think> b") == "b"
