"""SQLite reply cache: keys, what is stored, what a hit costs, and that no secret is ever written."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from _runner_fixtures import RUBRIC, eval_config, read_results, serve, verdict_view, write_dataset

from rubric_reward.grading import criterion_prompt as prompts
from rubric_reward.judges.cache import SQLiteCache, cache_key, refreshing
from rubric_reward.items import Item
from rubric_reward.judges.base import ChatReply, ChatRequest, TokenLogprob
from rubric_reward.judges.config import JudgeConfig
from rubric_reward.results import ErrorKind, JudgeError, Usage
from rubric_reward.rubric import Rubric
from rubric_reward.evaluation.runner import run_eval

CONFIG = JudgeConfig(model="m", base_url="http://127.0.0.1:9000/v1", api_key_env="RR_KEY_A")


def request(**kw) -> ChatRequest:
    rubric = Rubric.from_obj(RUBRIC)
    call = prompts.render_call(rubric, Item("an answer", "a question"), rubric.criteria[:1])
    return ChatRequest(call.messages, schema=call.schema, **kw)


def ok_reply(text='{"reason": "r", "verdict": "MET"}', **kw) -> ChatReply:
    return ChatReply(text, usage=Usage(100, 20, 0), cost=0.25, finish_reason="stop", **kw)


# ---------------------------------------------------------------------------- keys
@pytest.mark.parametrize("change", [
    {"base_url": "http://127.0.0.1:9001/v1"},
    {"model": "other"},
    {"temperature": 0.7},
    {"top_p": 0.9},
    {"max_tokens": 100},
    {"seed": 7},
    {"extra_body": {"reasoning_effort": "low"}},
    {"structured_output": False},
    {"backend": "litellm"},
])
def test_changing_an_answer_setting_misses(change):
    assert cache_key(replace(CONFIG, **change), request()) != cache_key(CONFIG, request())


@pytest.mark.parametrize("change", [
    {"api_key_env": "RR_KEY_B"},
    {"name": "renamed"},
    {"timeout_s": 5.0},
    {"max_retries": 0},
    {"max_concurrency": 2},
    {"rpm": 10},
    {"input_cost_per_token": 1e-6},
])
def test_changing_only_secrets_or_operational_settings_hits(change):
    assert cache_key(replace(CONFIG, **change), request()) == cache_key(CONFIG, request())


def test_request_fields_are_in_the_key():
    base = cache_key(CONFIG, request())
    assert cache_key(CONFIG, request(sample_index=1)) != base
    assert cache_key(CONFIG, request(logprobs=True, top_logprobs=5)) != base
    assert cache_key(CONFIG, request(max_tokens=64)) != base
    other_schema = replace(request(), schema={"type": "object"})
    assert cache_key(CONFIG, other_schema) != base
    assert cache_key(CONFIG, replace(request(), schema=None)) != base


def test_changing_the_template_misses(monkeypatch):
    before = cache_key(CONFIG, request())
    monkeypatch.setattr(prompts, "SYSTEM_PROMPT", prompts.SYSTEM_PROMPT + "\n- Be brief.")
    assert cache_key(CONFIG, request()) != before


def test_replica_order_does_not_matter():
    a = replace(CONFIG, base_url=("http://a/v1", "http://b/v1"))
    b = replace(CONFIG, base_url=("http://b/v1", "http://a/v1"))
    assert cache_key(a, request()) == cache_key(b, request())


def test_the_api_key_itself_never_reaches_the_key(monkeypatch):
    monkeypatch.setenv("RR_KEY_A", "sk-first")
    k1 = cache_key(CONFIG, request())
    monkeypatch.setenv("RR_KEY_A", "sk-second")
    assert cache_key(CONFIG, request()) == k1


# ---------------------------------------------------------------------------- storage
def test_hit_costs_nothing_new_and_keeps_the_original_cost(tmp_path):
    cache = SQLiteCache(tmp_path / "c.sqlite")
    lp = (TokenLogprob("MET", -0.1, {"MET": -0.1, "UNMET": -2.3}),)
    assert asyncio.run(cache.get(CONFIG, request())) is None
    asyncio.run(cache.put(CONFIG, request(), ok_reply(logprobs=lp)))
    hit = asyncio.run(cache.get(CONFIG, request()))
    assert hit is not None and hit.cached and hit.cost == 0.0 and hit.usage == Usage()
    assert hit.text == '{"reason": "r", "verdict": "MET"}' and hit.finish_reason == "stop"
    assert hit.logprobs == lp
    entry = cache.lookup(CONFIG, request())
    assert entry.cost == 0.25 and entry.usage == Usage(100, 20, 0) and entry.model == "m"
    assert (cache.hits, cache.misses, cache.saved_cost) == (1, 1, 0.25)
    cache.close()
    again = SQLiteCache(tmp_path / "c.sqlite")  # persisted
    assert again.lookup(CONFIG, request()) is not None and len(again) == 1
    again.close()


@pytest.mark.parametrize("reply", [
    ChatReply(None, JudgeError(ErrorKind.SERVER, "HTTP 500", 500)),
    ChatReply(None, JudgeError(ErrorKind.TIMEOUT, "slow")),
    ChatReply("partial", JudgeError(ErrorKind.CONTENT_FILTER, "filtered"), finish_reason="content_filter"),
    ChatReply("partial", finish_reason="content_filter"),
    ChatReply('{"reason": "cut', finish_reason="length"),
    ChatReply("   ", finish_reason="stop"),
    ChatReply(None, finish_reason="stop"),
])
def test_failures_and_filtered_or_truncated_answers_are_not_cached(tmp_path, reply):
    with SQLiteCache(tmp_path / "c.sqlite") as cache:
        asyncio.run(cache.put(CONFIG, request(), reply))
        assert len(cache) == 0
        assert asyncio.run(cache.get(CONFIG, request())) is None


def test_wal_mode_and_no_request_content_stored(tmp_path):
    with SQLiteCache(tmp_path / "c.sqlite") as cache:
        cache.store(CONFIG, request(), ok_reply())
    conn = sqlite3.connect(tmp_path / "c.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cols = [r[1] for r in conn.execute("PRAGMA table_info(replies)")]
    assert "messages" not in cols and "config" not in cols
    conn.close()
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"an answer" not in blob and b"127.0.0.1:9000" not in blob


def test_refreshing_misses_but_still_writes(tmp_path):
    with SQLiteCache(tmp_path / "c.sqlite") as cache:
        cache.store(CONFIG, request(), ok_reply('{"verdict": "UNMET"}'))

        async def refreshed() -> ChatReply | None:
            with refreshing():
                got = await cache.get(CONFIG, request())
                await cache.put(CONFIG, request(), ok_reply('{"verdict": "MET"}'))
                return got

        assert asyncio.run(refreshed()) is None
        assert asyncio.run(cache.get(CONFIG, request())).text == '{"verdict": "MET"}'


def _writer(path: str, start: int) -> None:
    cache = SQLiteCache(path)
    for i in range(start, start + 150):
        cache.store(CONFIG, request(sample_index=i), ok_reply())
    cache.close()


def test_processes_can_share_one_file(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, s)) for s in (0, 1000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    with SQLiteCache(path) as cache:
        assert len(cache) == 300


# ---------------------------------------------------------------------------- end to end
def _files_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_eval_runs_hit_the_cache_across_key_rotation_and_never_store_the_key(tmp_path, monkeypatch):
    write_dataset(tmp_path, n=6)
    secret_a, secret_b = "sk-test-SECRET-aaaa1111", "sk-test-SECRET-bbbb2222"
    cache_path = str(tmp_path / "shared-cache.sqlite")
    with serve() as server:
        judge = {"api_key_env": "RR_TEST_JUDGE_KEY"}
        monkeypatch.setenv("RR_TEST_JUDGE_KEY", secret_a)
        first = run_eval(eval_config(tmp_path, server, out="run-a", judge=judge, cache=cache_path, report=True))
        assert first.status == "complete" and server.requests == 6 * 3
        assert all(h.get("Authorization") == f"Bearer {secret_a}" for h in server.headers)  # the key was used

        monkeypatch.setenv("RR_TEST_JUDGE_KEY", secret_b)
        server.reset_stats()
        second = run_eval(eval_config(tmp_path, server, out="run-b", judge=judge, cache=cache_path))
        assert server.requests == 0  # a new key is not a new answer
        assert second.spent == 0.0 and second.cache_hits == 18

        server.reset_stats()
        third = run_eval(eval_config(tmp_path, server, out="run-c", judge={**judge, "temperature": 0.5},
                                     cache=cache_path))
        assert server.requests == 18 and third.cache_hits == 0  # a sampling change is a miss

    a = {e["key"]: verdict_view(e) for e in read_results(tmp_path / "run-a")}
    b = {e["key"]: verdict_view(e) for e in read_results(tmp_path / "run-b")}
    assert a == b
    assert all(c["cached"] for e in read_results(tmp_path / "run-b") for c in e["result"]["calls"])
    for folder in (tmp_path / "run-a", tmp_path / "run-b", tmp_path / "run-c"):
        blob = _files_bytes(folder)
        assert secret_a.encode() not in blob and secret_b.encode() not in blob
        assert b"SECRET" not in blob
    cache_blob = b"".join(p.read_bytes() for p in tmp_path.glob("shared-cache.sqlite*"))
    assert cache_blob and b"SECRET" not in cache_blob
