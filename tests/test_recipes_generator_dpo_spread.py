"""Where the signal is (issue 31): the loop measures the outcome meta-judge's spread on a probe of labelled pairs
first; a judge with no spread (always MET) makes outcome scoring use the check criteria only, and says so; a judge
that separates responses keeps every criterion. Scripted judges over the loopback server, no model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("datasets")

from rubric_reward.recipes.generator_dpo.loop import _stage_preferences, _write_summary  # noqa: E402
from rubric_reward.recipes.generator_dpo.loop_config import LoopConfig  # noqa: E402
from rubric_reward.recipes.generator_dpo.spread import (  # noqa: E402
    checks_only,
    decide_outcome_criteria,
    probe_pairs,
    spread_line,
)
from rubric_reward.generation.prompt_rows import load_prompts  # noqa: E402
from rubric_reward.rubric import Rubric  # noqa: E402
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge  # noqa: E402

SHORT = "A calm lake at dawn with mist."  # follows "fewer than 12 words": the better response
LONG = "The lake " + "is wide and blue and " * 4 + "still under the morning sky."

# candidates by sample: 0 = the right check plus a judged line, 1 = judged only, 2 = the wrong check
RUBRICS = [
    '1. [check] ifeval:length_constraints:number_words relation="less than" num_words=12 [3]\n'
    "2. The response describes the lake. [1]",
    "1. The response describes the lake. [2]\n2. The response is vivid. [1]",
    '1. [check] ifeval:length_constraints:number_words relation="at least" num_words=12 [3]',
]


def _generator_reply(body) -> str | None:
    text = json.dumps(body.get("messages"))
    if "rubric" not in text.lower() or "## Criterion" in text:
        return None
    seed = int(body.get("seed") or 0)
    return RUBRICS[seed % 3]


def _prompts(tmp_path: Path, n: int = 3) -> Path:
    rows = []
    for i in range(n):
        labels = [{"response_a": SHORT, "response_b": LONG, "winner": "A"},
                  {"response_a": LONG + f" ({i})", "response_b": SHORT, "winner": "B"}]
        rows.append({"id": f"p{i}", "prompt": f"Describe lake number {i} in fewer than 12 words.", "labels": labels})
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def generator_server():
    server = JudgeServer(ScriptedJudge(reply=_generator_reply)).start()
    yield server
    server.stop()


def _config(tmp_path: Path, judge: JudgeServer, **kw) -> LoopConfig:
    return LoopConfig.from_dict({
        "prompts": str(_prompts(tmp_path)), "generator": "scripted-generator", "out_dir": str(tmp_path / "run"),
        "meta_judge": {"model": "scripted-judge", "base_url": judge.base_url, "max_retries": 0},
        "meta": {"mode": "outcome"}, "outcome_criteria": "auto", "progress": False, "heldout": None,
        "generation": {"format": "list", "checks": True, "min_criteria": 1, "max_criteria": 6, "reasks": 0},
        "preferences": {"k": 3, "m": 3, "temperature": 0.8, "concurrency": 2}, **kw})


def _run_preferences(config: LoopConfig, gen: JudgeServer, spread: dict) -> tuple[dict, list[dict]]:
    out = Path(config.out_dir)
    it = out / "iter_1"
    it.mkdir(parents=True)
    spec = {"model": "scripted-generator", "base_url": gen.base_url, "max_retries": 0, "seed": 0,
            "temperature": 0.8}
    info = _stage_preferences(config, it, Path(config.prompts), spec, str(out / "cache.sqlite"), spread)
    transcripts = [json.loads(x) for x in (it / "preferences/transcripts.jsonl").read_text().splitlines()]
    return info, transcripts


def test_always_met_judge_has_no_spread_so_outcome_scoring_uses_checks_only(tmp_path, generator_server, capsys):
    judge = JudgeServer(ScriptedJudge(default="MET")).start()
    try:
        config = _config(tmp_path, judge, probe_pairs=4)
        out = Path(config.out_dir)
        out.mkdir(parents=True)
        rows = load_prompts(config.prompts)
        decision = decide_outcome_criteria(config, out, rows, str(out / "cache.sqlite"))
        probe = decision["probe"]
        assert decision["criteria"] == "checks" and decision["setting"] == "auto"
        assert (probe["pairs"], probe["ties"], probe["tie_share"], probe["met_share"]) == (4, 4, 1.0, 1.0)
        assert "no spread" in decision["reason"] and "4 of 4 probe pairs" in decision["reason"]
        assert json.loads((out / "spread.json").read_text())["criteria"] == "checks"
        probe_calls = judge.requests
        assert probe_calls == 7 * 3  # 4 pairs = 7 distinct (prompt, response) x 3 judged probe criteria
        # a second decision reads spread.json: no call
        assert decide_outcome_criteria(config, out, rows, str(out / "cache.sqlite")) == decision
        assert judge.requests == probe_calls

        info, transcripts = _run_preferences(config, generator_server, decision)
        assert info["outcome_criteria"] == "checks"
        assert judge.requests == probe_calls  # checks are decided by the program: not one judged verdict paid for
        assert transcripts and all(t["mode"] == "outcome" for t in transcripts)
        for t in transcripts:
            for side in ("a", "b"):
                assert t["details"][side]["details"]["criteria"] == "checks"
        assert info["n_pairs"] == 3  # the right check beats the wrong one on every prompt
        chosen = [json.loads(x) for x in (out / "iter_1/preferences/prompts.jsonl").read_text().splitlines()]
        assert all(c["status"] == "pair" and [(p["chosen_index"], p["rejected_index"]) for p in c["pairs"]] == [(0, 2)]
                   for c in chosen)
        # the judged-only candidate expresses no preference (agreement 0.5) without a call
        judged_only = [t["details"][s] for t in transcripts for s in "ab" if t["details"][s]["details"]["n_checks"] == 0]
        assert judged_only and all(d["score"] == 0.5 for d in judged_only)

        line = spread_line(decision)
        assert line.startswith("outcome criteria: check criteria only (auto)")
        (out / "iter_1/heldout.json").write_text(json.dumps(_fake_heldout()))
        summary = _write_summary(out, [{"heldout": {"heldout": str(out / "iter_1/heldout.json")}}], decision)
        assert f"Preferences: {line}." in summary and "Preferences: outcome criteria" in (out / "summary.md").read_text()
    finally:
        judge.stop()


def test_discriminating_judge_has_spread_so_every_criterion_is_scored(tmp_path, generator_server):
    def short_is_met(response: str, body) -> str:
        return "MET" if len(response.split()) < 12 else "UNMET"

    judge = JudgeServer(ScriptedJudge(default=short_is_met)).start()
    try:
        config = _config(tmp_path, judge, probe_pairs=5)
        out = Path(config.out_dir)
        out.mkdir(parents=True)
        decision = decide_outcome_criteria(config, out, load_prompts(config.prompts), str(out / "cache.sqlite"))
        probe = decision["probe"]
        assert decision["criteria"] == "all"
        assert (probe["pairs"], probe["ties"], probe["decided"], probe["agreement_decided"]) == (5, 0, 5, 1.0)
        assert "separates responses" in decision["reason"]
        before = judge.requests
        info, transcripts = _run_preferences(config, generator_server, decision)
        assert info["outcome_criteria"] == "all" and judge.requests > before  # judged criteria were asked
        assert all("criteria" not in t["details"][s]["details"] for t in transcripts for s in "ab")
    finally:
        judge.stop()


def test_settings_and_helpers(tmp_path):
    judge = "scripted"
    base = {"generator": "g", "meta_judge": judge, "meta": {"mode": "outcome"}}
    assert LoopConfig.from_dict(base).outcome_criteria == "all"  # auto is opt-in until measured on a whole loop
    with pytest.raises(ValueError, match="field 'outcome_criteria' must be one of auto, all, checks"):
        LoopConfig.from_dict({**base, "outcome_criteria": "some"})
    with pytest.raises(ValueError, match="'checks' needs the outcome meta-judge"):
        LoopConfig.from_dict({**base, "meta": {"mode": "pairwise"}, "outcome_criteria": "checks"})
    with pytest.raises(ValueError, match="field 'probe_max_ties' must be"):
        LoopConfig.from_dict({**base, "probe_max_ties": 0})
    # a forced setting and a non-outcome meta-judge decide without a probe
    for cfg, want in ((LoopConfig.from_dict({**base, "outcome_criteria": "checks"}), "checks"),
                      (LoopConfig.from_dict(base), "all"),
                      (LoopConfig.from_dict({**base, "meta": {"mode": "pairwise"}}), "all")):
        d = decide_outcome_criteria(cfg, tmp_path, [], None)
        assert d["criteria"] == want and d["probe"] is None
    mixed = Rubric.from_obj({"name": "r", "criteria": [
        {"name": "a", "requirement": "The response is kind.", "weight": 2},
        {"name": "b", "check": "ifeval:punctuation:no_comma", "weight": 3}]})
    assert [c.name for c in checks_only(mixed).criteria] == ["b"]
    assert checks_only(Rubric.from_obj({"name": "r", "criteria": [{"name": "a", "requirement": "x."}]})) is None

    class Row:
        def __init__(self, i, n):
            self.id, self.labels = i, [{"winner": w} for w in (["A", "tie", "B"] * 3)[:n]]

    picked = probe_pairs([Row("x", 3), Row("y", 1)], 3)
    assert [(r.id, p["winner"]) for r, p in picked] == [("x", "A"), ("y", "A"), ("x", "B")]  # ties left out


def _fake_heldout() -> dict:
    g = {"generator": "g", "agreement": 0.5, "ci": None, "correct": 0, "ties": 1, "wrong": 0, "rubrics": 1, "valid": 1,
         "validity": 1.0, "mean_criteria": 1.0, "checkable_share": 1.0, "exploitable": 0, "exploitable_share": 0.0}
    return {"n_pairs": 1, "n_prompts": 1, "n_failed": 0, "confidence": 0.95, "exploit_threshold": 0.5, "samples": 1,
            "base": g, "trained": g, "difference": {"estimate": 0.0, "low": 0.0, "high": 0.0}, "pvalue": 1.0,
            "discordant": {"trained_better": 0, "base_better": 0}, "verdict": "no difference",
            "prompts": {"source": "x", "n": 1, "pairs": 1}, "leaked": 0}
