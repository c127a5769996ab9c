"""Shared fixtures: a scripted OpenAI-compatible judge server on 127.0.0.1, and one tiny Qwen3 built from a config.

Helpers that are not fixtures live beside this file: ``_runner_fixtures.py`` (rubrics, items, judge configs for
the runner/cache/report tests), ``_clients_fixtures.py`` (judge-client tests), ``_generation_fixtures.py``
(scripted generator and meta-judge replies), and ``helpers/`` (scripts run in other interpreters)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen3 (config-built, saved once per session): read it, never write into it."""
    pytest.importorskip("transformers")
    from rubric_reward.testing.tiny_model import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "qwen3")
