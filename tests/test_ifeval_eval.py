"""IFEval evaluation: summary numbers and comparison statistics on hand-made responses, the reference
row format, the eval/ifeval.py command (responses mode, and end to end on a tiny Qwen3 with a LoRA
adapter), response generation backends and clear errors."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from rubric_reward.checks.ifeval import IFEvalResult
from rubric_reward.evaluation.ifeval_prompts import load_ifeval
from rubric_reward.evaluation.ifeval_report import (
    REFERENCE_FIELDS,
    SystemResults,
    compare,
    evaluate_system,
    summary_dict,
    write_comparison,
    write_results_jsonl,
    write_system,
)
from rubric_reward.evaluation.rollouts import VLLM_INSTALL_HINT, generate_responses, strip_think
from rubric_reward.stats import paired_bootstrap_ci

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "eval" / "ifeval.py"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _load_cli():
    spec = importlib.util.spec_from_file_location("ifeval_cli", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cli = _load_cli()

# ------------------------------------------------------------------------------------------ hand-made set
# Five packaged prompts, two instructions each; expected outcomes worked out by hand below.
#   1508 keywords:existence [forests, riddle], punctuation:no_comma
#   3084 punctuation:no_comma, startend:end_checker "in India."
#   3131 detectable_format:title, detectable_content:postscript "P.S."
#   3386 keywords:forbidden_words [divide, answer], keywords:existence [remainder]
#   1466 startend:quotation, keywords:forbidden_words [taylor, swift, together]
KEYS = [1466, 1508, 3084, 3131, 3386]  # data (file) order

BASE = {
    1508: "A lion sleeps in forests, a riddle in its eyes.",            # strict/loose [T, F]  (comma)
    3084: "Gujarat sun\nsalt and silk\nthe kites rise in India.",       # [T, T] / [T, T]
    3131: "<<Biotech in 2023>>\nGene editing grew fast.\nCritique: too optimistic.",  # [T, F] / [T, F]
    3386: "Sure, here is the answer.\nShe can buy 3 gallons with a remainder of 1 dollar.",
    # strict [F, T] ("answer"); loose [T, T] (first line dropped)
    1466: 'Here is my song:\n"We sing of breakups and of rain"',       # strict [F, T]; loose [T, T]
}
TRAINED = {
    1508: "Deep forests hide a riddle\nthe lion waits in silence",      # [T, T] / [T, T]
    3084: "Gujarat, bright and strange\nkites rise in India.",          # strict [F, T]; loose [T, T]
    3131: "<<Biotech in 2023>>\nGene editing grew fast.\nP.S. I am not sure about it.",  # [T, T] / [T, T]
    3386: "She can divide 10 by 3 and buy 3 gallons with a remainder of 1 dollar.",  # [F, T] / [F, T]
    1466: '"We sing of breakups and of rain"',                          # [T, T] / [T, T]
}
# Strict:  base prompts 1/5 (3084), instructions 6/10; trained prompts 3/5, instructions 8/10.
# Loose:   base prompts 3/5 (3084, 3386, 1466), instructions 8/10; trained 4/5, 9/10.


@pytest.fixture(scope="module")
def rows():
    by_key = {row.key: row for row in load_ifeval()}
    return [by_key[k] for k in KEYS]


@pytest.fixture(scope="module")
def systems(rows):
    base = evaluate_system("base", [(row, BASE[row.key]) for row in rows])
    trained = evaluate_system("trained", [(row, TRAINED[row.key]) for row in rows])
    return base, trained


def test_hand_made_summary_numbers(systems):
    base, trained = (summary_dict(s) for s in systems)
    assert base["num_prompts"] == 5 and base["num_instructions"] == 10
    assert (base["strict"]["prompt_level"], base["strict"]["instruction_level"]) == pytest.approx((0.2, 0.6))
    assert (base["loose"]["prompt_level"], base["loose"]["instruction_level"]) == pytest.approx((0.6, 0.8))
    assert (trained["strict"]["prompt_level"], trained["strict"]["instruction_level"]) == pytest.approx((0.6, 0.8))
    assert (trained["loose"]["prompt_level"], trained["loose"]["instruction_level"]) == pytest.approx((0.8, 0.9))
    # per type and per category (strict, base)
    per_type = base["strict"]["per_instruction"]
    assert per_type["punctuation:no_comma"] == {"accuracy": 0.5, "correct": 1, "total": 2}
    assert per_type["keywords:forbidden_words"]["accuracy"] == 0.5
    assert per_type["startend:quotation"]["accuracy"] == 0.0
    assert base["loose"]["per_instruction"]["startend:quotation"]["accuracy"] == 1.0
    assert base["strict"]["per_category"]["keywords"] == {"accuracy": 0.75, "correct": 3, "total": 4}


def test_hand_made_comparison(systems):
    result = compare(*systems, n_resamples=2000)
    strict, loose = result["strict"], result["loose"]
    # prompt level, strict: base [3084], trained [1508, 3131, 1466]: b = 1, c = 3, p = 2 * 5/16
    pl = strict.prompt_level
    assert (pl.n, pl.b, pl.c) == (5, 1, 3)
    assert (pl.base, pl.trained, pl.delta) == pytest.approx((0.2, 0.6, 0.4))
    assert pl.pvalue == pytest.approx(0.625)
    il = strict.instruction_level
    assert (il.n, il.b, il.c, il.delta) == (10, 1, 3, pytest.approx(0.2))
    # loose: prompts b = 1 (3386), c = 2 (1508, 3131); instructions b = 1, c = 2
    assert (loose.prompt_level.b, loose.prompt_level.c, loose.prompt_level.delta) == (1, 2, pytest.approx(0.2))
    assert loose.prompt_level.pvalue == pytest.approx(1.0)
    assert (loose.instruction_level.b, loose.instruction_level.c) == (1, 2)
    assert loose.instruction_level.delta == pytest.approx(0.1)

    by_type = {g.name: g for g in strict.per_instruction}
    assert sorted(by_type) == sorted([
        "punctuation:no_comma", "keywords:existence", "startend:end_checker", "detectable_format:title",
        "detectable_content:postscript", "keywords:forbidden_words", "startend:quotation"])
    no_comma = by_type["punctuation:no_comma"]  # 1508 F->T, 3084 T->F
    assert (no_comma.n, no_comma.b, no_comma.c, no_comma.delta, no_comma.pvalue) == (2, 1, 1, 0.0, 1.0)
    ps = by_type["detectable_content:postscript"]
    assert (ps.n, ps.base, ps.trained, ps.delta, ps.b, ps.c) == (1, 0.0, 1.0, 1.0, 0, 1)
    assert (by_type["startend:quotation"].b, by_type["startend:quotation"].c) == (0, 1)
    assert all(g.pvalue_holm == 1.0 for g in strict.per_instruction)
    keywords = {g.name: g for g in strict.per_category}["keywords"]
    assert (keywords.n, keywords.base, keywords.trained, keywords.b, keywords.c) == (4, 0.75, 0.75, 0, 0)

    # the interval is the paired bootstrap of trained - base per prompt, seed 0
    ci = paired_bootstrap_ci([1, 0, 1, 0, 1], [0, 0, 0, 1, 0], n_resamples=2000, seed=0)  # order 1466, ..., 3386
    assert (pl.ci_low, pl.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert pl.ci_low <= pl.delta <= pl.ci_high


def _synthetic(name, outcomes):
    """One prompt per outcome, each with one instruction: outcomes are (instruction id, followed)."""
    results = [IFEvalResult(f"p{i}", [iid], ok, [ok], key=i) for i, (iid, ok) in enumerate(outcomes)]
    return SystemResults(name, results, results)


def test_holm_adjustment_across_types():
    ids = ["punctuation:no_comma"] * 12 + ["detectable_format:title"] * 6 + ["startend:quotation"] * 4
    base = _synthetic("base", [(i, False) for i in ids])
    trained = _synthetic("trained", [(i, i != "startend:quotation") for i in ids])
    groups = {g.name: g for g in compare(base, trained, n_resamples=200)["strict"].per_instruction}
    assert groups["punctuation:no_comma"].pvalue == pytest.approx(2 * 0.5 ** 12)
    assert groups["detectable_format:title"].pvalue == pytest.approx(2 * 0.5 ** 6)
    # Holm over 3 types: 3 * p(12), then max(2 * p(6), previous), then 1 for the type without change
    assert groups["punctuation:no_comma"].pvalue_holm == pytest.approx(3 * 2 * 0.5 ** 12)
    assert groups["detectable_format:title"].pvalue_holm == pytest.approx(2 * 2 * 0.5 ** 6)
    assert groups["startend:quotation"].pvalue_holm == 1.0


def test_compare_needs_the_same_prompts(systems):
    base, trained = systems
    fewer = SystemResults("trained", trained.strict[:-1], trained.loose[:-1])
    with pytest.raises(ValueError, match="same prompts.*1 only in base"):
        compare(base, fewer)


# ------------------------------------------------------------------------------------------ files


def test_written_rows_have_exactly_the_reference_keys(tmp_path, systems):
    base, _ = systems
    path = write_results_jsonl(tmp_path / "eval_results_strict.jsonl", base.strict)
    lines = path.read_text().splitlines()
    assert len(lines) == 5
    for line, result in zip(lines, base.strict):
        row = json.loads(line)
        assert tuple(row) == REFERENCE_FIELDS == (
            "follow_all_instructions", "follow_instruction_list", "instruction_id_list", "prompt", "response")
        assert row["prompt"] == result.prompt and row["follow_instruction_list"] == result.follow_instruction_list
        assert line == json.dumps(row)  # json.dumps defaults, as the reference writes


def test_writers_produce_every_file(tmp_path, systems):
    base, trained = systems
    summary = write_system(tmp_path / "base", SystemResults("base", base.strict, base.loose, {"source": "hand"}))
    assert summary["source"] == "hand"
    assert json.loads((tmp_path / "base" / "summary.json").read_text())["strict"]["prompt_level"] == 0.2
    assert "| prompt | 20.00 | 60.00 | 5 |" in (tmp_path / "base" / "summary.md").read_text()
    write_comparison(tmp_path, base, trained, n_resamples=500)
    data = json.loads((tmp_path / "comparison.json").read_text())
    assert data["strict"]["prompt_level"]["b"] == 1 and data["strict"]["prompt_level"]["c"] == 3
    assert len(data["strict"]["per_instruction"]) == 7
    assert (tmp_path / "comparison.png").read_bytes().startswith(PNG_MAGIC)
    assert "## Per instruction type (strict)" in (tmp_path / "comparison.md").read_text()


# ------------------------------------------------------------------------------------------ responses mode


def _write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def response_files(tmp_path, rows):
    data = _write_jsonl(tmp_path / "data.jsonl", [row.to_dict() for row in rows])
    by_prompt = _write_jsonl(tmp_path / "trained.jsonl",
                             [{"prompt": row.prompt, "response": TRAINED[row.key]} for row in reversed(rows)])
    by_key = _write_jsonl(tmp_path / "base.jsonl", [{"key": row.key, "response": BASE[row.key]} for row in rows])
    return data, by_prompt, by_key


def test_responses_mode_one_system(tmp_path, response_files, capsys):
    data, by_prompt, _ = response_files
    out = tmp_path / "out"
    assert cli.main(["--data", str(data), "--responses", str(by_prompt), "--out-dir", str(out), "--no-progress"]) == 0
    assert "| prompt | 60.00 | 80.00 | 5 |" in capsys.readouterr().out
    for name in ("eval_results_strict.jsonl", "eval_results_loose.jsonl", "summary.json", "summary.md",
                 "responses.jsonl"):
        assert (out / name).is_file(), name
    strict = [json.loads(x) for x in (out / "eval_results_strict.jsonl").read_text().splitlines()]
    assert [r["prompt"] for r in strict] == [row["prompt"] for row in map(json.loads, data.read_text().splitlines())]
    assert [r["follow_instruction_list"] for r in strict] == [[True, True], [True, True], [False, True],
                                                              [True, True], [False, True]]


def test_responses_mode_two_systems_with_config(tmp_path, response_files, capsys):
    data, by_prompt, by_key = response_files
    out = tmp_path / "cmp"
    config = tmp_path / "ifeval.yaml"
    config.write_text(f"data: {data}\nbaseline-responses: {by_key}\nbootstrap_resamples: 300\nno_progress: true\n")
    assert cli.main(["--config", str(config), "--responses", str(by_prompt), "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| prompt (strict) | 5 | 20.00 | 60.00 | +40.00 |" in printed
    for name in ("base/eval_results_strict.jsonl", "base/eval_results_loose.jsonl", "base/summary.json",
                 "base/responses.jsonl", "trained/eval_results_strict.jsonl", "trained/summary.md",
                 "comparison.json", "comparison.md", "comparison.png"):
        assert (out / name).is_file(), name
    data_out = json.loads((out / "comparison.json").read_text())
    assert data_out["settings"]["bootstrap_resamples"] == 300
    assert data_out["base"]["source"] == {"responses": str(by_key)}


def test_responses_mode_limit_and_allow_missing(tmp_path, response_files, capsys):
    _, by_prompt, _ = response_files  # 5 responses against the packaged 541 prompts
    out = tmp_path / "partial"
    assert cli.main(["--responses", str(by_prompt), "--out-dir", str(out), "--no-progress"]) == 1
    assert "536 of 541 prompts have no response" in capsys.readouterr().err
    assert cli.main(["--responses", str(by_prompt), "--out-dir", str(out), "--allow-missing", "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_prompts"] == 5 and summary["system"] == "trained"  # named after the file
    # two files covering different prompts: compared on the prompts they share
    fewer = _write_jsonl(tmp_path / "fewer.jsonl", [{"key": k, "response": BASE[k]} for k in (1508, 3084, 3131)])
    out = tmp_path / "shared"
    assert cli.main(["--responses", str(by_prompt), "--baseline-responses", str(fewer), "--out-dir", str(out),
                     "--allow-missing", "--no-progress", "--bootstrap-resamples", "200"]) == 0
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["strict"]["prompt_level"]["n"] == 3
    assert (comparison["strict"]["prompt_level"]["b"], comparison["strict"]["prompt_level"]["c"]) == (1, 2)


def test_think_blocks_are_stripped_unless_kept(tmp_path, rows):
    row = rows[2]  # 3084: no comma, ends with "in India."
    data = _write_jsonl(tmp_path / "data.jsonl", [row.to_dict()])
    responses = _write_jsonl(tmp_path / "r.jsonl", [{"key": row.key,
                                                     "response": "<think>Hmm, a haiku.</think>\n\nkites rise in India."}])
    for flag, expected in (([], True), (["--keep-think"], False)):
        out = tmp_path / f"out{len(flag)}"
        assert cli.main(["--data", str(data), "--responses", str(responses), "--out-dir", str(out),
                         "--no-progress", *flag]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["strict"]["prompt_level"] == float(expected)
        assert summary["think_blocks_stripped"] == int(expected)


def test_strip_think():
    # the reward core's rule (tests/test_reward_core.py): the text after the last </think>
    assert strip_think("<think>\nplan\n</think>\n\nAnswer.") == "Answer."
    assert strip_think("plan\n</think>\n\nAnswer.") == "Answer."  # Qwen3: <think> opened by the template
    assert strip_think("  Answer without tags. ") == "  Answer without tags. "
    assert strip_think("<think>never closed") == ""


# ------------------------------------------------------------------------------------------ errors


def test_unmatched_response_rows_are_named(tmp_path, response_files, capsys):
    data, _, _ = response_files
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "Not an IFEval prompt.", "response": "x"}])
    assert cli.main(["--data", str(data), "--responses", str(bad), "--out-dir", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "bad.jsonl: line 1" in err and "matches no IFEval row" in err
    bad_key = _write_jsonl(tmp_path / "bad_key.jsonl", [{"key": 99999, "response": "x"}])
    assert cli.main(["--data", str(data), "--responses", str(bad_key), "--out-dir", str(tmp_path / "o")]) == 1
    assert "key 99999 matches no IFEval row" in capsys.readouterr().err


def test_missing_files_are_named(tmp_path, response_files, capsys):
    data, _, _ = response_files
    missing = tmp_path / "nope.jsonl"
    assert cli.main(["--data", str(data), "--responses", str(missing), "--out-dir", str(tmp_path / "o")]) == 1
    assert f"no responses file at {missing}" in capsys.readouterr().err
    assert cli.main(["--data", str(missing), "--responses", str(missing), "--out-dir", str(tmp_path / "o")]) == 1
    assert f"no IFEval JSONL file at {missing}" in capsys.readouterr().err


def test_bad_arguments_and_config(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(["--out-dir", "x"])  # neither --responses nor --model
    assert "give either --responses" in capsys.readouterr().err
    config = tmp_path / "c.yaml"
    config.write_text("max_new_token: 5\n")
    with pytest.raises(SystemExit):
        cli.parse_args(["--config", str(config), "--model", "m", "--out-dir", "x"])
    assert "unknown key 'max_new_token'" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_vllm_backend_absent_names_the_extra(tmp_path, capsys):
    with pytest.raises(ImportError, match=r"pip install 'rubric-reward\[vllm\]'"):
        generate_responses(["hi"], model="some/model", backend="vllm")
    assert VLLM_INSTALL_HINT == "pip install 'rubric-reward[vllm]'"
    assert cli.main(["--model", "some/model", "--backend", "vllm", "--limit", "1", "--out-dir", str(tmp_path)]) == 1
    assert "pip install 'rubric-reward[vllm]'" in capsys.readouterr().err


def test_help_runs_from_the_repo_root():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "eval/ifeval.py", "--help"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--baseline-responses" in proc.stdout and "--adapter" in proc.stdout


# ------------------------------------------------------------------------------------------ openai backend


@pytest.fixture
def chat_server():
    """A minimal OpenAI-compatible server: echoes the last user message (``FAIL`` gets HTTP 500)."""
    import asyncio

    from aiohttp import web

    seen: list[dict] = []

    async def chat(request):
        body = await request.json()
        seen.append(body)
        text = body["messages"][-1]["content"]
        if text == "FAIL":
            return web.Response(status=500, text="boom")
        await asyncio.sleep(0.01)
        return web.json_response({"choices": [{"message": {"role": "assistant",
                                                           "content": f"<think>x</think>echo: {text}"}}]})

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/v1", seen
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.run_until_complete(runner.cleanup())
    loop.close()


def test_openai_backend_generates_in_order(chat_server):
    url, seen = chat_server
    prompts = [f"prompt {i}" for i in range(10)] + [[{"role": "system", "content": "s"},
                                                      {"role": "user", "content": "chat"}]]
    out = generate_responses(prompts, model="m", backend="openai", base_url=url, batch_size=4, progress=False,
                             max_new_tokens=7)
    assert out == [f"echo: prompt {i}" for i in range(10)] + ["echo: chat"]
    assert {b["temperature"] for b in seen} == {0} and {b["max_tokens"] for b in seen} == {7}
    kept = generate_responses(["a"], model="m", backend="openai", base_url=url, progress=False, keep_think=True,
                              adapter="my-lora")
    assert kept == ["<think>x</think>echo: a"] and seen[-1]["model"] == "my-lora"


def test_openai_backend_http_failure_names_url_and_status(chat_server):
    url, _ = chat_server
    with pytest.raises(RuntimeError, match=rf"{url}/chat/completions returned HTTP 500"):
        generate_responses(["ok", "FAIL"], model="m", backend="openai", base_url=url, progress=False)
    with pytest.raises(ValueError, match="needs base_url"):
        generate_responses(["x"], model="m", backend="openai")


# ------------------------------------------------------------------------------------------ tiny model


@pytest.fixture(scope="module")
def tiny_model_and_adapter(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from rubric_reward.testing.tiny_model import build_tiny_qwen3

    model_dir = build_tiny_qwen3(tmp_path_factory.mktemp("models") / "tiny")
    torch.manual_seed(1)
    lm = AutoModelForCausalLM.from_pretrained(model_dir)
    # random (not zero) B matrices, so the adapter changes the outputs
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    adapter_dir = tmp_path_factory.mktemp("adapters") / "lora"
    with warnings.catch_warnings():  # peft calls a transformers method deprecated in v5
        warnings.simplefilter("ignore", FutureWarning)
        get_peft_model(lm, config).save_pretrained(adapter_dir)
    return model_dir, adapter_dir


@pytest.mark.slow
def test_command_end_to_end_on_tiny_model(tmp_path, tiny_model_and_adapter):
    model_dir, adapter_dir = tiny_model_and_adapter
    out = tmp_path / "run"
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--model", str(model_dir), "--adapter", str(adapter_dir), "--limit", "6",
         "--max-new-tokens", "16", "--out-dir", str(out), "--bootstrap-resamples", "500", "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "IFEval base (6 prompts" in proc.stdout and "prompt (strict) | 6 |" in proc.stdout
    for system in ("base", "trained"):
        for name in ("eval_results_strict.jsonl", "eval_results_loose.jsonl", "responses.jsonl"):
            lines = (out / system / name).read_text().splitlines()
            assert len(lines) == 6, (system, name)
        row = json.loads((out / system / "eval_results_loose.jsonl").read_text().splitlines()[0])
        assert tuple(row) == REFERENCE_FIELDS
        summary = json.loads((out / system / "summary.json").read_text())
        assert summary["num_prompts"] == 6 and summary["system"] == system
        assert set(summary["strict"]) >= {"prompt_level", "instruction_level", "per_instruction", "per_category"}
        assert summary["source"]["model"] == str(model_dir) and summary["source"]["decoding"] == "greedy"
        assert (out / system / "summary.md").is_file()
    assert json.loads((out / "trained" / "summary.json").read_text())["source"]["adapter"] == str(adapter_dir)
    base_texts = [json.loads(x)["response"] for x in (out / "base" / "responses.jsonl").read_text().splitlines()]
    trained_texts = [json.loads(x)["response"] for x in (out / "trained" / "responses.jsonl").read_text().splitlines()]
    assert base_texts != trained_texts  # the adapter changes generation
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["strict"]["prompt_level"]["n"] == 6
    assert {"base", "trained", "strict", "loose", "settings"} <= set(comparison)
    assert (out / "comparison.md").is_file()
    assert (out / "comparison.png").read_bytes().startswith(PNG_MAGIC)
    print(f"tiny end-to-end command: {elapsed:.1f} s")


def test_example_config_parses():
    args = cli.parse_args(["--config", str(ROOT / "configs" / "eval" / "ifeval.yaml"), "--limit", "3"])
    assert args.model and args.adapter and args.backend == "transformers" and args.limit == 3
    assert args.out_dir == "runs/ifeval" and args.keep_think is False
