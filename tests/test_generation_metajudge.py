"""The meta-judge: pairwise in both orders (ties, position bias, off-menu), pointwise, outcome."""

import json

import pytest

from rubric_reward.generation.metajudge import (
    MetaJudge, load_meta_rubric, parse_winner, render_rubric,
)
from rubric_reward.judges import JudgeConfig
from rubric_reward.rubric import Rubric
from rubric_reward.testing.judge_server import Fault, FaultPlan, JudgeServer, ScriptedJudge, token_logprobs

from _generation_fixtures import is_pairwise, prefer_more_criteria, router

SMALL = Rubric.from_obj({"name": "s", "criteria": ["The response is short.", "The response rhymes."]})
BIG = Rubric.from_obj({"name": "b", "criteria": [
    {"name": "lines", "requirement": "The poem has exactly three lines.", "weight": 3},
    {"name": "rain", "requirement": "The poem is about rain on a tin roof.", "weight": 3},
    {"name": "comma", "requirement": "The poem contains a comma.", "weight": -2},
]})


def _meta(srv, mode="pairwise", **cfg):
    return MetaJudge(JudgeConfig(model="meta", base_url=srv.base_url), config={"mode": mode, **cfg})


def test_render_and_parse():
    text = render_rubric(BIG)
    assert text.splitlines()[2] == "3. The poem contains a comma. (penalty, weight -2)"
    assert parse_winner('{"reason": "x", "winner": "B"}') == ("B", "x")
    assert parse_winner('<think>A or B?</think>```json\n{"winner": "A", "reason": "x"}\n```') == ("A", "x")
    # issue 32: only the judge's own answer, the whole reply, exact keys and labels
    for bad in ('{"winner": "C"}', '{"winner": "tie"}', "A", "", '{"reason": "no winner"}', '{"winner": ["A"]}',
                'noise {"reason": "x", "winner": "B"} tail', '{"reason": "x", "winner": "b"}',
                '{"reason": {"winner": "A"}, "winner": "B"}', '{"winner": "A", "reason": "x"} {"winner": "B"}',
                '{"verdict": "A", "reason": "x"}', '{"winner": "\u0391", "reason": "Greek alpha"}'):
        with pytest.raises(ValueError):
            parse_winner(bad)


def test_pairwise_asks_both_orders_and_gives_full_credit_when_consistent():
    with JudgeServer(ScriptedJudge(reply=router())) as srv:
        mj = _meta(srv)
        v = mj.compare("Write a haiku about rain on a tin roof.", BIG, SMALL)
        w = mj.compare("Write a haiku about rain on a tin roof.", SMALL, BIG)
        mj.close()
        bodies = [b for b in srv.bodies if is_pairwise(b)]
    assert (v.credit_a, v.outcome, v.order_inconsistent) == (1.0, "a", False)
    assert (w.credit_a, w.outcome) == (0.0, "b")
    assert [o["order"] for o in v.details["orders"]] == ["ab", "ba"]
    assert [o["winner"] for o in v.details["orders"]] == ["A", "B"]  # BIG shown first, then second
    assert len(bodies) == 4
    first_a = bodies[0]["messages"][1]["content"].split("## Rubric B")[0]
    assert bodies[0]["response_format"]["json_schema"]["schema"]["properties"]["winner"]["enum"] == ["A", "B"]
    # the two orders of one pair show the rubrics swapped
    orders = {"three lines" in b["messages"][1]["content"].split("## Rubric B")[0] for b in bodies[:2]}
    assert orders == {True, False} and "Rubric A" in first_a


def test_position_bias_is_recorded_as_a_tie():
    always_a = lambda body: json.dumps({"reason": "first is best", "winner": "A"})  # noqa: E731
    with JudgeServer(ScriptedJudge(reply=router(pairwise=always_a))) as srv:
        mj = _meta(srv)
        v = mj.compare("task", BIG, SMALL)
        mj.close()
    assert (v.credit_a, v.outcome, v.order_inconsistent, v.ok) == (0.5, "tie", True, True)


def test_off_menu_answer_is_reasked_then_recorded_as_a_failure():
    seen = []

    def off_menu(body):
        seen.append(len(body["messages"]))
        return json.dumps({"reason": "both fine", "winner": "tie"})

    with JudgeServer(ScriptedJudge(reply=router(pairwise=off_menu))) as srv:
        mj = _meta(srv)
        v = mj.compare("task", BIG, SMALL)
        mj.close()
    assert not v.ok and v.credit_a is None and v.outcome == "failed"
    assert "off-menu answer" in v.error and "'tie'" in v.error
    assert sorted(seen) == [2, 2, 4, 4]  # each order asked, then re-asked once
    assert all(len(o["answers"]) == 2 for o in v.details["orders"])

    def fixed_on_reask(body):
        return prefer_more_criteria(body) if len(body["messages"]) > 2 else "I think A"

    with JudgeServer(ScriptedJudge(reply=router(pairwise=fixed_on_reask))) as srv:
        mj = _meta(srv)
        v = mj.compare("task", BIG, SMALL)
        mj.close()
    assert v.ok and v.credit_a == 1.0


def test_meta_rubric_ships_and_pointwise_scores_with_the_scorer():
    meta = load_meta_rubric()
    assert 6 <= len(meta) <= 12 and any(c.weight < 0 for c in meta.criteria)
    assert {"double_counting", "rewards_verbosity", "atomic", "testable"} <= {c.name for c in meta.criteria}

    # scripted: a rubric with a penalty criterion is task-specific and misses no penalty; others the reverse
    verdicts = {"task_specific": lambda r, b: "MET" if "penalty" in r else "UNMET",
                "missing_penalty": lambda r, b: "UNMET" if "penalty" in r else "MET"}
    with JudgeServer(ScriptedJudge(verdicts, default="UNMET")) as srv:
        mj = _meta(srv, mode="pointwise")
        big = mj.score("Write a haiku.", BIG)
        v = mj.compare("Write a haiku.", SMALL, BIG)
        n_requests = srv.requests
        mj.close()
    assert big.ok and big.score == pytest.approx(3 / 14)
    assert [x["criterion"] for x in big.details["result"]["verdicts"]][:2] == ["task_specific", "covers_instructions"]
    assert (v.credit_a, v.outcome) == (0.0, "b") and v.details["a"]["score"] == 0.0
    assert n_requests == 2 * len(meta)  # BIG scored once (memoised), SMALL once


def test_outcome_mode_measures_agreement_with_human_labels():
    labels = [
        {"response_a": "It rains on the tin roof.", "response_b": "Sunny day.", "winner": "A"},
        {"response_a": "Dry.", "response_b": "Rain drums the tin roof.", "winner": "B"},
        {"response_a": "x", "response_b": "y", "winner": "tie"},
    ]
    rain = Rubric.from_obj({"name": "rain", "criteria": [{"name": "rain", "requirement": "Mentions rain."}]})
    sun = Rubric.from_obj({"name": "sun", "criteria": [{"name": "sun", "requirement": "Mentions sun."}]})
    verdicts = {"rain": lambda r, b: "MET" if "ain" in r else "UNMET",
                "sun": lambda r, b: "MET" if "Sunny" in r else "UNMET"}
    with JudgeServer(ScriptedJudge(verdicts)) as srv:
        mj = _meta(srv, mode="outcome")
        good = mj.score("Write about rain.", rain, labels=labels)
        v = mj.compare("Write about rain.", rain, sun, labels=labels)
        none = mj.compare("Write about rain.", rain, sun)
        mj.close()
    assert good.score == 1.0 and good.details["n"] == 2 and good.details["n_ties_dropped"] == 1
    assert v.details["b"]["score"] == 0.25  # sun: wrong on pair 1, a score tie (0.5) on pair 2
    assert (v.credit_a, v.outcome) == (1.0, "a")
    assert not none.ok and "needs human-labelled response pairs" in none.error


def test_bad_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="mode"):
        MetaJudge(JudgeConfig(model="m", base_url="http://127.0.0.1:9/v1"), config={"mode": "vibes"})



def _cut(content):
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "meta",
            "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 512, "total_tokens": 522}}
    return Fault(body=json.dumps(body))


def test_a_pick_whose_reason_ran_past_max_tokens_is_kept_but_a_cut_before_the_pick_is_not():
    rambling = '{"winner": "A", "reason": "because because because'
    faults = FaultPlan(fixed={1: _cut(rambling), 2: _cut(rambling)})
    with JudgeServer(ScriptedJudge(reply=router()), faults=faults) as srv:
        mj = _meta(srv)
        v = mj.compare("task", BIG, SMALL)
        mj.close()
    assert (v.credit_a, v.outcome) == (0.5, "tie")  # "A" in both orders: position bias, kept as a tie
    assert all(o["truncated"] and o["winner"] == "A" for o in v.details["orders"])

    early = '{"reason": "because because'
    faults = FaultPlan(fixed={i: _cut(early) for i in range(1, 5)})
    with JudgeServer(ScriptedJudge(reply=router()), faults=faults) as srv:
        mj = _meta(srv)
        v = mj.compare("task", BIG, SMALL)
        mj.close()
    assert not v.ok and "cut off at max_tokens=512" in v.error


class _SurePicker(ScriptedJudge):
    """Always answers "A" (position bias), but more sure of it when BIG is shown first."""

    def answer(self, body):
        if not is_pairwise(body):
            return super().answer(body)
        first = body["messages"][1]["content"].split("## Rubric B")[0]
        p_a = 0.9 if "three lines" in first else 0.6
        prefix = '{"winner": "'
        text = prefix + 'A", "reason": "first"}'
        tokens = token_logprobs(prefix, "A", '", "reason": "first"}', {"A": p_a, "B": 1 - p_a})
        return text, tokens if body.get("logprobs") else None


def test_soft_credit_reads_pick_probabilities_so_position_bias_cancels():
    with JudgeServer(_SurePicker()) as srv:
        hard = _meta(srv).compare("Write a haiku about rain on a tin roof.", BIG, SMALL)
        mj = _meta(srv, credit="soft")
        soft = mj.compare("Write a haiku about rain on a tin roof.", BIG, SMALL)
        flipped = mj.compare("Write a haiku about rain on a tin roof.", SMALL, BIG)
        mj.close()
        asked = [b.get("logprobs") for b in srv.bodies if is_pairwise(b)]
    assert (hard.credit_a, hard.outcome) == (0.5, "tie")
    # BIG shown first: P(A) = 0.9; SMALL shown first: P(A) = 0.6, so P(BIG) = 0.4
    assert soft.credit_a == pytest.approx(0.5 * 0.9 + 0.5 * 0.4)
    assert (soft.outcome, soft.order_inconsistent) == ("a", True)
    assert flipped.credit_a == pytest.approx(1 - soft.credit_a) and flipped.outcome == "b"
    assert [o["p"]["A"] for o in soft.details["orders"]] == pytest.approx([0.9, 0.6])
    assert asked[:2] == [None, None] and all(asked[2:])  # logprobs asked for only with soft credit


def test_soft_credit_falls_back_to_the_pick_without_logprobs():
    always_a = lambda body: json.dumps({"reason": "first is best", "winner": "A"})  # noqa: E731
    with JudgeServer(ScriptedJudge(reply=router(pairwise=always_a))) as srv:
        mj = _meta(srv, credit="soft")
        v = mj.compare("task", BIG, SMALL)
        mj.close()
    assert (v.credit_a, v.outcome, v.order_inconsistent) == (0.5, "tie", True)
    assert [o["p"] for o in v.details["orders"]] == [None, None]
    with pytest.raises(ValueError, match="'credit'"):
        MetaJudge(JudgeConfig(model="m", base_url="http://127.0.0.1:9/v1"), config={"credit": "fuzzy"})


def test_pointwise_can_rank_by_expected_score_when_hard_scores_tie():
    # every meta-rubric criterion MET (a tiny judge's habit) but with different confidence per rubric
    sure = lambda r, b: {"MET": 0.9, "UNMET": 0.1} if "three lines" in r else {"MET": 0.6, "UNMET": 0.4}  # noqa: E731
    with JudgeServer(ScriptedJudge(default=sure)) as srv:
        spec = JudgeConfig(model="meta", base_url=srv.base_url, logprobs=True)
        hard = MetaJudge(spec, config={"mode": "pointwise"})
        soft = MetaJudge(spec, config={"mode": "pointwise", "point_score": "expected_score"})
        tie = hard.compare("Write a haiku.", BIG, SMALL)
        ranked = soft.compare("Write a haiku.", BIG, SMALL)
        big = soft.score("Write a haiku.", BIG)
        hard.close()
        soft.close()
    assert (tie.credit_a, tie.outcome) == (0.5, "tie")
    assert tie.details["a"]["score"] == tie.details["b"]["score"]
    assert (ranked.credit_a, ranked.outcome) == (1.0, "a")
    assert big.score == pytest.approx(big.details["result"]["expected_score"])
    with pytest.raises(ValueError, match="'point_score'"):
        MetaJudge(spec, config={"mode": "pointwise", "point_score": "best"})
