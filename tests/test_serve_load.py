"""The reward service under load: injected judge faults, the judge limit, and SIGTERM while busy."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rubric_reward.serve import ServeConfig, ServiceThread
from rubric_reward.testing.judge_server import Fault, FaultPlan

ROOT = Path(__file__).resolve().parents[1]
RUBRIC = {"criteria": [{"name": "good", "requirement": "Says good.", "weight": 3},
                       {"name": "kind", "requirement": "Is kind.", "weight": 1}]}
SCRIPT = {"good": lambda response, body: "MET" if "good" in response else "UNMET",
          "kind": lambda response, body: "MET" if "kind" in response else "UNMET"}


def expected(response: str) -> float:
    return (3 * ("good" in response) + ("kind" in response)) / 4


async def _post_all(url: str, bodies: list[dict], headers: dict | None = None) -> list[tuple[int, dict]]:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=60)) as session:
        async def one(body: dict) -> tuple[int, dict]:
            async with session.post(url, json=body, headers=headers) as resp:
                return resp.status, await resp.json()

        return await asyncio.gather(*(one(b) for b in bodies))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_200_concurrent_requests_with_judge_faults(judge_server):
    faults = FaultPlan(rate=0.10, seed=7, kinds=(
        Fault(status=500), Fault(status=429, retry_after=0.05), Fault(hang_s=0.4),  # slow, not abandoned: an abandoned call still counts at the server
        Fault(body="{not json"), Fault(content="no verdict here"),
    ))
    server = judge_server(SCRIPT, faults=faults, latency_s=0.01)
    judge = {"model": "judge", "base_url": server.base_url, "max_concurrency": 8, "timeout_s": 2.0,
             "max_retries": 1, "backoff_base_s": 0.01, "backoff_max_s": 0.05}
    cfg = ServeConfig.from_dict({"judge": judge, "rubric": RUBRIC, "deadline_s": 20})
    words = ["good kind", "good", "kind", "meh"]
    # whole sentences: a bare "good kind" would be screened as an echo of the criterion names
    bodies = [{"items": [{"id": f"{i}-{j}", "prompt": "q",
                          "response": f"Our reply: a {words[(i + j) % 4]} answer, #{i}-{j}"}
                         for j in range(1 + i % 2)]} for i in range(200)]
    with ServiceThread(cfg) as svc:
        answers = asyncio.run(_post_all(svc.url + "/score", bodies))
    scored = unscored = 0
    for body, (status, answer) in zip(bodies, answers, strict=True):
        assert status == 200, answer
        assert [r["id"] for r in answer["results"]] == [x["id"] for x in body["items"]]
        for item, res in zip(body["items"], answer["results"], strict=True):
            if res["unscored"]:
                unscored += 1
                assert res["reward"] is None and res["score"] is None and res["error"]
                assert any(v["error"] for v in res["verdicts"])
            else:
                scored += 1
                assert res["reward"] == pytest.approx(expected(item["response"])), (item, res)
    print(f"scored {scored} unscored {unscored} judge requests {server.requests}")
    assert scored + unscored == 300 and scored >= 250
    assert server.max_in_flight <= 8  # the judge limit holds across all concurrent requests
    assert server.requests > 600  # faults really happened and were retried


def _serve(config_path: Path) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "rubric_reward.cli", "serve", "--config", str(config_path),
                             "--port", "0", "--no-access-log"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise AssertionError(f"service did not start: {line!r} {proc.stderr.read()}")
    return proc, int(line.rsplit(":", 1)[1])


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigterm_finishes_accepted_requests_and_refuses_new_ones(judge_server, tmp_path):
    import aiohttp

    server = judge_server(SCRIPT, latency_s=2.5)
    path = tmp_path / "reward.yaml"
    path.write_text(json.dumps({"judge": {"model": "judge", "base_url": server.base_url},
                                "rubric": RUBRIC, "deadline_s": 30}))
    proc, port = _serve(path)
    url = f"http://127.0.0.1:{port}/score"
    bodies = [{"items": [{"prompt": "q", "response": f"Our reply: a good kind answer, #{i}"}]} for i in range(10)]
    answers: list = []
    worker = threading.Thread(target=lambda: answers.extend(asyncio.run(_post_all(url, bodies))))
    try:
        worker.start()
        deadline = time.monotonic() + 20
        while server.requests < 20 and time.monotonic() < deadline:  # every request has reached the judge
            time.sleep(0.02)
        assert server.requests == 20 and server.in_flight > 0
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)

        async def late() -> str:
            try:
                async with aiohttp.ClientSession() as s, s.post(url, json=bodies[0]) as resp:
                    return f"HTTP {resp.status}"
            except aiohttp.ClientConnectionError as exc:
                return f"refused: {type(exc).__name__}"

        late_answer = asyncio.run(late())
        worker.join(30)
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        out = proc.stdout.read()
        proc.stdout.close()  # closed here, not left to the garbage collector (a ResourceWarning in a later test)
        proc.stderr.close()
    print("late request:", late_answer)
    assert late_answer.startswith("refused") or late_answer == "HTTP 503", late_answer
    assert len(answers) == 10 and all(status == 200 for status, _ in answers)
    assert all(a["results"][0]["score"] == 1.0 for _, a in answers)  # finished, not cut short
    assert rc == 0
    assert "stopped" in out
