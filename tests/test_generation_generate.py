"""Rubric generation through the real client paths: repair, re-ask, recorded failures, resume, CLI."""

import json

import pytest

from rubric_reward.generation import (
    GenerationConfig, RubricGenerator, generate_rubrics, generation_messages, load_prompts, parse_rubric,
)
from rubric_reward.judges import JudgeConfig
from rubric_reward.rubric import Rubric, RubricError, load_rubric
from rubric_reward.testing.judge_server import Fault, FaultPlan, JudgeServer, ScriptedJudge

from _generation_fixtures import generator_reply, router, rubric_answer


def _server(reply, **kw):
    return JudgeServer(ScriptedJudge(reply=reply), **kw)


def test_parse_rubric_repairs_trivial_problems_and_records_them():
    text = ('Here you go:\n```json\n[{"requirement": "The answer names Paris.", "weight": "3"},\n'
            ' "The answer is one sentence.",\n {"text": "The answer invents a source.", "points": -2, "extra": 1},\n'
            ' {"name": "c", "requirement": "Dup A."}, {"name": "c", "requirement": "Dup B."}]\n```')
    rubric, repairs = parse_rubric(text, name="paris")
    assert isinstance(rubric, Rubric) and rubric.name == "paris"
    assert [c.weight for c in rubric.criteria] == [3.0, 1.0, -2.0, 1.0, 1.0]
    assert [c.name for c in rubric.criteria][-2:] == ["c", "c_2"]
    assert rubric.criteria[0].name == "the_answer_names_paris"
    assert any("renamed 'points'" in r for r in repairs) and any("dropped field(s) ['extra']" in r for r in repairs)
    # the result is an ordinary rubric: it round-trips through the loader
    assert load_rubric(rubric.to_dict()) == rubric


def test_a_numbered_list_is_read_as_criteria_and_repeats_are_dropped():
    text = ("Rubric:\n1. **The answer names Paris.**\n2. The answer is one sentence.\n"
            "3) The answer names Paris.\n- The answer cites no invented source.\n\nThat is all.")
    rubric, repairs = parse_rubric(text)
    assert [c.requirement for c in rubric.criteria] == [
        "The answer names Paris.", "The answer is one sentence.", "The answer cites no invented source."]
    assert all(c.weight == 1.0 for c in rubric.criteria)
    assert repairs[0].startswith("read a list of 4 criteria") and any("exact repeat" in r for r in repairs)
    with pytest.raises(RubricError, match="no JSON"):
        parse_rubric(text, config=GenerationConfig(accept_lists=False))
    with pytest.raises(RubricError, match="1 distinct criteria"):
        parse_rubric("- Same thing.\n- Same thing.\n- same  thing.")


@pytest.mark.parametrize("text,match", [
    ("no json here", "no JSON"),
    ('{"name": "x", "criteria": [{"name": "a", "requirement": "A."}]}', "1 criteria; write between 3 and 10"),
    (rubric_answer(11), "11 criteria"),
    ('{"name": "x", "criteria": [{"requirement": "A.", "weight": 0}, {"requirement": "B.", "weight": 0},'
     ' {"requirement": "C.", "weight": 0}]}', "every weight is zero"),
    ('{"name": "x", "items": []}', "no 'criteria'"),
    ("", "empty"),
])
def test_parse_rubric_rejects_what_cannot_be_repaired(text, match):
    with pytest.raises(RubricError, match=match):
        parse_rubric(text)


def test_generator_over_http_asks_for_the_schema_and_returns_a_rubric():
    with _server(router()) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url))
        try:
            r = gen.generate("Explain recursion to a child.", prompt_id="rec")
        finally:
            gen.close()
        body = srv.bodies[0]
    assert r.ok and r.attempts == 1 and r.error is None and len(r.rubric) == 3
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["name", "criteria"]
    assert "Explain recursion to a child." in body["messages"][1]["content"]


def test_broken_json_is_reasked_once_then_a_failure_is_recorded():
    calls = []

    def flaky(body):
        calls.append(body)
        return "{not json" if len(body["messages"]) == 2 else rubric_answer(4)

    with _server(router(generate=flaky)) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url))
        ok = gen.generate("Task one.")
        gen.close()
    assert ok.ok and ok.attempts == 2 and len(ok.rubric) == 4
    assert "could not be used: the answer holds no JSON object" in calls[1]["messages"][-1]["content"]
    assert calls[1]["messages"][-2] == {"role": "assistant", "content": "{not json"}

    long_bad = "x" * 5000
    with _server(router(generate=lambda b: long_bad if len(b["messages"]) == 2 else rubric_answer(3))) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url))
        assert gen.generate("Task three.").ok
        gen.close()
        quoted = srv.bodies[1]["messages"][-2]["content"]
    assert len(quoted) < 1600 and quoted.endswith("[...]")  # a runaway answer is not sent back whole

    with _server(router(generate=lambda b: "I'd rather write prose.")) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url))
        bad = gen.generate("Task two.", prompt_id="t2")
        gen.close()
        assert srv.requests == 2  # the first ask and one re-ask, no more
    assert not bad.ok and bad.rubric is None and bad.attempts == 2
    assert "no usable rubric after 2 ask(s)" in bad.error and bad.text == "I'd rather write prose."
    assert bad.to_dict()["ok"] is False


def test_transport_failure_is_recorded_not_raised():
    faults = FaultPlan(fixed={i: Fault(status=400) for i in range(1, 5)})
    with _server(router(), faults=faults) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url, max_retries=0))
        r = gen.generate("Task.")
        gen.close()
    assert not r.ok and r.error.startswith("generator call failed: client")


def test_k_candidates_are_distinct_samples_that_the_cache_does_not_collapse(tmp_path):
    from rubric_reward.judges.cache import SQLiteCache

    with _server(router()) as srv, SQLiteCache(tmp_path / "c.sqlite") as cache:
        cfg = JudgeConfig(model="gen", base_url=srv.base_url, seed=10)
        gen = RubricGenerator(cfg, cache=cache, temperature=0.8)
        cands = gen.candidates("Plan a trip.", 4, prompt_id="trip")
        again = gen.candidates("Plan a trip.", 4, prompt_id="trip")
        gen.close()
        assert srv.requests == 4  # the second round came from the cache
        seeds = sorted(b["seed"] for b in srv.bodies)
        temps = {b["temperature"] for b in srv.bodies}
    assert seeds == [10, 11, 12, 13] and temps == {0.8}
    assert [c.sample_index for c in cands] == [0, 1, 2, 3]
    assert len({len(c.rubric) for c in cands}) == 4
    assert [c.rubric for c in again] == [c.rubric for c in cands] and all(c.cached for c in again)


def test_dataset_level_uses_a_seeded_sample_of_prompts():
    prompts = [f"Prompt number {i}." for i in range(30)]
    with _server(router()) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url),
                              config=GenerationConfig(level="dataset", dataset_sample=5, seed=3))
        r = gen.generate_dataset(prompts, name="mydata")
        sample = gen.dataset_sample(prompts)
        gen.close()
        user = srv.bodies[0]["messages"][1]["content"]
    assert r.ok and r.prompt_id == "mydata"
    assert len(sample) == 5 and sample == sorted(sample)
    assert sample == RubricGenerator(JudgeConfig(model="g", base_url="http://127.0.0.1:9/v1"),
                                     config=GenerationConfig(dataset_sample=5, seed=3)).dataset_sample(prompts)
    shown = [i for i in range(30) if f"Prompt number {i}." in user]
    assert shown == sample
    assert "Write one rubric that applies to responses to every task" in user


def test_load_prompts_errors_are_clear(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="empty.jsonl: no prompts"):
        load_prompts(empty)
    noprompt = tmp_path / "np.jsonl"
    noprompt.write_text('{"prompt": "ok"}\n\n{"id": 3, "text": "where is the prompt"}\n')  # a blank line 2
    with pytest.raises(ValueError, match=r"np.jsonl: line 3: no prompt"):
        load_prompts(noprompt)
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n')
    with pytest.raises(ValueError, match="line 2: duplicate id 'a'"):
        load_prompts(dup)
    with pytest.raises(FileNotFoundError):
        load_prompts(tmp_path / "missing.jsonl")
    rows = load_prompts(["hi", {"id": "c", "conversation": [{"role": "user", "content": "yo"}]}])
    assert [r.id for r in rows] == ["row1", "c"]
    assert generation_messages(rows[1].prompt)[1]["content"].count("yo") == 1


def test_generate_rubrics_resumes_and_only_reasks_failures(tmp_path):
    src = tmp_path / "prompts.jsonl"
    src.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"Task {i}."}) + "\n" for i in range(4)))
    out = tmp_path / "out" / "rubrics.jsonl"

    def broken_for_p2(body):
        return "garbage" if "Task 2." in body["messages"][1]["content"] else generator_reply(body)

    with _server(router(generate=broken_for_p2)) as srv:
        gen = JudgeConfig(model="gen", base_url=srv.base_url)
        s1 = generate_rubrics(src, out, generator=gen, progress=False)
        assert (s1.ok, s1.failed, s1.resumed) == (3, 1, 0) and srv.requests == 3 + 2
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert [r["id"] for r in rows] == ["p0", "p1", "p2", "p3"]
        assert [r["ok"] for r in rows] == [True, True, False, True]
        assert rows[2]["text"] == "garbage" and "no usable rubric" in rows[2]["error"]
        assert (out.parent / "cache.sqlite").exists()

        with open(out, "a") as f:  # a kill mid-write leaves a torn line: ignored and cut off
            f.write('{"key": "zzz", "id": "p9", "ok": tr')
        srv.judge.reply = router()  # the generator behaves now
        srv.reset_stats()
        s2 = generate_rubrics(src, out, generator=gen, progress=False)
        assert srv.requests == 1  # only the failed prompt was asked again
    assert (s2.ok, s2.failed, s2.resumed) == (4, 0, 3)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["ok"] for r in rows] == [True] * 4 and len(rows) == 4
    assert all(load_rubric(r["rubric"]) for r in rows)


def test_cli_generate(tmp_path, capsys):
    from rubric_reward.cli import main

    src = tmp_path / "prompts.jsonl"
    src.write_text('{"prompt": "Write a limerick."}\n{"prompt": "Sort a list in Python."}\n')
    out = tmp_path / "r.jsonl"
    with _server(router()) as srv:
        code = main(["generate", "--input", str(src), "--level", "instance", "--generator", "gen",
                     "--base-url", srv.base_url, "--out", str(out), "--quiet"])
        assert code == 0
        code = main(["generate", "--input", str(src), "--level", "dataset", "--generator", "gen",
                     "--base-url", srv.base_url, "--out", str(tmp_path / "d.jsonl"), "--quiet", "--no-cache"])
        assert code == 0
    assert len(out.read_text().splitlines()) == 2
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 1
    assert "2/2 rubrics ok" in capsys.readouterr().err
    empty = tmp_path / "e.jsonl"
    empty.write_text('{"id": 1}\n')
    assert main(["generate", "--input", str(empty), "--generator", "gen", "--base-url", "http://127.0.0.1:9/v1",
                 "--out", str(tmp_path / "x.jsonl"), "--quiet"]) == 2
    assert "line 1: no prompt" in capsys.readouterr().err


LIST_CFG = GenerationConfig(format="list", min_criteria=3, max_criteria=6)


def test_list_format_reads_bracketed_weights_and_round_trips_through_rubric_text():
    from rubric_reward.generation import rubric_text

    text = ("1. The response names Paris. [5]\n2. **The response is one sentence.** (2)\n"
            "3. The response invents a source. [-3]\n4) The response cites the census (weight 1).\n"
            "5. The response is polite.")
    rubric, repairs = parse_rubric(text, config=LIST_CFG)
    assert [c.weight for c in rubric.criteria] == [5.0, 2.0, -3.0, 1.0, 1.0]
    assert rubric.criteria[2].requirement == "The response invents a source."
    assert repairs == ["named the rubric"] + [f"criteria[{i}]: named it {c.name!r}" for i, c in enumerate(rubric.criteria)]
    listed = rubric_text(rubric, "list")
    assert listed.splitlines()[2] == "3. The response invents a source. [-3]"
    again, _ = parse_rubric(listed, config=LIST_CFG)
    assert [(c.requirement, c.weight) for c in again.criteria] == [(c.requirement, c.weight) for c in rubric.criteria]
    year, _ = parse_rubric("1. The response cites the census (2019)\n2. The response is short. [2]\n"
                           "3. The response names the city.", config=LIST_CFG)
    assert [(c.requirement, c.weight) for c in year.criteria][0] == ("The response cites the census (2019)", 1.0)
    # "[5]" is a weight in the list format, never a JSON array; prose is a clear failure
    with pytest.raises(RubricError, match="no numbered list"):
        parse_rubric("A good answer is short and correct.", config=LIST_CFG)
    with pytest.raises(ValueError, match="'format'"):
        GenerationConfig(format="yaml")


def test_list_format_over_http_shows_a_worked_example_and_asks_for_no_schema():
    answers = iter(["Sure! Here is a rubric for you.",
                    "1. The response explains recursion with an analogy. [4]\n"
                    "2. The response uses words a child knows. [3]\n3. The response is condescending. [-2]"])
    with _server(router(generate=lambda body: next(answers))) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url), config=LIST_CFG)
        try:
            r = gen.generate("Explain recursion to a child.", prompt_id="rec")
        finally:
            gen.close()
        first, second = srv.bodies
    assert r.ok and r.attempts == 2 and [c.weight for c in r.rubric.criteria] == [4.0, 3.0, -2.0]
    assert "response_format" not in first
    roles = [m["role"] for m in first["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert first["messages"][2]["content"].startswith("1. The response explains how to boil an egg. [5]")
    assert "Explain recursion to a child." in first["messages"][3]["content"]
    assert second["messages"][-1]["content"].endswith("Reply again with only the numbered list of criteria in the "
                                                      "requested format.")
    json_gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url))
    assert json_gen.fingerprint() != RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url),
                                                     config=LIST_CFG).fingerprint()
    json_gen.close()


CHECK_CFG = GenerationConfig(format="list", checks=True, min_criteria=2, max_criteria=6)


def test_check_lines_in_the_list_format_are_validated_checks_and_round_trip():
    from rubric_reward.generation import rubric_text

    text = ("1. The response thanks the neighbour. [4]\n"
            "2. [check] ifeval:punctuation:no_comma [3]\n"
            '3. [check] ifeval:startend:end_checker end_phrase="See you soon" [2]\n'
            '- [check] ifeval:length_constraints:number_words relation="less than" num_words=60\n'
            '5. [check] ifeval:keywords:existence keywords=["plants", "water"] [1]')
    rubric, _ = parse_rubric(text, config=CHECK_CFG)
    checks = [(c.check, dict(c.kwargs), c.weight) for c in rubric.criteria if c.check]
    assert checks == [("ifeval:punctuation:no_comma", {}, 3.0),
                      ("ifeval:startend:end_checker", {"end_phrase": "See you soon"}, 2.0),
                      ("ifeval:length_constraints:number_words", {"relation": "less than", "num_words": 60}, 1.0),
                      ("ifeval:keywords:existence", {"keywords": ["plants", "water"]}, 1.0)]
    assert [c.name for c in rubric.criteria[1:3]] == ["no_comma", "end_checker"]  # underscores survive
    listed = rubric_text(rubric, "list")
    assert listed.splitlines()[2] == '3. [check] ifeval:startend:end_checker end_phrase="See you soon" [2]'
    assert parse_rubric(listed, config=CHECK_CFG)[0].to_dict()["criteria"] == rubric.to_dict()["criteria"]
    # validated like any rubric check: unknown ids, bad kwargs and unreadable settings are the answer's error
    for bad, match in (("[check] ifeval:punctuation:no_commas", "unknown IFEval instruction id 'punctuation:no_commas'"),
                       ("[check] ifeval:length_constraints:number_words num_words=50", "missing kwarg 'relation'"),
                       ('[check] ifeval:length_constraints:number_words relation=less than', "cannot read the settings"),
                       ("[check] the response is kind", "must name a check such as ifeval")):
        with pytest.raises(RubricError, match=match):
            parse_rubric(f"1. The response is on topic. [2]\n2. {bad} [3]", config=CHECK_CFG)
    # a repeated check is dropped like a repeated sentence
    twice, repairs = parse_rubric("1. [check] ifeval:punctuation:no_comma [2]\n2. [check] ifeval:punctuation:no_comma\n"
                                  "3. The response is on topic.", config=CHECK_CFG)
    assert len(twice.criteria) == 2 and "criteria[1]: dropped an exact repeat of an earlier criterion" in repairs


def test_checks_in_the_json_schema_and_in_the_instructions():
    import json

    from rubric_reward.generation.templates import RUBRIC_SCHEMA, rubric_schema, system_prompt

    cfg = GenerationConfig(checks=True, min_criteria=1)
    schema = rubric_schema(cfg)["properties"]["criteria"]["items"]
    assert schema["properties"]["check"] == {"type": ["string", "null"]} and "check" in schema["required"]
    assert rubric_schema(GenerationConfig()) is RUBRIC_SCHEMA  # unchanged without checks
    assert "ifeval:punctuation:no_comma" in system_prompt(cfg) and "ifeval:" not in system_prompt(GenerationConfig())
    assert "[check]" in system_prompt(CHECK_CFG)
    answer = {"name": "x", "criteria": [
        {"name": "ends", "requirement": "", "weight": 2, "check": 'ifeval:startend:end_checker end_phrase="Talk soon"'},
        {"name": "kind", "requirement": "The response is kind.", "weight": 1, "check": None},
        {"name": "short", "requirement": "Under 40 words.", "weight": 1, "check": "ifeval:length_constraints:number_words",
         "kwargs": {"relation": "less than", "num_words": 40}}]}
    rubric, _ = parse_rubric(json.dumps(answer), config=cfg)
    assert [c.check for c in rubric.criteria] == ["ifeval:startend:end_checker", None,
                                                  "ifeval:length_constraints:number_words"]
    assert dict(rubric.criteria[0].kwargs) == {"end_phrase": "Talk soon"} and not rubric.criteria[1].check


def test_cli_generate_format_and_checks_flags(tmp_path, capsys):
    """`--format` (documented in docs/generation.md) exists: list asks for a numbered list with no schema."""
    from rubric_reward.cli import main

    src = tmp_path / "prompts.jsonl"
    src.write_text('{"id": "t", "prompt": "Write a thank-you note. Do not use any commas."}\n')
    answer = "1. The response thanks someone. [3]\n2. [check] ifeval:punctuation:no_comma [4]\n3. The response is short."
    with _server(router(generate=lambda body: answer)) as srv:
        code = main(["generate", "--input", str(src), "--generator", "gen", "--base-url", srv.base_url,
                     "--format", "list", "--checks", "--out", str(tmp_path / "r.jsonl"), "--quiet"])
        assert code == 0, capsys.readouterr().err
        body = srv.bodies[-1]
    assert "response_format" not in body and "[check]" in body["messages"][0]["content"]
    row = json.loads((tmp_path / "r.jsonl").read_text())
    assert row["ok"] and row["rubric"]["criteria"][1]["check"] == "ifeval:punctuation:no_comma"

    with _server(router(), faults=FaultPlan(fixed={1: _cut_reply(LOOPING)})) as srv:
        code = main(["generate", "--input", str(src), "--generator", "gen", "--base-url", srv.base_url,
                     "--format", "list", "--keep-complete-lines", "--out", str(tmp_path / "k.jsonl"), "--quiet",
                     "--min-criteria", "1"])
        assert code == 0 and srv.requests == 1, capsys.readouterr().err
    row = json.loads((tmp_path / "k.jsonl").read_text())
    assert row["ok"] and len(row["rubric"]["criteria"]) == 2 and row["repairs"][-1].startswith("kept the complete")


def test_generate_defaults_to_the_list_format_for_a_local_generator():
    import argparse

    from rubric_reward.cli.generation import _format
    from rubric_reward.generation import default_generator

    args = argparse.Namespace(format="auto")
    assert _format(args, default_generator()) == "list"
    assert _format(args, JudgeConfig(model="gen", base_url="http://127.0.0.1:9/v1")) == "json"
    assert _format(argparse.Namespace(format="json"), default_generator()) == "json"


def _cut_reply(content):
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "gen",
            "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 128, "total_tokens": 138}}
    return Fault(body=json.dumps(body))


LOOPING = ("1. The response explains recursion with an analogy. [4]\n2. The response uses short words. [3]\n"
           "3. The response uses short words. [3]\n4. The response uses short wo")


def test_an_answer_cut_off_at_max_tokens_is_asked_again_unless_its_complete_lines_are_kept():
    fixed = {1: _cut_reply(LOOPING), 2: _cut_reply(LOOPING)}
    with _server(router(), faults=FaultPlan(fixed=dict(fixed))) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url), config=LIST_CFG)
        r = gen.generate("Explain recursion to a child.")
        gen.close()
        assert srv.requests == 2
    assert not r.ok and "cut off at max_tokens=1024" in r.error

    kept_cfg = GenerationConfig(format="list", min_criteria=1, max_criteria=6, keep_complete_lines=True)
    with _server(router(), faults=FaultPlan(fixed=dict(fixed))) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url), config=kept_cfg)
        r = gen.generate("Explain recursion to a child.")
        assert srv.requests == 1  # no re-ask
        assert gen.fingerprint() != RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url),
                                                    config=LIST_CFG).fingerprint()
        gen.close()
    assert r.ok and r.attempts == 1 and r.text == LOOPING  # the answer as written is kept for the record
    assert [c.requirement for c in r.rubric.criteria] == ["The response explains recursion with an analogy.",
                                                         "The response uses short words."]  # the repeat dropped
    assert any(x.startswith("kept the complete lines of an answer cut off at max_tokens=1024") for x in r.repairs)

    json_cfg = GenerationConfig(keep_complete_lines=True)  # a JSON answer has no complete lines to keep
    with _server(router(), faults=FaultPlan(fixed={1: _cut_reply('{"criteria": [')})) as srv:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url), config=json_cfg)
        r = gen.generate("Task.")
        gen.close()
        assert srv.requests == 2 and r.ok  # asked again, the second answer is the router's rubric


def test_complete_lines_drops_only_an_unfinished_last_line():
    from rubric_reward.generation.parsing import complete_lines

    assert complete_lines("1. a [2]\n2. b") == "1. a [2]\n"
    assert complete_lines("1. a [2]\n") == "1. a [2]\n"
    assert complete_lines("no line break") == "" and complete_lines(None) == ""


def test_a_cut_off_answer_is_never_stored_in_the_reply_cache_even_when_its_lines_are_read(tmp_path):
    from rubric_reward.judges.cache import SQLiteCache

    kept_cfg = GenerationConfig(format="list", min_criteria=1, max_criteria=6, keep_complete_lines=True)
    with _server(router(), faults=FaultPlan(fixed={1: _cut_reply(LOOPING)})) as srv, \
            SQLiteCache(tmp_path / "c.sqlite") as cache:
        gen = RubricGenerator(JudgeConfig(model="gen", base_url=srv.base_url), config=kept_cfg, cache=cache)
        first = gen.generate("Explain recursion to a child.")
        again = gen.generate("Explain recursion to a child.")
        third = gen.generate("Explain recursion to a child.")
        gen.close()
        assert srv.requests == 2  # the cache holds clean successes only: the cut answer was asked again
    assert first.ok and len(first.rubric) == 2 and not again.cached and third.cached
    assert again.rubric == third.rubric and len(again.rubric) > 2
