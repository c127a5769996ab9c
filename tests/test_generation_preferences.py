"""Preference building over the loopback server: rows, transcripts, skip rule, failures, resume."""

import json

import pytest

from rubric_reward.generation import rubric_text
from rubric_reward.generation.preferences import build_preferences
from rubric_reward.judges import JudgeConfig
from rubric_reward.rubric import load_rubric
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

from _generation_fixtures import is_generation, is_pairwise, router, task_of

pytest.importorskip("datasets")

PROMPTS = [{"id": f"p{i}", "prompt": f"Task {i}: write something."} for i in range(3)]


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _build(srv, out, prompts=PROMPTS, **cfg):
    gen = JudgeConfig(model="gen", base_url=srv.base_url, seed=0)
    meta = JudgeConfig(model="meta", base_url=srv.base_url)
    return build_preferences(prompts, out, generator=gen, meta_judge=meta,
                             config={"k": 4, "m": 4, **cfg}, progress=False)


def test_rows_transcripts_and_strengths(tmp_path):
    import datasets

    with JudgeServer(ScriptedJudge(reply=router())) as srv:
        s = _build(srv, tmp_path / "prefs")
        gen_bodies = [b for b in srv.bodies if is_generation(b)]
    assert (s.n_prompts, s.n_pairs, s.n_skipped, s.n_failed) == (3, 3, 0, 0)
    assert {b["temperature"] for b in gen_bodies} == {0.8} and len(gen_bodies) == 12
    ds = datasets.load_from_disk(str(s.dataset_path))
    assert ds.column_names == ["prompt", "chosen", "rejected", "metadata"] and len(ds) == 3
    row = ds[0]
    assert row["prompt"][0]["role"] == "system" and "Task 0: write something." in row["prompt"][1]["content"]
    chosen, rejected = load_rubric(json.loads(row["chosen"][0]["content"])), load_rubric(
        json.loads(row["rejected"][0]["content"]))
    assert row["chosen"][0]["role"] == "assistant" and len(chosen) > len(rejected)  # the scripted judge's taste
    meta = row["metadata"]
    assert meta["prompt_id"] == "p0" and meta["n_candidates"] == 4 and meta["n_pairs"] == 4
    assert meta["chosen_strength"] > meta["rejected_strength"] and meta["win_prob"] >= 0.55
    assert meta["mode"] == "pairwise" and meta["generator"] == "gen"
    transcripts = _lines(s.transcripts_path)
    assert len(transcripts) == 12 and all(len(t["details"]["orders"]) == 2 for t in transcripts)
    candidates = _lines(tmp_path / "prefs" / "candidates.jsonl")
    assert len(candidates) == 12 and all(c["ok"] for c in candidates)
    status = _lines(tmp_path / "prefs" / "prompts.jsonl")
    assert [x["status"] for x in status] == ["pair"] * 3
    p0 = status[0]
    assert rubric_text(chosen) == p0["pairs"][0]["chosen"] and set(p0["strengths"]) == {"0", "1", "2", "3"}
    manifest = json.loads((tmp_path / "prefs" / "manifest.json").read_text())
    assert manifest["n_pair"] == 3 and manifest["config"]["k"] == 4


def test_indistinguishable_candidates_are_skipped(tmp_path):
    always_a = lambda body: json.dumps({"reason": "first", "winner": "A"})  # noqa: E731
    with JudgeServer(ScriptedJudge(reply=router(pairwise=always_a))) as srv:
        s = _build(srv, tmp_path / "prefs", prompts=PROMPTS[:1])
    assert (s.n_pairs, s.n_skipped) == (0, 1)
    status = _lines(tmp_path / "prefs" / "prompts.jsonl")[0]
    assert status["status"] == "skipped" and status["reason"].startswith("indistinguishable")
    assert status["n_ties"] == status["n_pairs"] == 4
    assert all(t["order_inconsistent"] for t in _lines(s.transcripts_path))
    import datasets

    assert len(datasets.load_from_disk(str(s.dataset_path))) == 0


def test_failures_are_recorded_and_a_rerun_finishes_only_what_is_left(tmp_path):
    out = tmp_path / "prefs"
    state = {"broken": True}

    def generate(body):  # p1's generator output is unusable while broken
        if state["broken"] and task_of(body).startswith("Task 1"):
            return "not a rubric"
        return router()(body)

    def pairwise(body):  # the meta-judge answers off-menu for p2 while broken
        if state["broken"] and "Task 2" in body["messages"][1]["content"]:
            return '{"winner": "both"}'
        return router()(body)

    with JudgeServer(ScriptedJudge(reply=router(generate=generate, pairwise=pairwise))) as srv:
        s1 = _build(srv, out)
        assert (s1.n_pairs, s1.n_failed) == (1, 2)
        status = {x["id"]: x for x in _lines(out / "prompts.jsonl")}
        assert status["p1"]["status"] == "failed" and "0 of 4 candidates" in status["p1"]["reason"]
        assert set(status["p1"]["candidate_errors"]) == {"0", "1", "2", "3"}
        assert status["p2"]["status"] == "failed" and "every meta-judge comparison failed" in status["p2"]["reason"]
        assert all("off-menu" in e for e in status["p2"]["pair_errors"])
        failed_pairs = [t for t in _lines(out / "transcripts.jsonl") if t["prompt_id"] == "p2"]
        assert len(failed_pairs) == 4 and all(t["credit_a"] is None for t in failed_pairs)

        # a kill mid-write leaves a torn journal line; the rerun cuts it off and carries on
        with open(out / "transcripts.jsonl", "a") as f:
            f.write('{"key": "x", "cre')
        state["broken"] = False
        srv.reset_stats()
        s2 = _build(srv, out)
        gen_calls = [b for b in srv.bodies if is_generation(b)]
        pair_calls = [b for b in srv.bodies if is_pairwise(b)]
    assert (s2.n_pairs, s2.n_failed, s2.n_resumed) == (3, 0, 1)
    # p0 untouched; p1 regenerated (4 candidates, 4 pairs x 2 orders); p2 kept its candidates, re-judged 4 pairs
    assert {task_of(b)[:6] for b in gen_calls} == {"Task 1"} and len(gen_calls) == 4
    assert len(pair_calls) == 16
    status = _lines(out / "prompts.jsonl")
    assert [x["id"] for x in status] == ["p0", "p1", "p2"] and all(x["status"] == "pair" for x in status)
    import datasets

    assert datasets.load_from_disk(str(s2.dataset_path))["metadata"][1]["prompt_id"] == "p1"


def test_outcome_mode_uses_the_prompt_labels(tmp_path):
    prompts = [{"id": "rain", "prompt": "Write about rain.", "labels": [
        {"response_a": "Rain on the roof, point 0 and 1 and 2 and 3 and 4 and 5 and 6.", "response_b": "Sun.",
         "winner": "A"}]}]

    def judge(response, body):  # a criterion 'point N' holds when the response mentions N
        crit = body["messages"][-1]["content"]
        import re

        m = re.search(r"point (\d+)", crit)
        return "MET" if m and m.group(1) in response else "UNMET"

    with JudgeServer(ScriptedJudge(default=judge, reply=router())) as srv:
        gen = JudgeConfig(model="gen", base_url=srv.base_url, seed=0)
        meta = JudgeConfig(model="meta", base_url=srv.base_url)
        s = build_preferences(prompts, tmp_path / "o", generator=gen, meta_judge=meta, meta={"mode": "outcome"},
                              config={"k": 2, "m": 1}, progress=False)
    # every candidate rubric agrees with the single label: indistinguishable, skipped
    assert (s.n_prompts, s.n_skipped) == (1, 1)
    t = _lines(s.transcripts_path)[0]
    assert t["mode"] == "outcome" and t["details"]["a"]["score"] == 1.0


def test_changing_only_the_ranking_settings_makes_no_new_calls(tmp_path):
    with JudgeServer(ScriptedJudge(reply=router())) as srv:
        s1 = _build(srv, tmp_path / "prefs", prompts=PROMPTS[:2])
        srv.reset_stats()
        s2 = _build(srv, tmp_path / "prefs", prompts=PROMPTS[:2], min_win_prob=0.999, prior=1.0)
        assert srv.requests == 0
    assert (s1.n_pairs, s2.n_pairs, s2.n_skipped, s2.n_resumed) == (2, 0, 2, 0)
    status = _lines(tmp_path / "prefs" / "prompts.jsonl")
    assert all(x["reason"].startswith("indistinguishable") for x in status)


def test_pairs_per_prompt_takes_more_rows_from_the_same_judgements(tmp_path):
    import datasets

    out = tmp_path / "prefs"
    with JudgeServer(ScriptedJudge(reply=router())) as srv:
        one = _build(srv, out, prompts=PROMPTS[:2], m=6)
        calls = len(srv.bodies)
        two = _build(srv, out, prompts=PROMPTS[:2], m=6, pairs_per_prompt=2)
        assert len(srv.bodies) == calls  # re-ranking: candidates and judgements come from the journals
    assert (one.n_pairs, two.n_pairs, two.n_skipped) == (2, 4, 0)
    ds = datasets.load_from_disk(str(two.dataset_path))
    meta = ds["metadata"]
    assert [(m["prompt_id"], m["pair_rank"]) for m in meta] == [("p0", 0), ("p0", 1), ("p1", 0), ("p1", 1)]
    assert len({(m["prompt_id"], m["chosen_index"]) for m in meta} | {
        (m["prompt_id"], m["rejected_index"]) for m in meta}) == 8  # each candidate in one row at most
    for row in ds:  # the consistent judge: every row's chosen rubric has more criteria
        chosen, rejected = (load_rubric(json.loads(row[k][0]["content"])) for k in ("chosen", "rejected"))
        assert len(chosen) > len(rejected)
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["n_pair"], manifest["n_rows"], manifest["config"]["pairs_per_prompt"]) == (2, 4, 2)
