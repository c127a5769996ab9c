"""The loop's held-out comparison and its rubric-gaming guard, checked against scipy on synthetic outcomes."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from scipy.stats import binomtest

from rubric_reward.recipes.generator_dpo.gaming import adegenerate_scores, degenerate_responses, required_phrase
from rubric_reward.recipes.generator_dpo.heldout import render_heldout_table, summarize_outcomes
from rubric_reward.recipes.generator_dpo.loop_config import HeldoutConfig
from rubric_reward.rubric import Rubric


def _outcomes(credits: dict[str, list[float | None]], checks: int = 0, exploitable: bool = False) -> dict:
    rubrics = [{"id": pid, "sample": 0, "ok": True, "n_criteria": 2, "n_checks": checks, "exploitable": exploitable}
               for pid in credits]
    pairs = [{"id": pid, "pair": n, "sample": 0, "credit": c} for pid, cs in credits.items() for n, c in enumerate(cs)]
    return {"rubrics": rubrics, "pairs": pairs, "generator": "g"}


def test_summary_numbers_match_a_recomputation():
    rng = np.random.default_rng(0)
    ids = [f"p{i}" for i in range(12)]
    base = {p: [float(x) for x in rng.choice([0.0, 0.5, 1.0], 5, p=[0.3, 0.4, 0.3])] for p in ids}
    trained = {p: [min(1.0, x + 0.5) if i % 2 else x for i, x in enumerate(v)] for p, v in base.items()}
    trained["p0"][0] = None  # a pair whose scoring failed: left out of both sides
    h = HeldoutConfig(n_resamples=500)
    out = summarize_outcomes(_outcomes(base), _outcomes(trained, checks=1), h)
    keys = [(p, n) for p in ids for n in range(5) if not (p == "p0" and n == 0)]
    b = np.array([base[p][n] for p, n in keys])
    t = np.array([trained[p][n] for p, n in keys])
    assert out["n_pairs"] == 59 and out["n_failed"] == 1 and out["n_prompts"] == 12
    assert out["base"]["agreement"] == pytest.approx(b.mean()) and out["trained"]["agreement"] == pytest.approx(t.mean())
    assert out["difference"]["estimate"] == pytest.approx((t - b).mean())
    better, worse = int((t > b).sum()), int((t < b).sum())
    assert worse == 0 and out["discordant"] == {"trained_better": better, "base_better": 0}
    assert out["pvalue"] == pytest.approx(binomtest(better, better + worse).pvalue)
    assert 0 < out["difference"]["low"] <= out["difference"]["estimate"] <= out["difference"]["high"]
    assert out["verdict"].startswith("the trained generator agrees more with the labels")
    assert out["trained"]["checkable_share"] == 0.5 and out["base"]["checkable_share"] == 0.0
    assert (out["base"]["correct"], out["base"]["ties"], out["base"]["wrong"]) == (
        int((b > 0.5).sum()), int((b == 0.5).sum()), int((b < 0.5).sum()))
    # ties are ties: identical outcomes are no difference, whatever the agreement
    same = summarize_outcomes(_outcomes(base), _outcomes(base), h)
    assert same["pvalue"] == 1.0 and same["difference"]["estimate"] == 0.0
    assert same["verdict"] == "the two generators' rubrics decide every pair alike: no difference"


def test_the_table_is_honest_about_noise():
    h = HeldoutConfig(n_resamples=500)
    base = {f"p{i}": [1.0, 0.0, 0.5] for i in range(6)}
    trained = {f"p{i}": ([1.0, 1.0, 0.5] if i < 2 else [1.0, 0.0, 0.0] if i == 2 else [1.0, 0.0, 0.5])
               for i in range(6)}
    out = summarize_outcomes(_outcomes(base), _outcomes(trained, exploitable=True), h)
    assert out["verdict"].startswith("no difference distinguishable from zero")
    assert "trained better on 2 pairs, base better on 1" in out["verdict"]
    out.update(prompts={"source": "labelled:heldout", "n": 6, "pairs": 18}, leaked=0)
    table = render_heldout_table([out])
    assert "| base | 6/6 | 18 |" in table and "| iter_1 | 6/6 | 18 (0 failed) |" in table and "100% |" in table
    assert "no difference distinguishable from zero" in table
    assert "cut off at max_tokens" not in table  # outcomes from before the count: no line
    cut = summarize_outcomes({**_outcomes(base), "cut_off": {"kept": 3, "lost": 1}},
                             {**_outcomes(trained), "cut_off": {"kept": 5, "lost": 0}}, h)
    cut.update(prompts={"source": "labelled:heldout", "n": 6, "pairs": 18}, leaked=0)
    assert ("complete lines / left without a rubric: base 3 / 1, iter_1 5 / 0."
            in render_heldout_table([cut]))


def test_cut_off_answers_are_counted_from_the_journal(tmp_path):
    from rubric_reward.recipes.generator_dpo.heldout import _cut_off

    path = tmp_path / "rubrics.jsonl"
    rows = [{"id": "a", "ok": True, "repairs": ["named the rubric",
                                                 "kept the complete lines of an answer cut off at max_tokens=128"]},
            {"id": "b", "ok": False, "error": "no usable rubric after 2 ask(s): the answer was cut off at "
                                              "max_tokens=128"},
            {"id": "c", "ok": True, "repairs": []}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _cut_off(path) == {"kept": 1, "lost": 1}


def test_degenerate_responses_and_the_exploitable_rule():
    ins = [{"check": "ifeval:startend:end_checker", "kwargs": {"end_phrase": "See you soon"}}]
    assert required_phrase("Write a note.", ins) == "See you soon"
    assert required_phrase('End with the exact phrase "Best wishes".') == "Best wishes"
    assert required_phrase("Write a poem.", [{"check": "ifeval:keywords:existence",
                                              "kwargs": {"keywords": ["sled", "cocoa"]}}]) == "sled cocoa"
    kinds = degenerate_responses("Write a note. Do not use any commas.")
    assert kinds == {"empty": "", "prompt_copy": "Write a note. Do not use any commas.", "one_word": "Yes"}

    from rubric_reward.scorer import Scorer

    checks_only = Rubric.from_obj({"name": "r", "criteria": [
        {"name": "short", "check": "ifeval:length_constraints:number_words",
         "kwargs": {"relation": "less than", "num_words": 40}},
        {"name": "no_comma", "check": "ifeval:punctuation:no_comma"}]})
    long_enough = Rubric.from_obj({"name": "r", "criteria": [
        {"name": "long", "check": "ifeval:length_constraints:number_words",
         "kwargs": {"relation": "at least", "num_words": 20}}]})
    scorer = Scorer()  # checks need no judge

    async def run(rubric: Rubric) -> dict:
        try:
            return await adegenerate_scores(scorer, "Write a note, please.", rubric, ins, 0.5)
        finally:
            await scorer.aclose()

    gamed = asyncio.run(run(checks_only))
    assert gamed["exploitable"] and "one_word" in gamed["by"] and gamed["scores"]["one_word"] == 1.0
    safe = asyncio.run(run(long_enough))
    assert not safe["exploitable"] and all(s in (None, 0.0) for s in safe["scores"].values())


def test_per_instruction_type_table_on_synthetic_outcomes():
    """Right check, exact check, validity and exploitable share per instruction type, McNemar where paired."""
    from scipy.stats import binomtest

    from rubric_reward.generation.prompt_rows import PromptRow
    from rubric_reward.recipes.generator_dpo.heldout import instruction_type, render_type_table, type_stats

    words = {"check": "ifeval:length_constraints:number_words", "kwargs": {"relation": "less than", "num_words": 50}}
    comma = {"check": "ifeval:punctuation:no_comma"}
    rows = [PromptRow(f"w{i}", "p", (), (words,)) for i in range(8)] + [PromptRow("c0", "p", (), (comma, words))]
    exact = {"name": "n", "check": "ifeval_loose:length_constraints:number_words",
             "kwargs": {"relation": "Less than", "num_words": 50.0}, "weight": 2}
    right = {**exact, "kwargs": {"relation": "less than", "num_words": 80}}
    judged = {"name": "j", "requirement": "The response is short.", "weight": 1}

    def outcomes(crits: dict[str, list[dict] | None], exploitable: set[str] = frozenset()) -> dict:
        return {"rubrics": [{"id": pid, "sample": 0, "ok": c is not None, "exploitable": pid in exploitable,
                             **({"rubric": {"name": "r", "criteria": c}} if c is not None else {})}
                            for pid, c in crits.items()], "pairs": []}

    # base: no checks, w7 invalid; trained: exact on w0-w4, right (wrong value) on w5, w6 judged only, w7 invalid
    base = outcomes({**{f"w{i}": [judged] for i in range(7)}, "w7": None, "c0": [judged]}, exploitable={"w0", "w1"})
    trained = outcomes({**{f"w{i}": [exact] for i in range(5)}, "w5": [right], "w6": [judged], "w7": [judged],
                        "c0": [{"name": "c", "check": "ifeval:punctuation:no_comma", "weight": 1}]},
                       exploitable={"w0"})
    stats = type_stats(base, trained, rows)
    assert instruction_type("ifeval_loose:punctuation:no_comma") == "punctuation:no_comma"
    assert set(stats) == {"length_constraints:number_words", "punctuation:no_comma", "all"}
    w = stats["length_constraints:number_words"]
    assert (w["prompts"], w["rubrics"]) == (9, 9)
    assert (w["base"]["right"], w["base"]["exact"], w["base"]["valid"]) == (0, 0, 8)
    assert (w["trained"]["right"], w["trained"]["exact"], w["trained"]["valid"]) == (6, 5, 9)
    assert w["trained"]["right_share"] == pytest.approx(6 / 9) and w["base"]["exploitable_share"] == pytest.approx(2 / 8)
    assert w["mcnemar"]["right"] == {"trained_better": 6, "base_better": 0, "pvalue": pytest.approx(binomtest(6, 6).pvalue)}
    assert w["mcnemar"]["exact"]["pvalue"] == pytest.approx(binomtest(5, 5).pvalue)
    assert w["mcnemar"]["valid"] == {"trained_better": 1, "base_better": 0, "pvalue": 1.0}
    c = stats["punctuation:no_comma"]
    assert (c["prompts"], c["trained"]["exact"], c["base"]["exact"]) == (1, 1, 0)  # no kwargs: right is exact
    assert stats["all"]["rubrics"] == 10 and stats["all"]["trained"]["exact"] == 6
    # a penalty check of the right type is not "carrying" the instruction
    penal = type_stats(base, outcomes({"c0": [{"name": "c", "check": "ifeval:punctuation:no_comma", "weight": -1}]}),
                       rows[-1:])
    assert penal["punctuation:no_comma"]["trained"]["right"] == 0

    result = {"by_type": stats}
    table = render_type_table([result, result])
    assert "| length_constraints:number_words | 9 | base | 89% | 0% (0/9) | 0% (0/9) | 25% | - | - | - |" in table
    assert "| length_constraints:number_words | 9 | iter_2 | 100% | 67% (6/9) | 56% (5/9) | 11% |" in table
    assert "(+6/-0)" in table and table.count("| all |") == 3
    assert render_type_table([{"verdict": "old file"}]) == ""
