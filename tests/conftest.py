"""Shared fixtures: a scripted OpenAI-compatible judge server on 127.0.0.1."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from rubric_reward.testing.judge_server import FaultPlan, JudgeServer, ScriptedJudge

# judge limits are shared per machine through lock files (limit_scope: auto): a test session keeps its own,
# apart from other sessions and runs on the machine (a test that needs another folder sets its own)
os.environ.setdefault("RUBRIC_REWARD_LIMIT_DIR", tempfile.mkdtemp(prefix="rubric_reward_test_limits_"))


@pytest.fixture
def judge_server() -> Iterator[callable]:
    """Factory: ``judge_server(verdicts, latency_s=..., faults=...)`` starts a server, stopped after the test."""
    servers: list[JudgeServer] = []

    def start(verdicts=None, *, default="MET", latency_s=0.0, faults: FaultPlan | None = None, **kw) -> JudgeServer:
        server = JudgeServer(ScriptedJudge(verdicts, default=default, **kw), latency_s=latency_s, faults=faults)
        servers.append(server.start())
        return server

    yield start
    for s in servers:
        s.stop()
