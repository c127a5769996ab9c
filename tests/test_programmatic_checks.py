"""Programmatic criteria inside rubrics: local checks combined with judged criteria."""

import pytest

from rubric_reward import JudgeConfig, Rubric, RubricError, Scorer
from rubric_reward.checks import run_check
from rubric_reward.evaluation.ifeval_prompts import ifeval_row_to_rubric, load_ifeval

HYBRID = Rubric.from_obj({"criteria": [
    {"name": "helpful", "requirement": "The answer is helpful.", "weight": 3},
    {"name": "no_comma", "check": "ifeval:punctuation:no_comma", "weight": 1},
    {"name": "long", "check": "ifeval:length_constraints:number_words",
     "kwargs": {"relation": "at least", "num_words": 5}, "weight": 2},
    {"name": "shouty", "check": "ifeval:change_case:english_capital", "weight": -2},
]})


def test_hybrid_rubric_against_the_loopback_judge(judge_server):
    server = judge_server({"helpful": "MET"})
    with Scorer(HYBRID, JudgeConfig(model="m", base_url=server.base_url)) as scorer:
        good = scorer.score("q", "This answer has no commas and enough words.")
        bad = scorer.score("q", "I AM SHOUTING THIS ANSWER AT YOU, SORRY ABOUT THAT")
    assert server.requests == 2  # only the judged criterion costs a call
    assert good.score == pytest.approx(1.0)
    assert [v.label for v in good.verdicts] == ["MET", "MET", "MET", "UNMET"]
    assert [v.label for v in bad.verdicts] == ["MET", "UNMET", "MET", "MET"]
    assert bad.score == pytest.approx((3 + 2 - 2) / 6)
    assert bad.verdict("no_comma").reason.startswith("programmatic check")


def test_check_only_rubric_needs_no_judge():
    rubric = Rubric.from_obj([{"check": "ifeval:punctuation:no_comma"},
                              {"check": "ifeval:detectable_format:title"}])
    with Scorer(rubric) as scorer:
        assert scorer.score("q", "<<Title>> no commas here").score == 1.0
        assert scorer.score("q", "a, b").score == 0.0


def test_loose_checks_forgive_a_preamble():
    assert not run_check("ifeval:startend:end_checker", "Text. Is there anything else?\n**", {
        "end_phrase": "Is there anything else?"})
    assert run_check("ifeval_loose:startend:end_checker", "Text. Is there anything else?\n**", {
        "end_phrase": "Is there anything else?"})


def test_prompt_dependent_check_reads_the_conversation():
    conversation = [{"role": "system", "content": "x"}, {"role": "user", "content": "Repeat me."}]
    assert run_check("ifeval:combination:repeat_prompt", "Repeat me. And more.", {}, conversation)


@pytest.mark.parametrize(("criterion", "message"), [
    ({"check": "ifeval:punctuation:nope"}, "unknown IFEval instruction id"),
    ({"check": "regex:foo"}, "unknown check 'regex:foo'"),
    ({"check": "ifeval:length_constraints:number_words", "kwargs": {"relation": "about", "num_words": 3}},
     "relation"),
    ({"check": "ifeval:length_constraints:number_words", "kwargs": {"num_words": 3}}, "relation"),
    ({"check": "ifeval:punctuation:no_comma", "kwargs": {"colour": 1}}, "unknown kwarg"),
])
def test_bad_checks_fail_at_load_time(criterion, message):
    with pytest.raises(RubricError, match=message):
        Rubric.from_obj([criterion])


def test_ifeval_row_to_rubric_matches_the_evaluator():
    from rubric_reward.checks.ifeval import evaluate_row

    rows = load_ifeval()[:30]
    response = "Hello world. This is a short answer without any commas at all."
    for row in rows:
        rubric = ifeval_row_to_rubric(row)
        with Scorer(rubric) as scorer:
            result = scorer.score(row.prompt, response)
        expected = evaluate_row(row, response)
        assert [v.value == 1.0 for v in result.verdicts] == list(expected.follow_instruction_list)
        all_pass = Scorer(rubric, scoring={"all_or_nothing": True}).score(row.prompt, response).score
        assert all_pass == float(expected.follow_all_instructions)
