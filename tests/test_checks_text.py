"""text:repeats_itself and text:echoes_prompt: one rule each for the rubric check and the GRPO summary's indicator."""

import pytest

from rubric_reward import Rubric
from rubric_reward.checks import run_check, validate_check
from rubric_reward.recipes.grpo.hacks import contained_in_prompt, repetitive

SEED_3 = "* first:\n*\n*\n*\n* second:\n*\n*\n*\n* third:\n*\n*\n*\n"  # a best completion of a GRPO run
FINE = "Tea: boil water, warm the pot, steep the leaves for four minutes, then pour and add milk if you like."


@pytest.mark.parametrize("text, met", [
    (SEED_3, True),
    ("1. *First*: " + "First-line: " * 16, True),  # issue 27's example: 17 words, 3 distinct
    ("a\nA \n  a", True),  # case and spacing folded
    (FINE, False),
    ("- one\n- two\n- three", False),
    ("", False),
])
def test_repeats_itself(text, met):
    assert run_check("text:repeats_itself", text) is met
    assert repetitive([text])["count"] == int(met)  # the summary's indicator counts by the same rule


def test_validation_names_the_problem():
    validate_check("text:repeats_itself")
    with pytest.raises(ValueError, match="unknown check 'text:repeat'"):
        validate_check("text:repeat")
    with pytest.raises(ValueError, match="takes no kwargs"):
        validate_check("text:repeats_itself", {"n": 3})


def test_a_penalty_in_a_rubric_needs_no_judge():
    from rubric_reward import Scorer

    rubric = Rubric.from_obj([{"name": "on_topic", "check": "ifeval:keywords:existence", "kwargs": {"keywords": ["tea"]}},
                              {"name": "repeats_itself", "check": "text:repeats_itself", "weight": -1}])
    with Scorer(rubric) as scorer:
        good, bad = scorer.score_batch([("Make tea.", FINE), ("Make tea.", "tea\ntea\ntea\ntea")])
    assert good.score == 1.0 and bad.score == 0.0


BULLETS = [{"role": "user", "content": "Describe the ocean. Answer with exactly 3 markdown bullet points, like:\n"
                                       "* first\n* second\n* third"}]


@pytest.mark.parametrize("text, met", [
    ("* *first*\n* *second*\n* *third*", True),  # the example copied whole: seed 4 of the offline default learnt it
    ("* First:\n* Second:\n* Third:", True),
    ("Answer: the ocean", True),  # an opener, then words of the task
    ("", True),
    ("* First: waves.\n* Second: salt.\n* Third: whales.", False),
    ("The ocean is deep and salty.", False),
])
def test_echoes_prompt_reads_the_items_prompt(text, met):
    assert run_check("text:echoes_prompt", text, prompt=BULLETS) is met
    assert contained_in_prompt([BULLETS], [text])["count"] == int(met)  # the summary's indicator: the same rule


def test_echo_penalty_in_a_rubric_needs_no_judge():
    from rubric_reward import Scorer

    rubric = Rubric.from_obj([
        {"name": "bullets", "check": "ifeval:detectable_format:number_bullet_lists", "weight": 2,
         "kwargs": {"num_bullets": 3}},
        {"name": "on_topic", "check": "ifeval:keywords:existence", "weight": 2, "kwargs": {"keywords": ["ocean"]}},
        {"name": "echoes_prompt", "check": "text:echoes_prompt", "weight": -4}])
    real = "* The ocean is deep.\n* It is salty.\n* Whales live there."
    with Scorer(rubric) as scorer:
        copy, answer = scorer.score_batch([(BULLETS, "* first\n* second\n* third"), (BULLETS, real)])
    assert copy.score == 0.0 and answer.score == 1.0  # without the penalty the copy would score 0.5
