"""Screening of degenerate responses: the cases, and the grader hook (no judge call, recorded)."""

from __future__ import annotations

import json

import pytest

from rubric_reward import Scorer
from rubric_reward.rubric import load_rubric
from rubric_reward.guards.degenerate import screen_response

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


QA = "What is the capital of France?"
ENDING = "Write a short poem about cats. End your response with the exact phrase 'Is there anything else I can help with?'"
CHOICE = "Which city is larger?\nA) Paris\nB) Lyon\nAnswer yes or no, or pick red, green or blue."
BULLETS = "Describe the ocean. Answer with exactly 3 markdown bullet points, like:\n* first\n* second\n* third"
FULL = {"criteria": [{"name": "correct_city", "requirement": "The response names the capital of France."},
                     {"name": "concise", "requirement": "The response is one sentence or shorter."},
                     {"name": "style", "requirement": "Writing quality.",
                      "options": [{"label": "poor", "value": 0}, {"label": "good", "value": 1}]}]}
FULL_TEXT = "\n".join(f"- {c['name']}: {c['requirement']}" for c in FULL["criteria"])


# Each reached a judge that says MET to everything before the screen normalised and read the rubric.
@pytest.mark.parametrize(("response", "prompt", "reason"), [
    ("Solution\n\nSolution", None, "master_key"),
    ("Thought process: " * 20, None, "master_key"),
    ("Sol\u200bution", None, "master_key"),
    ("\u200bSolution\u2060", None, "master_key"),
    ("\uff33\uff4f\uff4c\uff55\uff54\uff49\uff4f\uff4e", None, "master_key"),  # fullwidth
    ("\U0001d412\U0001d428\U0001d425\U0001d42e\U0001d42d\U0001d422\U0001d428\U0001d427", None, "master_key"),  # bold
    ("S\u0336olution", None, "master_key"),  # combining strike-through
    ("Final answer: Solution.", None, "master_key"),
    ("解答解答", None, "master_key"),
    (FULL_TEXT, None, "rubric_echo"),
    (json.dumps(FULL), None, "rubric_echo"),
    ("The response names the capital of France.", None, "rubric_echo"),
    ("correct_city", None, "rubric_echo"),
    ("MET", None, "rubric_echo"),
    ("Good", None, "rubric_echo"),
    ("France", QA, "prompt_echo"),
    ("Answer: France", QA, "prompt_echo"),
    ("capital of France capital of France", QA, "prompt_echo"),
    ("Is there anything else I can help with?", ENDING, "prompt_echo"),
    ("cats", ENDING, "prompt_echo"),
    ("Q?", "Q?", "prompt_echo"),
    # the example of a format copied whole (seed 4 of the offline default learnt these): a run over several
    # list lines picks no alternative
    ("* first\n* second\n* third", BULLETS, "prompt_echo"),
    ("* *first*\n* *second*\n* *third*", BULLETS, "prompt_echo"),
    ("* First:\n* Second:\n* Third:\n*\n*\n*", BULLETS, "prompt_echo"),
    ("A) Paris\nB) Lyon", CHOICE, "prompt_echo"),
])
def test_guard_gaps(response, prompt, reason):
    assert screen_response(response, prompt, rubric=load_rubric(FULL)) == reason


@pytest.mark.parametrize(("response", "prompt"), [
    ("Paris", QA),
    ("Paris is the capital of France.", QA),
    ("4", "What is 2+2?"),
    ("2", "What is 2+2?"),  # numbers go to the judge
    ("B", CHOICE), ("Lyon", CHOICE), ("B) Lyon", CHOICE), ("yes", CHOICE), ("no", CHOICE), ("Green", CHOICE),
    ("red", CHOICE),
    ("No", "Reply yes/no: is the sky green?"),
    ("The answer is 4.", None),
    ("5", None),
    ("Cats nap in sun. Is there anything else I can help with?", ENDING),
    ("* First: waves.\n* Second: salt.\n* Third: whales.", BULLETS),
])
def test_short_real_answers_pass(response, prompt):
    assert screen_response(response, prompt, rubric=load_rubric(FULL)) is None


@pytest.mark.timeout(30)
def test_guard_gaps_get_no_judge_call(judge_server):
    server = judge_server({"style": "good"}, default="MET")
    responses = [(None, FULL_TEXT), (None, "Solution\n\nSolution"), (None, "Thought process: " * 20),
                 (None, "Sol\u200bution"), (None, "\uff33\uff4f\uff4c\uff55\uff54\uff49\uff4f\uff4e"),
                 (ENDING, "Is there anything else I can help with?"), (QA, "Paris")]
    with Scorer(FULL, "judge", base_url=server.base_url) as scorer:
        results = scorer.score_batch(responses)
    assert [r.metadata.get("screened") for r in results] == [
        "rubric_echo", "master_key", "master_key", "master_key", "master_key", "prompt_echo", None]
    assert [r.score for r in results] == [0.0] * 6 + [1.0]
    assert server.requests == 3  # "Paris" only, one call per criterion


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
