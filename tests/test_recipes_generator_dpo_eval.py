"""Held-out evaluation of rubric generators on small synthetic MT-Bench- and HelpSteer2-shaped rows, with the
loopback server as generator and fixed judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_reward.recipes.generator_dpo.evaluate import EvalGeneratorConfig, evaluate_generators, write_train_prompts
from rubric_reward.recipes.generator_dpo.evaluate_report import render_table
from rubric_reward.generation.pair_judge import parse_choice
from rubric_reward.generation.human_data import load_helpsteer2, load_mt_bench, split_ids
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

GOOD_RUBRIC = {"name": "r", "criteria": [{"name": "quality", "requirement": "The response is marked GOOD."}]}
BAD_RUBRIC = {"name": "r", "criteria": [{"name": "inverted", "requirement": "The response is marked BAD."}]}


def _conv(question: str, answer: str, second: tuple[str, str] | None = None) -> list[dict]:
    conv = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    if second:
        conv += [{"role": "user", "content": second[0]}, {"role": "assistant", "content": second[1]}]
    return conv


def _mt_bench_rows() -> list[dict]:
    rows = []
    for q in range(10):
        question = f"Question {q}: explain topic {q}." + (" OFFMENU" if q == 3 else "")
        follow = (f"Follow-up {q}", None)
        for pair, (ma, mb) in enumerate((("gpt-4", "vicuna"), ("llama", "alpaca"))):
            a_wins = (q + pair) % 2 == 0
            ans_a, ans_b = ("GOOD answer", "BAD answer") if a_wins else ("BAD answer", "GOOD answer")
            for judge in ("expert_0", "expert_1", "expert_2"):
                rows.append({"question_id": 80 + q, "model_a": ma, "model_b": mb, "judge": judge, "turn": 1,
                             "winner": "model_a" if a_wins else "model_b",
                             "conversation_a": _conv(question, ans_a, (follow[0], "GOOD again")),
                             "conversation_b": _conv(question, ans_b, (follow[0], "BAD again"))})
        rows.append({"question_id": 80 + q, "model_a": "gpt-4", "model_b": "llama", "judge": "expert_0", "turn": 1,
                     "winner": "tie", "conversation_a": _conv(question, "x"), "conversation_b": _conv(question, "y")})
    # one turn-2 judgement, and one pair whose two votes cancel out
    rows.append({"question_id": 80, "model_a": "gpt-4", "model_b": "vicuna", "judge": "expert_0", "turn": 2,
                 "winner": "model_b", "conversation_a": _conv("Question 0", "GOOD", ("More", "BAD second")),
                 "conversation_b": _conv("Question 0", "BAD", ("More", "GOOD second"))})
    for w in ("model_a", "model_b"):
        rows.append({"question_id": 81, "model_a": "claude", "model_b": "vicuna", "judge": w, "turn": 1,
                     "winner": w, "conversation_a": _conv("Question 1", "a"),
                     "conversation_b": _conv("Question 1", "b")})
    return rows


def _helpsteer_rows() -> list[dict]:
    rows = []
    for p in range(10):
        for r, good in enumerate((True, False)):
            base = 3 + (p % 2) if good else 1 - (p % 2)
            rows.append({"prompt": f"Prompt {p}: write about {p}.", "response": f"{'GOOD' if good else 'BAD'} text {r}",
                         "helpfulness": base, "correctness": base, "coherence": min(4, base + 1),
                         "complexity": 1, "verbosity": 2})
    return rows


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _reply(body) -> str | None:
    system = body["messages"][0]["content"]
    text = body["messages"][-1]["content"]
    if system.startswith("You write evaluation rubrics"):
        return json.dumps(GOOD_RUBRIC)
    if "## Response 1" in text or "## Conversation 1" in text:
        if "OFFMENU" in text.split("## Rubric", 1)[0]:
            return '{"reason": "cannot tell", "verdict": "3"}'
        one = text.split(" 1\n", 1)[1].split(" 2\n", 1)[0]
        if "Conversation" in text:  # judge the final turn only
            one = one.rsplit("[assistant]", 1)[1]
        want = "BAD" if "marked BAD" in text else "GOOD"
        return json.dumps({"reason": "rubric applied", "verdict": "1" if want in one else "2"})
    return None


@pytest.fixture
def server():
    judge = ScriptedJudge({"inverted": lambda response, body: "MET" if "BAD" in response else "UNMET"},
                          default=lambda response, body: "MET" if "GOOD" in response else "UNMET", reply=_reply)
    s = JudgeServer(judge).start()
    yield s
    s.stop()


def _config(tmp_path: Path, server, **kw) -> EvalGeneratorConfig:
    mtb = _write_jsonl(tmp_path / "mtb.jsonl", _mt_bench_rows())
    hs2 = _write_jsonl(tmp_path / "hs2.jsonl", _helpsteer_rows())
    endpoint = {"model": "scripted", "base_url": server.base_url, "max_retries": 0}
    base = dict(judge=endpoint, mt_bench={"source": str(mtb)}, helpsteer2={"source": str(hs2)},
                split={"seed": 0, "test_fraction": 0.5}, n_resamples=200, out_dir=str(tmp_path / "eval"),
                progress=False, generators=[{"name": "base", "model": endpoint}],
                generation={"min_criteria": 1})
    base.update(kw)
    return EvalGeneratorConfig(**base)


def test_loaders_split_and_drop_ties():
    rows, dropped = load_mt_bench(_mt_bench_rows())
    assert dropped == {"human tie": 10, "tied vote": 1}
    assert len(rows) == 21  # 10 questions x 2 model pairs (majority of 3 votes) + the turn-2 row
    t2 = next(r for r in rows if r.id.startswith("80:t2"))
    assert t2.winner == "b" and t2.task == "[Turn 1] Question 0\n\n[Turn 2] More" and len(t2.conversation_a) == 4
    votes, _ = load_mt_bench(_mt_bench_rows(), aggregate="votes", turns=(1,))
    assert len(votes) == 62  # every non-tie vote of turn 1
    hs2 = load_helpsteer2(_helpsteer_rows())
    assert hs2[0].human == pytest.approx((3 + 3 + 4) / 3)
    train, test = split_ids([r.prompt_id for r in rows], test_fraction=0.5, seed=0)
    assert len(train) == len(test) == 5 and not set(train) & set(test)
    assert split_ids([r.prompt_id for r in rows], test_fraction=0.5, seed=0) == (train, test)
    assert split_ids([r.prompt_id for r in rows], test_fraction=0.5, seed=1) != (train, test)


def test_bad_rows_get_clear_errors(tmp_path):
    rows = _mt_bench_rows()
    rows[4]["winner"] = "model_c"
    with pytest.raises(ValueError, match="row 4: field 'winner' must be model_a, model_b or tie"):
        load_mt_bench(rows)
    rows = _mt_bench_rows()
    del rows[2]["conversation_b"]
    with pytest.raises(ValueError, match="row 2: missing field 'conversation_b'"):
        load_mt_bench(rows)
    hs = _helpsteer_rows()
    hs[3]["correctness"] = "high"
    with pytest.raises(ValueError, match="row 3: field 'correctness' must be a number"):
        load_helpsteer2(hs)
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        load_helpsteer2(tmp_path / "absent.jsonl")
    jsonl = tmp_path / "hs.jsonl"  # a file's rows are named by their line (issue 21.7), blank lines counted
    jsonl.write_text("\n".join([json.dumps(r) for r in _helpsteer_rows()[:2]] + ["", json.dumps(hs[3])]) + "\n")
    with pytest.raises(ValueError, match=r"hs\.jsonl: line 4: field 'correctness' must be a number"):
        load_helpsteer2(jsonl)
    with pytest.raises(ValueError, match="exactly one of 'model' or 'rubrics'"):
        EvalGeneratorConfig(judge="j", generators=[{"name": "x"}])
    with pytest.raises(ValueError, match="duplicate generator name"):
        EvalGeneratorConfig(judge="j", generators=[{"name": "x", "model": "m"}, {"name": "x", "rubrics": "f"}])
    with pytest.raises(ValueError, match="field 'judge' is required"):
        EvalGeneratorConfig(generators=[{"name": "x", "model": "m"}])
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['n_test'\]"):
        EvalGeneratorConfig(judge="j", generators=[{"name": "x", "model": "m"}], split={"n_test": 3})
    assert parse_choice('{"reason": "r", "verdict": "2"}') == ("2", "r")
    with pytest.raises(ValueError, match='must be "1" or "2"'):
        parse_choice('{"reason": "r", "verdict": "both"}')
    for bad in ('noise {"reason": "r", "verdict": "2"}', '{"reason": "r", "verdict": 2}', '{"verdict": "1"}'):
        with pytest.raises(ValueError):  # issue 32: the whole reply, exact keys, the label as a string
            parse_choice(bad)


@pytest.mark.timeout(120)
def test_eval_generator_table_compares_generators(tmp_path, server):
    config = _config(tmp_path, server)
    # a fixed baseline: rubrics from a file, inverted ones, one task missing
    first = evaluate_generators(config)
    tasks = [json.loads(line)["id"] for line in (tmp_path / "eval/tasks.jsonl").read_text().splitlines()]
    rubric_file = tmp_path / "baseline.jsonl"
    rubric_file.write_text("".join(json.dumps({"id": t, "ok": True, "rubric": BAD_RUBRIC}) + "\n"
                                   for t in tasks[1:]))
    train_prompts = tmp_path / "train.jsonl"
    leaked_task = json.loads((tmp_path / "eval/tasks.jsonl").read_text().splitlines()[2])["prompt"]
    train_prompts.write_text(json.dumps({"id": "x", "prompt": leaked_task}) + "\n")
    config = _config(tmp_path, server, generators=[
        {"name": "base", "model": {"model": "scripted", "base_url": server.base_url, "max_retries": 0}},
        {"name": "baseline", "rubrics": str(rubric_file), "train_prompts": str(train_prompts)}])
    summary = evaluate_generators(config)

    base, other = summary["generators"]["base"], summary["generators"]["baseline"]
    assert summary["n_tasks"] == len(tasks) and base["rubrics_ok"] == len(tasks)
    assert other["rubrics_ok"] == len(tasks) - 1
    # held out: only test-side questions; human ties and the cancelled vote are gone
    split = json.loads((tmp_path / "eval/split.json").read_text())
    assert not set(split["mt_bench"]["train"]) & set(split["mt_bench"]["test"])
    rows = [json.loads(x) for x in (tmp_path / "eval/rows/base.pairwise.jsonl").read_text().splitlines()]
    assert {r["prompt_id"] for r in rows} <= set(split["mt_bench"]["test"])
    assert {r["flipped"] for r in rows if "flipped" in r} == {True, False}  # order randomised
    offmenu = [r for r in rows if r["prompt_id"] == "83"]
    if offmenu:  # question 3's judge answers off the menu: recorded, left out, never guessed
        assert all(r["correct"] is None and "off the menu" in r["error"] for r in offmenu)
    pw = base["pairwise"]
    assert pw["accuracy"] == 1.0 and pw["failed"] == len(offmenu) and pw["decided"] == pw["n"] - len(offmenu)
    assert other["pairwise"]["accuracy"] == 0.0 and other["pairwise"]["no_rubric"] >= 0
    assert summary["mcnemar"]["baseline"]["pvalue"] < 0.05
    assert base["pointwise"]["spearman"] > 0.8 > -0.8 > other["pointwise"]["spearman"]
    lo, hi = base["pointwise"]["ci"]["low"], base["pointwise"]["ci"]["high"]
    assert lo <= base["pointwise"]["spearman"] <= hi
    assert other["leaked"] == 1 and "not held out" in summary["warning"] and base["leaked"] is None
    table = (tmp_path / "eval/table.md").read_text()
    assert table == render_table(json.loads((tmp_path / "eval/results.json").read_text()))
    assert "| base | " in table and "| baseline | " in table and " ref |" in table
    png = (tmp_path / "eval/plot.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert first["generators"]["base"]["pairwise"]["accuracy"] == 1.0

    # finished work is cached: a rerun asks again only for the failed (off-menu) answers, same numbers
    before = server.requests
    again = evaluate_generators(config)
    assert server.requests - before == len(offmenu)
    assert again["generators"] == summary["generators"]


def test_train_prompts_are_the_other_side_of_the_split(tmp_path, server):
    config = _config(tmp_path, server)
    n = write_train_prompts(config, tmp_path / "train.jsonl")
    train = [json.loads(x) for x in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert len(train) == n > 0
    evaluate_generators(config)
    test = [json.loads(x)["id"] for x in (tmp_path / "eval/tasks.jsonl").read_text().splitlines()]
    assert not {t["id"] for t in train} & set(test)


def test_eval_generator_command(tmp_path, server, capsys):
    import yaml

    from rubric_reward.cli import main

    (tmp_path / "data").mkdir()
    _write_jsonl(tmp_path / "data/mtb.jsonl", _mt_bench_rows())
    _write_jsonl(tmp_path / "data/hs2.jsonl", _helpsteer_rows())
    endpoint = {"model": "scripted", "base_url": server.base_url, "max_retries": 0}
    config = {"judge": endpoint, "generators": [{"name": "base", "model": endpoint}],
              "mt_bench": {"source": "data/mtb.jsonl", "turns": [1]}, "helpsteer2": {"source": "data/hs2.jsonl"},
              "generation": {"min_criteria": 1}, "n_resamples": 100, "out_dir": str(tmp_path / "out")}
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["eval-generator", "--config", str(path), "--write-train-prompts", str(tmp_path / "t.jsonl")]) == 0
    assert (tmp_path / "t.jsonl").read_text().count("\n") == 10  # 5 questions + 5 HelpSteer2 prompts
    assert main(["eval-generator", "--config", str(path), "--quiet"]) == 0
    out = capsys.readouterr()
    assert "| base | 10/10 | 1.000 |" in out.out and "plot.png" in out.err
    path.write_text(yaml.safe_dump({**config, "generators": [{"name": "base bad name", "model": "m"}]}))
    assert main(["eval-generator", "--config", str(path)]) == 2
    assert "use letters, digits" in capsys.readouterr().err


def test_shipped_eval_config_loads():
    path = Path(__file__).resolve().parents[1] / "configs" / "dpo" / "eval_generator.yaml"
    config = EvalGeneratorConfig.from_yaml(path)
    assert config.mt_bench.source == "hub" and (config.split.seed, config.split.test_fraction) == (0, 0.5)
    assert [g.name for g in config.generators] == ["gpt-4.1"]


def test_a_loop_folder_adds_base_and_finished_iterations(tmp_path):
    loop = tmp_path / "loop"
    (loop / "iter_1").mkdir(parents=True)
    (loop / "iter_2").mkdir()
    (loop / "loop.json").write_text(json.dumps({"config": {"generator": "Qwen/Qwen3-14B", "generator_backend": "vllm",
                                                           "generation": {"max_tokens": 900}}}))
    (loop / "iter_1/merged.done.json").write_text("{}")  # iteration 2 is unfinished: left out
    config = EvalGeneratorConfig(judge="j", loop_dir=str(loop), generators=[{"name": "api", "model": "gpt-x"}])
    names = [g.name for g in config.generators]
    assert names == ["base", "iter_1", "api"]
    base, it1 = config.generators[:2]
    assert base.model == {"model": "Qwen/Qwen3-14B", "backend": "vllm", "verdict_mode": "generate", "max_tokens": 900}
    assert it1.model["model"] == str((loop / "iter_1/merged").resolve())
    assert base.train_prompts is None and it1.train_prompts == str(loop / "prompts.jsonl")
    with pytest.raises(FileNotFoundError, match="not a dpo-loop folder"):
        EvalGeneratorConfig(judge="j", loop_dir=str(tmp_path))


FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_mt_bench_loader_on_rows_of_the_documented_schema(tmp_path):
    """lmsys/mt_bench_human_judgments: splits human / gpt4_pair; question_id int, winner model_a | model_b | tie |
    tie (bothbad), judge ids, both turns in each conversation, `turn` naming the judged one."""
    from datasets import Dataset, DatasetDict

    rows = [json.loads(x) for x in (FIXTURES / "mt_bench_human_judgments.jsonl").read_text().splitlines()]
    folder = tmp_path / "mtb"
    DatasetDict({"human": Dataset.from_list(rows), "gpt4_pair": Dataset.from_list(rows[:2])}).save_to_disk(str(folder))
    pairs, dropped = load_mt_bench(str(folder), split="human")
    assert dropped == {"human tie": 2, "tied vote": 1}  # tie and tie (bothbad) both count as ties
    by_id = {p.id: p for p in pairs}
    assert sorted(by_id) == ["131:t1:gpt-4:llama-13b", "81:t1:gpt-4:vicuna-13b-v1.2", "81:t2:gpt-4:vicuna-13b-v1.2"]
    t1 = by_id["81:t1:gpt-4:vicuna-13b-v1.2"]  # votes from both orientations of the pair meet: 2 to 1
    assert t1.winner == "a" and t1.votes == {"a": 2, "b": 1} and len(t1.conversation_a) == 2
    assert t1.task == "Write a short blog post about a weekend in Lisbon."
    t2 = by_id["81:t2:gpt-4:vicuna-13b-v1.2"]  # turn 2: both user turns, the conversation up to the 2nd answer
    assert t2.winner == "b" and len(t2.conversation_b) == 4 and t2.conversation_b[-1]["content"] == "It is a city."
    assert t2.task == "[Turn 1] Write a short blog post about a weekend in Lisbon.\n\n[Turn 2] Now shorten it to three " \
                      "sentences."
    assert {p.prompt_id for p in pairs} == {"81", "131"}  # both turns of a question split together
    votes, _ = load_mt_bench(str(folder), split="human", aggregate="votes")
    assert len(votes) == 8  # every vote but the two ties
    assert len(load_mt_bench(str(folder), split="gpt4_pair")[0]) == 1
    only1, dropped1 = load_mt_bench(FIXTURES / "mt_bench_human_judgments.jsonl", turns=(1,))
    assert len(only1) == 2 and dropped1 == {"other turn": 4, "human tie": 1}
    with pytest.raises(ValueError, match="no split 'test'"):
        load_mt_bench(str(folder), split="test")


def test_helpsteer2_loader_on_rows_of_the_documented_schema(tmp_path):
    """nvidia/HelpSteer2: splits train / validation; five 0-4 attributes; a multi-turn prompt holds the earlier turns
    separated by <extra_id_1>Assistant / <extra_id_1>User lines and the response is the last assistant turn."""
    from datasets import Dataset, DatasetDict

    rows = [json.loads(x) for x in (FIXTURES / "helpsteer2_validation.jsonl").read_text().splitlines()]
    folder = tmp_path / "hs2"
    DatasetDict({"train": Dataset.from_list(rows[:2]), "validation": Dataset.from_list(rows)}).save_to_disk(str(folder))
    points = load_helpsteer2(str(folder))  # validation by default
    assert len(points) == 6 and len(load_helpsteer2(str(folder), split="train")) == 2
    assert points[0].human == pytest.approx((3 + 4 + 4) / 3) and points[0].attributes["verbosity"] == 1
    assert points[0].prompt_id == points[1].prompt_id != points[2].prompt_id  # responses to one prompt split together
    multi = points[2]
    assert [m["role"] for m in multi.turns] == ["user", "assistant", "user"]
    assert multi.turns[1]["content"] == "The capital of France is Paris." and "<extra_id_1>" not in multi.prompt
    assert multi.prompt.startswith("[user]\nWhat is the capital of France?") and multi.prompt.endswith("And its population?")
    assert points[0].turns == ({"role": "user", "content": "c#"},) and points[0].prompt == "c#"
    bad = [{**rows[2], "prompt": "Hi\n<extra_id_1>Assistant\nHello"}]
    with pytest.raises(ValueError, match="row 0: field 'prompt' must alternate user and assistant turns"):
        load_helpsteer2(bad)
