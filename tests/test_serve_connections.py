"""What a slow, idle or unauthenticated client can hold of the service: auth before the body, read timeouts for
request heads and bodies, and a connection cap that keeps /health and /score answering."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from rubric_reward.serve import ServeConfig, ServiceThread

ROOT = Path(__file__).resolve().parents[1]
RUBRIC = {"criteria": [{"name": "names_paris", "requirement": "The response names Paris as the capital."}]}
TOKEN = "s3cret-token-value-123"
ITEM = json.dumps({"items": [{"prompt": "Capital of France?", "response": "Paris."}]}).encode()


def _config(server, **serve):
    return ServeConfig.from_dict({"judge": {"model": "judge", "base_url": server.base_url}, "rubric": RUBRIC,
                                  "deadline_s": 30, "serve": serve})


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def _head(path: str, length: int, auth: str | None = None) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n"
    if auth is not None:
        head += f"Authorization: Bearer {auth}\r\n"
    return (head + "\r\n").encode()


def _answer(sock: socket.socket) -> tuple[int, dict]:
    """One whole answer (the service closes the connection after it, or it has a Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split(b" ", 2)[1]), json.loads(body)


def _closed_after(sock: socket.socket, limit: float = 30) -> float:
    """Seconds until the service closes ``sock`` (reads and drops whatever it sends first)."""
    start = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:  # still open
        return float("inf")
    return time.monotonic() - start


def _get(url: str, timeout: float = 10, data: bytes | None = None) -> tuple[int, dict, float]:
    start = time.monotonic()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, json.loads(resp.read()), time.monotonic() - start


@pytest.mark.timeout(60)
def test_an_unauthenticated_request_gets_401_before_its_body_is_sent(judge_server, monkeypatch):
    monkeypatch.setenv("TEST_REWARD_TOKEN", TOKEN)
    server = judge_server()
    with ServiceThread(_config(server, auth_token_env="TEST_REWARD_TOKEN")) as svc:
        for auth in (None, "wrong-token"):
            with _connect(svc.port) as sock:
                sock.sendall(_head("/score", 8 << 20, auth))  # an 8 MB body announced, not one byte of it sent
                start = time.monotonic()
                status, body = _answer(sock)
                assert status == 401 and body["error"]["code"] == "unauthorized"
                assert time.monotonic() - start < 5
        with _connect(svc.port) as sock:  # the right token: the body is read and scored
            sock.sendall(_head("/score", len(ITEM), TOKEN) + ITEM)
            status, body = _answer(sock)
        assert status == 200 and body["results"][0]["score"] == 1.0
        assert server.requests == 1  # nothing of the refused requests reached the judge


@pytest.mark.timeout(60)
def test_idle_half_open_and_slow_body_clients_are_closed_after_the_read_timeout(judge_server):
    server = judge_server()
    with ServiceThread(_config(server, read_timeout_s=0.5)) as svc:
        silent, partial, slow_body = _connect(svc.port), _connect(svc.port), _connect(svc.port)
        partial.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Le")  # a head that never ends
        slow_body.sendall(_head("/score", len(ITEM)) + ITEM[:10])  # a body that never ends
        status, body = _answer(slow_body)
        waited = [_closed_after(s) for s in (silent, partial, slow_body)]
        for s in (silent, partial, slow_body):
            s.close()
        assert status == 408 and body["error"]["code"] == "body_timeout"
        assert all(w < 10 for w in waited), waited  # closed, not held (the default would be an hour)
        assert _get(svc.url + "/health")[0] == 200


@pytest.mark.timeout(60)
def test_with_the_cap_full_of_idle_connections_health_and_score_still_answer_fast(judge_server):
    server = judge_server()
    with ServiceThread(_config(server, max_connections=16, read_timeout_s=60)) as svc:
        idle = [_connect(svc.port) for _ in range(60)]
        for s in idle[::2]:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # half of them half-open
        time.sleep(0.2)
        status, _, took = _get(svc.url + "/health")
        assert status == 200 and took < 5, took
        status, body, took = _get(svc.url + "/score", data=ITEM)
        assert status == 200 and body["results"][0]["score"] == 1.0 and took < 5, took
        live = [h for h in svc._runner.server.connections if h.transport is not None]
        assert len(live) <= 16
        closed = sum(1 for s in idle if _closed_after(s, limit=0.05) < 1)
        for s in idle:
            s.close()
        assert closed >= 60 - 16


@pytest.mark.timeout(60)
def test_a_connection_past_the_cap_is_refused_at_once_when_every_connection_is_busy(judge_server):
    server = judge_server(latency_s=1.5)
    with ServiceThread(_config(server, max_connections=2)) as svc:
        answers: list = []
        bodies = [json.dumps({"items": [{"prompt": "Capital of France?", "response": f"Paris ({i})."}]}).encode()
                  for i in range(2)]  # two different items (identical ones would share one judge call)
        busy = [threading.Thread(target=lambda b=b: answers.append(_get(svc.url + "/score", data=b))) for b in bodies]
        for t in busy:
            t.start()
        deadline = time.monotonic() + 10
        while server.requests < 2 and time.monotonic() < deadline:  # both requests are at the judge
            time.sleep(0.01)
        with _connect(svc.port) as sock:
            start = time.monotonic()
            try:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                status, body = _answer(sock)
            except (ConnectionResetError, BrokenPipeError, AssertionError):  # refused before the 503 was read
                status, body = 503, {"error": {"code": "too_many_connections"}}
            took = time.monotonic() - start
        for t in busy:
            t.join(30)
        assert status == 503 and body["error"]["code"] == "too_many_connections" and took < 1.0
        assert [a[0] for a in answers] == [200, 200]
        assert _get(svc.url + "/health")[0] == 200  # free again


@pytest.mark.timeout(120)
def test_three_hundred_half_open_clients_under_a_256_descriptor_limit(judge_server, tmp_path):
    """The audit's case: 300 half-open clients against a service limited to 256 descriptors held a normal
    request for 10.6 s, and 250 of them were still open after 75 s."""
    server = judge_server()
    path = tmp_path / "reward.yaml"
    path.write_text(json.dumps({"judge": {"model": "judge", "base_url": server.base_url}, "rubric": RUBRIC,
                                "deadline_s": 30, "serve": {"read_timeout_s": 3}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rubric_reward.cli", "serve", "--config", str(path), "--port", "0", "--no-access-log"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))
    clients: list[socket.socket] = []
    try:
        line = proc.stdout.readline()
        assert "listening on" in line, (line, proc.stderr.read())
        port = int(line.rsplit(":", 1)[1])
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            if i % 2:
                s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\n")
            clients.append(s)
        status, _, took = _get(f"http://127.0.0.1:{port}/health")
        assert status == 200 and took < 3, took
        status, body, took = _get(f"http://127.0.0.1:{port}/score", data=ITEM)
        assert status == 200 and body["results"][0]["score"] == 1.0 and took < 3, took
        time.sleep(3.5)  # past serve.read_timeout_s: every half-open client is closed
        still_open = sum(1 for s in clients if _closed_after(s, limit=0.2) >= 0.2)
        assert still_open == 0, still_open
    finally:
        for s in clients:
            s.close()
        proc.terminate()
        proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()


def test_the_settings_are_checked_and_the_default_cap_follows_the_descriptor_limit():
    from rubric_reward.serve.config import ServerSettings

    with pytest.raises(ValueError, match="read_timeout_s"):
        ServeConfig.from_dict({"judge": "x", "serve": {"read_timeout_s": 0}})
    with pytest.raises(ValueError, match="max_connections"):
        ServeConfig.from_dict({"judge": "x", "serve": {"max_connections": 0}})
    assert ServerSettings(max_connections=7).connection_cap() == 7
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    expected = 1024 if soft == resource.RLIM_INFINITY else max(8, min(1024, soft // 4))
    assert ServerSettings().connection_cap() == expected
