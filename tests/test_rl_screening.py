"""Screening of degenerate responses: the cases, and the grader hook (no judge call, recorded)."""

from __future__ import annotations

import pytest

from rubric_reward import Scorer
from rubric_reward.screening import screen_response

RUBRIC = {"criteria": [{"name": "helpful", "requirement": "Helpful."},
                       {"name": "harmful", "requirement": "Harmful.", "weight": -1}]}


@pytest.mark.parametrize(("response", "prompt", "reason"), [
    ("", None, "empty"),
    (" \n\t ", None, "whitespace"),
    (":", None, "punctuation"),
    ("...!?", None, "punctuation"),
    ("```\n```", None, "punctuation"),
    ("Thought process:", None, "master_key"),
    ("**Solution**", None, "master_key"),
    ("solution:", None, "master_key"),
    ("Let's solve this problem step by step.", None, "master_key"),
    ("解", None, "master_key"),
    ("What is 2+2?", "What is 2+2?", "prompt_echo"),
    ("what is 2+2? What is 2+2?", "What is 2+2?", "prompt_echo"),
    ("Tell me a joke", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a joke."}],
     "prompt_echo"),
])
def test_degenerate_cases(response, prompt, reason):
    assert screen_response(response, prompt) == reason


@pytest.mark.parametrize(("response", "prompt"), [
    ("4", "What is 2+2?"),
    ("Solution: x = 4", None),
    ("Thought process: add the two numbers, giving 4.", None),
    ("What is 2+2? It is 4.", "What is 2+2?"),
    ("The answer is 4.", None),
    ("42", None),
])
def test_real_answers_pass(response, prompt):
    assert screen_response(response, prompt) is None


def test_custom_phrases_replace_the_defaults():
    assert screen_response("Solution", phrases=["nope"]) is None
    assert screen_response("Nope!", phrases=["nope"]) == "master_key"


@pytest.mark.timeout(30)
def test_grader_screens_without_a_judge_call(judge_server):
    server = judge_server(default="MET")
    with Scorer(RUBRIC, "judge", base_url=server.base_url) as scorer:
        results = scorer.score_batch([("Q?", ":"), ("Q?", "Thought process:"), ("Q?", "Q?"), ("Q?", "A fine answer.")])
        assert server.requests == 2  # only the real answer, one call per criterion
        for r in results[:3]:
            assert r.score == 0.0 and r.calls == () and r.metadata["screened"]
            assert [v.label for v in r.verdicts] == ["UNMET", "MET"]  # each criterion at its worst
            assert all(v.judge == "screen" and "degenerate" in v.reason for v in r.verdicts)
        assert [r.metadata["screened"] for r in results[:3]] == ["punctuation", "master_key", "prompt_echo"]
        assert results[3].score == 0.0 and "screened" not in results[3].metadata  # judged: harmful MET
    with Scorer(RUBRIC, "judge", base_url=server.base_url, grading={"screen_degenerate": False}) as scorer:
        assert scorer.score("Q?", ":").metadata.get("screened") is None
        assert server.requests == 4


def test_check_only_rubrics_are_not_screened():
    rubric = {"criteria": [{"name": "no_comma", "check": "ifeval:punctuation:no_comma"}]}
    with Scorer(rubric) as scorer:  # no judge at all: programmatic checks decide, as the reference does
        result = scorer.score("Write without commas.", ":")
        assert result.score == 1.0 and "screened" not in result.metadata
