"""The service's edges: bodies and headers that used to give a 500, the judge's reachability on /health,
a request whose client has gone, and what the metrics count."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest

from rubric_reward.serve import ServeConfig, ServiceThread
from rubric_reward.serve.app import STATE
from rubric_reward.testing.judge_server import Fault, FaultPlan

RUBRIC = {"criteria": [{"name": "names_paris", "requirement": "The response names Paris as the capital."}]}
TOKEN = "s3cret-token-value-123"


def _config(server, **kw):
    return ServeConfig.from_dict({"judge": {"model": "judge", "base_url": server.base_url}, "rubric": RUBRIC,
                                  "deadline_s": 30, **kw})


def _raw(port: int, path: str, body: bytes, auth: bytes | None = None) -> tuple[int, dict]:
    """A request written by hand (headers with bytes no HTTP library would send)."""
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n").encode()
    if auth is not None:
        head += b"Authorization: " + auth + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + b"\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.split(b"\r\n\r\n", 1)[1])


@pytest.mark.timeout(60)
def test_bodies_and_headers_that_gave_500_are_4xx_naming_the_field(judge_server, monkeypatch):
    monkeypatch.setenv("TEST_REWARD_TOKEN", TOKEN)
    server = judge_server({})
    auth = f"Bearer {TOKEN}".encode()
    with ServiceThread(_config(server, serve={"auth_token_env": "TEST_REWARD_TOKEN"})) as svc:
        port = svc.port
        deep = b'{"items": ' + b"[" * 5000 + b"]" * 5000 + b"}"
        digits = b'{"items": [{"response": "Paris.", "id": ' + b"9" * 5000 + b"}]}"
        item = json.dumps({"items": [{"response": "Paris."}]}).encode()
        cases = [
            (_raw(port, "/score", deep, auth), 400, "malformed_json", None, "nested too deeply"),
            (_raw(port, "/openrlhf", deep, auth), 400, "malformed_json", None, "nested too deeply"),
            (_raw(port, "/score", digits, auth), 400, "malformed_json", None, "digits"),
            (_raw(port, "/score", b'{"items": [{"response": "a", "id": "\\ud800"}]}', auth), 422, "invalid_field",
             "items[0].id", "surrogate"),
            (_raw(port, "/score", item, b"Bearer s\xe9cret"), 401, "unauthorized", "Authorization", "Bearer"),
            (_raw(port, "/score", item, b"Bearer \xff\xfe"), 401, "unauthorized", "Authorization", "Bearer"),
            (_raw(port, "/score", json.dumps({"items": [{"response": "a", "prompt": 5}]}).encode(), auth), 422,
             "invalid_field", "items[0].prompt", "string"),
            (_raw(port, "/score", json.dumps({"items": [{"response": "a", "conversation": [{"role": "user"}]}]})
                  .encode(), auth), 422, "invalid_field", "items[0].conversation", "content"),
        ]
        for (status, body), want, code, field, words in cases:
            assert (status, body["error"]["code"], body["error"]["field"]) == (want, code, field), body
            assert words in body["error"]["message"] and "Traceback" not in body["error"]["message"]
        assert _raw(port, "/score", item, auth)[0] == 200  # still serving


@pytest.mark.timeout(60)
def test_health_reports_whether_the_judge_answers(judge_server):
    import urllib.request

    server = judge_server({})
    with ServiceThread(_config(server)) as up:
        with urllib.request.urlopen(up.url + "/health", timeout=10) as resp:
            ok = json.loads(resp.read())
    dead = ServeConfig.from_dict({"judge": {"model": "judge", "base_url": "http://127.0.0.1:9/v1"}, "rubric": RUBRIC})
    with ServiceThread(dead) as svc:
        with urllib.request.urlopen(svc.url + "/health", timeout=10) as resp:
            down = json.loads(resp.read())
    assert ok["status"] == "ok" and ok["judge_reachable"] is True and ok["judge_error"] is None
    assert down["status"] == "degraded" and down["judge_reachable"] is False and "127.0.0.1:9" in down["judge_error"]


@pytest.mark.timeout(60)
def test_a_request_whose_client_left_is_cancelled_and_not_counted(judge_server):
    import aiohttp

    server = judge_server({}, faults=FaultPlan(rate=1.0, kinds=(Fault(hang_s=30),)))
    cfg = _config(server, judge={"model": "judge", "base_url": server.base_url, "timeout_s": 30})
    body = {"query": ["Q?Paris."], "prompts": ["Q?"], "labels": [None]}
    with ServiceThread(cfg) as svc:
        async def give_up() -> str:
            try:
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.5)) as s:
                    async with s.post(svc.url + "/openrlhf", json=body) as resp:
                        return str(resp.status)
            except asyncio.TimeoutError:
                return "gave up"

        assert asyncio.run(give_up()) == "gave up"
        deadline = time.monotonic() + 5
        while svc.app[STATE]["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.05)
        import urllib.request

        with urllib.request.urlopen(svc.url + "/metrics", timeout=10) as resp:
            metrics = resp.read().decode()
    assert "rubric_reward_requests_in_flight 0.0" in metrics  # cancelled, not judged to its 30 s deadline
    assert 'rubric_reward_requests_total{endpoint="openrlhf",status="499"} 1.0' in metrics
    assert 'rubric_reward_items_total{endpoint="openrlhf"' not in metrics  # an abandoned request is not counted


@pytest.mark.timeout(60)
def test_the_documented_score_body_is_scored_as_written(judge_server, tmp_path):
    """docs/serve.md's /score request body, sent verbatim to the service of examples/serve/reward.yaml."""
    import re
    import urllib.request
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "serve.md").read_text()
    body = re.search(r"### `POST /score`\n\n```json\n(.*?)```", doc, re.S).group(1)
    server = judge_server({"tone": "warm", "register": "formal"})  # support_reply's ordinal / nominal criteria
    cfg = yaml.safe_load((root / "examples" / "serve" / "reward.yaml").read_text())
    cfg["judge"]["base_url"] = server.base_url
    cfg["rubric_dir"] = str(root / "examples" / "serve" / "rubrics")
    with ServiceThread(ServeConfig.from_dict(cfg)) as svc:
        req = urllib.request.Request(svc.url + "/score", body.encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            out = json.loads(resp.read())
    assert [r["id"] for r in out["results"]] == ["a", "b", "c"] and out["summary"]["scored"] == 3


@pytest.mark.timeout(60)
def test_group_labels_reach_a_group_judge_from_score_items_and_verl_uids(judge_server, tmp_path):
    """A ``mode: group`` judge judges together the completions of one prompt and one group label: the
    service's item ``group`` and verl's ``extra_info["uid"]`` are that label."""
    import urllib.request

    from rubric_reward.integrations.verl import compute_score_batch

    server = judge_server({})
    cfg = {"judge": {"model": "judge", "base_url": server.base_url, "mode": "group", "group_passes": 1},
           "rubric": RUBRIC, "deadline_s": 30}
    responses = [f"The capital is Paris, answer {i}." for i in range(4)]
    items = [{"prompt": "Capital of France?", "response": r, "group": g} for r, g in zip(responses, "aabb")]
    with ServiceThread(ServeConfig.from_dict(cfg)) as svc:
        req = urllib.request.Request(svc.url + "/score", json.dumps({"items": items}).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            out = json.loads(resp.read())
    assert out["summary"]["scored"] == 4 and server.requests == 2  # one call per group
    server.reset_stats()
    path = tmp_path / "reward.yaml"
    path.write_text(json.dumps(cfg))
    scores = compute_score_batch(["geo"] * 4, responses, [None] * 4,
                                 [{"prompt": "Capital of France?", "uid": u} for u in "xxxy"], config=str(path))
    assert all(s["rubric_unscored"] == 0.0 for s in scores) and server.requests == 2
