"""Check settings grounded in the task (``generation.ground_checks``): counts, relations, listed words, quoted
phrases, subjects; checks the task gives no value for are dropped; judged criteria and weights are untouched."""

import json
from pathlib import Path

import pytest

import rubric_reward
from rubric_reward.generation import GenerationConfig, RubricGenerator, parse_rubric
from rubric_reward.generation.grounding import ground_check
from rubric_reward.judges import JudgeConfig
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

from _generation_fixtures import router

GROUNDED = GenerationConfig(format="list", checks=True, ground_checks=True, min_criteria=1, max_criteria=8)
WORDS = "ifeval:length_constraints:number_words"
SENTENCES = "ifeval:length_constraints:number_sentences"
BULLETS = "ifeval:detectable_format:number_bullet_lists"
EXISTENCE = "ifeval:keywords:existence"
FORBIDDEN = "ifeval:keywords:forbidden_words"
END = "ifeval:startend:end_checker"
NO_COMMA = "ifeval:punctuation:no_comma"
# each menu check as a small generator writes it: the worked example's values, or the menu's placeholders
COPIED = {WORDS: {"relation": "less than", "num_words": 50}, SENTENCES: {"relation": "less than", "num_sentences": 9},
          BULLETS: {"num_bullets": 5}, EXISTENCE: {"keywords": ["X", "Y"]}, FORBIDDEN: {"forbidden_words": ["X"]},
          END: {"end_phrase": "P"}, NO_COMMA: {}}


@pytest.mark.parametrize("check,kwargs,task,expected", [
    (WORDS, COPIED[WORDS], "Describe a park in at least 80 words.", {"relation": "at least", "num_words": 80}),
    (WORDS, COPIED[WORDS], "Use fewer than 40 words and no commas.", {"relation": "less than", "num_words": 40}),
    (WORDS, {"relation": "at least", "num_words": 60}, "Reply in under 60 words.",
     {"relation": "less than", "num_words": 60}),
    (SENTENCES, COPIED[SENTENCES], "Explain tides in fewer than three sentences.",
     {"relation": "less than", "num_sentences": 3}),
    (BULLETS, COPIED[BULLETS], "Give tips as exactly 4 markdown bullet points.", {"num_bullets": 4}),
    (EXISTENCE, COPIED[EXISTENCE], "Explain autumn. Include the words chlorophyll and sunlight.",
     {"keywords": ["chlorophyll", "sunlight"]}),
    (EXISTENCE, {"keywords": ["sunlight"]}, "Include the words chlorophyll and sunlight.", {"keywords": ["sunlight"]}),
    (FORBIDDEN, COPIED[FORBIDDEN], "Review a cafe without using the words good, great or nice.",
     {"forbidden_words": ["good", "great", "nice"]}),
    (END, COPIED[END], 'End it with the exact phrase "See you soon".', {"end_phrase": "See you soon"}),
    (END, {"end_phrase": "see you soon"}, 'End with "See you soon".', {"end_phrase": "see you soon"}),
    (NO_COMMA, {}, "Do not use any commas.", {}),
])
def test_a_checks_settings_are_the_tasks_own(check, kwargs, task, expected):
    grounded, why = ground_check(check, kwargs, task)
    assert grounded == expected
    assert bool(why) == (expected != kwargs)


@pytest.mark.parametrize("check,task,why", [
    (WORDS, "Explain tides in fewer than three sentences.", "the task states no number of words"),
    (BULLETS, "Describe a river.", "the task states no number of bullets"),
    (EXISTENCE, "Describe a river in fewer than 40 words.", "the task lists no words for keywords"),
    (END, "End the note politely.", "the task quotes no phrase"),
    (NO_COMMA, "Describe a river in fewer than 40 words.", "the task does not mention comma"),
    # "P" is a letter of "phrase", not the phrase
    (END, "Write a phrase about a river.", "the task quotes no phrase"),
])
def test_a_check_the_task_gives_no_value_for_is_dropped(check, task, why):
    assert ground_check(check, COPIED[check], task) == (None, [why])


def test_checks_off_the_menu_keep_their_settings():
    assert ground_check("ifeval:detectable_format:title", {}, "Write a poem.") == ({}, [])
    # IFEval states highlights as "highlight at least N sections": not a count of this form, left as written
    assert ground_check("ifeval:detectable_format:number_highlighted_sections", {"num_highlights": 2},
                        "Highlight at least 3 sections with markdown.") == ({"num_highlights": 2}, [])
    assert ground_check("ifeval:change_case:capital_word_frequency", {"capital_relation": "less than",
                                                                      "capital_frequency": 3}, "Write.")[0] \
        == {"capital_relation": "less than", "capital_frequency": 3}


def test_every_shipped_labelled_prompt_grounds_its_own_checks_exactly():
    """The worked example's values become each shipped prompt's own; counts of another unit are dropped."""
    path = Path(rubric_reward.__file__).parent / "data" / "labelled" / "prompts.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(rows) == 60
    for row in rows:
        own = {i["check"]: i.get("kwargs", {}) for i in row["instructions"]}
        for check, kwargs in COPIED.items():
            grounded, _ = ground_check(check, kwargs, row["prompt"])
            if check in own:
                assert grounded == own[check], (row["id"], check)
            elif check in (WORDS, SENTENCES, BULLETS, END, NO_COMMA):
                assert grounded is None, (row["id"], check)


def test_parse_rubric_grounds_with_the_task_and_records_each_repair():
    answer = ("1. The response explains how to boil an egg. [5]\n"
              '2. [check] ifeval:length_constraints:number_words relation="less than" num_words=50 [4]\n'
              "3. [check] ifeval:punctuation:no_comma [3]\n"
              '4. [check] ifeval:startend:end_checker end_phrase="P" [-2]')
    task = "Describe a lighthouse at night in at least 80 words."
    rubric, repairs = parse_rubric(answer, config=GROUNDED, task=task)
    assert [(c.check, dict(c.kwargs), c.weight) for c in rubric.criteria] == [
        (None, {}, 5.0), (WORDS, {"relation": "at least", "num_words": 80}, 4.0)]
    assert "criteria[1]: grounded in the task: num_words 50 -> 80; relation 'less than' -> 'at least'" in repairs
    assert "criteria[2]: dropped check ifeval:punctuation:no_comma: the task does not mention comma" in repairs
    assert "criteria[3]: dropped check ifeval:startend:end_checker: the task quotes no phrase" in repairs
    # off by default, and without the task text nothing is grounded
    plain = GenerationConfig(format="list", checks=True, min_criteria=1, max_criteria=8)
    for cfg, given in ((plain, task), (GROUNDED, None)):
        kept = parse_rubric(answer, config=cfg, task=given)[0]
        assert [dict(c.kwargs) for c in kept.criteria if c.check == WORDS] == [COPIED[WORDS]]
    # two checks that become one are one criterion; a rubric of checks the task has no values for is unusable
    twice = answer.splitlines()[1] + '\n3. [check] ifeval:length_constraints:number_words relation="at least" ' \
        "num_words=12 [2]"
    assert len(parse_rubric(twice, config=GROUNDED, task=task)[0].criteria) == 1
    with pytest.raises(Exception, match="0 distinct criteria"):
        parse_rubric(answer.splitlines()[2], config=GROUNDED, task=task)


def test_the_generator_grounds_what_it_samples_and_fingerprints_the_setting():
    answer = ('1. [check] ifeval:length_constraints:number_words relation="less than" num_words=50 [4]\n'
              "2. The response describes the light. [3]")
    with JudgeServer(ScriptedJudge(reply=router(generate=lambda body: answer))) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url), config=GROUNDED)
        plain = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url),
                                config=GenerationConfig(format="list", checks=True, min_criteria=1, max_criteria=8))
        try:
            r = gen.generate("Describe a lighthouse at night. Use fewer than 35 words.", prompt_id="lh")
            assert r.ok and dict(r.rubric.criteria[0].kwargs) == {"relation": "less than", "num_words": 35}
            assert any("num_words 50 -> 35" in x for x in r.repairs)
            assert gen.fingerprint() != plain.fingerprint()
        finally:
            gen.close()
            plain.close()


def test_cli_generate_ground_checks_flag(tmp_path, capsys):
    from rubric_reward.cli import main

    src = tmp_path / "prompts.jsonl"
    src.write_text('{"id": "t", "prompt": "Write a thank-you note in fewer than 30 words."}\n')
    answer = ('1. The response thanks someone. [3]\n'
              '2. [check] ifeval:length_constraints:number_words relation="less than" num_words=50 [4]\n'
              "3. [check] ifeval:punctuation:no_comma [2]\n4. The response is warm. [1]")
    with JudgeServer(ScriptedJudge(reply=router(generate=lambda body: answer))) as srv:
        for flags, out in (([], "plain.jsonl"), (["--ground-checks"], "grounded.jsonl")):
            code = main(["generate", "--input", str(src), "--generator", "gen", "--base-url", srv.base_url,
                         "--format", "list", "--checks", *flags, "--out", str(tmp_path / out), "--quiet"])
            assert code == 0, capsys.readouterr().err
    plain, grounded = (json.loads((tmp_path / f).read_text()) for f in ("plain.jsonl", "grounded.jsonl"))
    assert [c.get("kwargs") for c in plain["rubric"]["criteria"]] == [None, COPIED[WORDS], None, None]
    assert [c.get("kwargs") for c in grounded["rubric"]["criteria"]] == [  # no commas asked: that check dropped
        None, {"relation": "less than", "num_words": 30}, None]
