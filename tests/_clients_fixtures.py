"""Shared helpers for the judge-client tests (kept out of conftest.py to avoid merge conflicts)."""

from __future__ import annotations

import asyncio
import os

import pytest

from rubric_reward.judges import limits
from rubric_reward.rubric import Rubric
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

SENTINEL_KEY = "sk-SENTINEL-7f3a9c-do-not-log"


def rubric(n: int = 3, **extra) -> Rubric:
    return Rubric.from_obj([{"name": f"c{i}", "requirement": f"Requirement number {i}."} for i in range(n)], **extra)


def items(n: int, words: int = 5) -> list[dict]:
    return [{"prompt": "Write a short answer.", "response": " ".join(["word"] * words) + f" #{i}"} for i in range(n)]


def run(coro):
    return asyncio.run(coro)


def ask(judge, *requests):
    """Send ``requests`` concurrently on a fresh event loop, then close the judge's sessions."""

    async def go():
        try:
            return await asyncio.gather(*(judge.complete(r) for r in requests))
        finally:
            await judge.aclose()

    return run(go())


@pytest.fixture(autouse=True)
def fresh_limiters(monkeypatch, tmp_path_factory):
    """Each test gets its own endpoint limiters (the registry is process-wide) and lock-file folder."""
    monkeypatch.setenv("RUBRIC_REWARD_LIMIT_DIR", str(tmp_path_factory.mktemp("limits")))
    limits._REGISTRY.clear()
    yield
    limits._REGISTRY.clear()


@pytest.fixture
def server():
    with JudgeServer(ScriptedJudge()) as srv:
        yield srv


@pytest.fixture
def sentinel_env(monkeypatch):
    monkeypatch.setenv("RR_TEST_JUDGE_KEY", SENTINEL_KEY)
    return "RR_TEST_JUDGE_KEY"


@pytest.fixture(scope="module")
def litellm_module():
    """Import litellm once per test module (the import takes several seconds)."""
    from rubric_reward.judges.litellm_backend import import_litellm

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return import_litellm()
