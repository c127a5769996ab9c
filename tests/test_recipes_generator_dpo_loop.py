"""The dpo-loop: two iterations on the tiny Qwen3 with the loopback server as meta-judge, crashes at a stage
boundary and in the middle of a stage, resumes to the same artefacts; bad inputs stop it cleanly."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from pathlib import Path

import pytest

pytest.importorskip("trl")

from rubric_reward.recipes.generator_dpo.loop import LoopError, load_loop_config, run_loop  # noqa: E402
from rubric_reward.judges.base import ChatReply  # noqa: E402
from rubric_reward.judges.config import JudgeConfig  # noqa: E402
from rubric_reward.judges.judge import Judge  # noqa: E402
from rubric_reward.results import Usage  # noqa: E402
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "dpo" / "tiny.yaml"


class Crash(BaseException):
    """Stands in for the process dying: not an Exception, so nothing records it as a failure."""


class TinySampler:
    """A generator backend that samples from the tiny Qwen3 at ``path`` (seeded per request) and turns the
    sampled words into a rubric, since a random 2-layer model cannot write JSON. Different weights (the
    merged model of the next iteration) sample different words."""

    _lock = threading.Lock()

    def __init__(self, path: str, calls: list[str], crash_at: int | None = None):
        self.name, self.path, self.calls, self.crash_at = "tiny", path, calls, crash_at
        self._lm = self._tok = None

    async def complete(self, request) -> ChatReply:
        return await asyncio.to_thread(self._run, request)

    def _run(self, request) -> ChatReply:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        with self._lock:
            self.calls.append(self.path)
            if self.crash_at is not None and len(self.calls) >= self.crash_at:
                raise Crash(f"killed at generation call {len(self.calls)}")
            if self._lm is None:
                self._tok = AutoTokenizer.from_pretrained(self.path)
                self._lm = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32).eval()
            text = self._tok.apply_chat_template(list(request.messages), tokenize=False, add_generation_prompt=True)
            enc = self._tok(text, return_tensors="pt", add_special_tokens=False)
            torch.manual_seed(int(hashlib.sha256(f"{text}|{request.sample_index}".encode()).hexdigest()[:8], 16))
            with torch.inference_mode():
                out = self._lm.generate(**enc, do_sample=True, temperature=0.8, max_new_tokens=12,
                                        pad_token_id=self._tok.pad_token_id)
            words = re.findall(r"[A-Za-z]+", self._tok.decode(out[0, enc["input_ids"].shape[1]:],
                                                               skip_special_tokens=True))
        words = list(dict.fromkeys(w.lower() for w in words)) or ["nothing"]
        # 1-3 criteria by sample index, so the length-preferring meta-judge below can rank candidates
        crits = [{"name": f"c{n}", "requirement": f"The response mentions {words[n % len(words)]}."}
                 for n in range(1 + request.sample_index % 3)]
        rubric = {"name": "sampled", "criteria": crits}
        return ChatReply(json.dumps(rubric), usage=Usage(int(enc["input_ids"].shape[1]), 12), finish_reason="stop")

    async def aclose(self) -> None:
        return None


def _longer_rubric_wins(body) -> str | None:
    text = body["messages"][-1]["content"]
    if "## Rubric A" not in text:
        return None
    a = text.split("## Rubric A", 1)[1].split("## Rubric B", 1)[0]
    b = text.split("## Rubric B", 1)[1]
    return json.dumps({"reason": "more specific criteria", "winner": "A" if len(a) >= len(b) else "B"})



@pytest.fixture
def meta_server():
    server = JudgeServer(ScriptedJudge(reply=_longer_rubric_wins)).start()
    yield server
    server.stop()


def _config(out: Path, model: Path, server: JudgeServer, **kw):
    import yaml

    data = yaml.safe_load(TINY.read_text())
    data["max_steps"] = 1  # one DPO step per iteration keeps the loop tests short
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(data))
    judge = {"model": "scripted", "base_url": server.base_url, "max_retries": 0}
    return load_loop_config(path, generator=str(model), meta_judge=judge, out_dir=str(out), progress=False, **kw)


def _factory(calls: list[str], crash_at: dict[int, int] | None = None):
    def make(model: str, iteration: int):
        cfg = JudgeConfig(model=model, backend="transformers", verdict_mode="generate", temperature=0.8,
                          max_tokens=64)
        return Judge(cfg, backend=TinySampler(model, calls, (crash_at or {}).get(iteration)))

    return make


def _artefacts(out: Path, tiny: Path) -> dict:
    from datasets import load_from_disk
    from safetensors.torch import load_file

    from rubric_reward.io.journal import Journal

    got = {}
    for i in (1, 2):
        it = out / f"iter_{i}"
        prefs = it / "preferences"
        pairs = load_from_disk(str(prefs / "dataset")).to_list()
        for row in pairs:  # the generator's name is its folder, which differs between the two runs
            assert row["metadata"].pop("generator") in (str(tiny), str((out / f"iter_{i - 1}/merged").resolve()))
        got[f"{i}/pairs"] = pairs
        got[f"{i}/candidates"] = {(e["prompt_id"], e["sample_index"]): e["rubric"]
                                  for e in Journal(prefs / "candidates.jsonl").latest().values()}
        got[f"{i}/judgments"] = {(e["prompt_id"], e["a"], e["b"]): (e["credit_a"], e["outcome"])
                                 for e in Journal(prefs / "transcripts.jsonl").latest().values()}
        got[f"{i}/adapter"] = load_file(str(it / "adapter" / "adapter_model.safetensors"))
        got[f"{i}/merged"] = load_file(str(it / "merged" / "model.safetensors"))
    return got


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_iterations_killed_twice_resume_to_the_same_artefacts(tmp_path, tiny_model, meta_server):
    import torch

    # the reference: two iterations without interruption
    calls_a: list[str] = []
    ref = run_loop(_config(tmp_path / "a", tiny_model, meta_server), generator_factory=_factory(calls_a))
    assert ref.generator == str((tmp_path / "a" / "iter_2" / "merged").resolve())
    assert [r["generator"] for r in ref.iterations] == [str(tiny_model), str((tmp_path / "a/iter_1/merged").resolve())]
    assert ref.iterations[0]["preferences"]["n_pairs"] >= 1
    per_iteration = {m: calls_a.count(m) for m in dict.fromkeys(calls_a)}
    assert list(per_iteration.values()) == [9, 9]  # 3 prompts x 3 candidates, from the base then the merged model

    # run B: killed at the boundary between adapter and merge of iteration 1 ...
    out = tmp_path / "b"
    calls_b: list[str] = []
    started: list[tuple[int, str]] = []

    def crash_before_merge(i, stage, event):
        if event == "start":
            started.append((i, stage))
        if (i, stage, event) == (1, "merged", "start") and len(started) == 3:
            raise Crash("killed between stages")

    with pytest.raises(Crash):
        run_loop(_config(out, tiny_model, meta_server), generator_factory=_factory(calls_b), hook=crash_before_merge)
    assert (out / "iter_1/adapter.done.json").is_file() and not (out / "iter_1/merged.done.json").exists()
    stamps = {p: p.stat().st_mtime_ns for p in (out / "iter_1").glob("*.done.json")}

    # ... then in the middle of iteration 2's candidate generation (the 5th call of that iteration)
    started.clear()
    with pytest.raises(Crash):
        run_loop(_config(out, tiny_model, meta_server), generator_factory=_factory(calls_b, {2: 9 + 5}),
                 hook=lambda i, s, e: started.append((i, s)) if e == "start" else None)
    assert started[0] == (1, "merged")  # finished stages were not redone
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    recorded = (out / "iter_2/preferences/candidates.jsonl").read_text().count("\n")
    assert recorded >= 1 and not (out / "iter_2/preferences.done.json").exists()

    # resume to the end: only the missing candidates are generated
    before = len(calls_b)
    summary = run_loop(_config(out, tiny_model, meta_server), generator_factory=_factory(calls_b))
    assert summary.resumed_stages == 3
    assert len(calls_b) - before == 9 - recorded
    a, b = _artefacts(tmp_path / "a", tiny_model), _artefacts(out, tiny_model)
    for name in a:
        if name.endswith(("adapter", "merged")):
            assert a[name].keys() == b[name].keys(), name
            for k in a[name]:
                assert torch.allclose(a[name][k], b[name][k], atol=1e-6), f"{name}: {k}"
        else:
            assert a[name] == b[name], name
    state = json.loads((out / "loop.json").read_text())
    assert state["done"][-1] == "iter_2/merged" and len(state["done"]) == 6


def test_a_meta_judge_off_the_menu_stops_the_loop_and_keeps_the_candidates(tmp_path, tiny_model):
    server = JudgeServer(ScriptedJudge(reply=lambda body: '{"reason": "both", "winner": "C"}')).start()
    try:
        config = _config(tmp_path / "run", tiny_model, server)
        calls: list[str] = []
        with pytest.raises(LoopError, match=r"iter_1/preferences: 0 preference pair\(s\) from 3 prompts "
                                            r"\(0 skipped, 3 failed"):
            run_loop(config, generator_factory=_factory(calls))
        prefs = tmp_path / "run/iter_1/preferences"
        assert not (tmp_path / "run/iter_1/preferences.done.json").exists()
        statuses = [json.loads(line) for line in (prefs / "prompts.jsonl").read_text().splitlines()]
        assert {s["status"] for s in statuses} == {"failed"}
        assert "every meta-judge comparison failed" in statuses[0]["reason"]
        transcripts = [json.loads(line) for line in (prefs / "transcripts.jsonl").read_text().splitlines()]
        assert transcripts and all(t["credit_a"] is None for t in transcripts)
        assert (prefs / "candidates.jsonl").read_text().count("\n") == 9
        # a rerun reuses the 9 recorded candidates: no generator call
        with pytest.raises(LoopError):
            run_loop(config, generator_factory=_factory(calls))
        assert len(calls) == 9
    finally:
        server.stop()


def test_config_errors_are_clear(tmp_path, tiny_model, meta_server):
    with pytest.raises(ValueError, match="field 'generator' is required"):
        load_loop_config(TINY, meta_judge="x")
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['bogus'\]"):
        load_loop_config(TINY, generator="g", meta_judge="x", bogus=1)
    with pytest.raises(ValueError, match=r"tiny.yaml: loop.preferences: unknown field\(s\) \['max_pairs'\]"):
        load_loop_config(TINY, generator="g", meta_judge="x", preferences={"max_pairs": 3})
    with pytest.raises(ValueError, match="generator_backend"):
        load_loop_config(TINY, generator="g", meta_judge="x", generator_backend="litellm")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "text": "no prompt field"}\n')
    config = _config(tmp_path / "run", tiny_model, meta_server, prompts=str(prompts))
    with pytest.raises(ValueError, match="line 1: no prompt"):
        run_loop(config, generator_factory=_factory([]))
    # a finished folder refuses a different configuration instead of mixing artefacts
    (tmp_path / "run2").mkdir()
    (tmp_path / "run2/loop.json").write_text(json.dumps({"fingerprint": "other", "done": []}))
    with pytest.raises(LoopError, match="different configuration"):
        run_loop(_config(tmp_path / "run2", tiny_model, meta_server), generator_factory=_factory([]))


@pytest.mark.timeout(300)
def test_dpo_loop_command_with_a_generator_that_never_writes_json(tmp_path, tiny_model, meta_server, capsys):
    """The real transformers backend on the random tiny model: every candidate fails to parse, the loop stops
    with exit status 1 and a clear message, and every generation is kept for the rerun."""
    import yaml

    from rubric_reward.cli import main

    data = yaml.safe_load(TINY.read_text())
    data["loop"].update(generator=str(tiny_model), out_dir=str(tmp_path / "run"), limit=2,
                        meta_judge={"model": "scripted", "base_url": meta_server.base_url},
                        generation={"max_tokens": 8, "reasks": 0}, preferences={"k": 2, "m": 1})
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["dpo-loop", "--config", str(path), "--iterations", "1", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "0 preference pair(s) from 2 prompts (0 skipped, 2 failed" in err and "rerun the same command" in err
    prefs = tmp_path / "run/iter_1/preferences"
    lines = [json.loads(x) for x in (prefs / "candidates.jsonl").read_text().splitlines()]
    assert len(lines) == 4 and not any(x["ok"] for x in lines) and all(x["error"] and x["text"] is not None
                                                                      for x in lines)
    assert not list((tmp_path / "run").glob("iter_1/*.done.json"))


def test_generator_engine_args_reach_every_generator(tmp_path):
    from rubric_reward.recipes.generator_dpo.loop import _default_factory, iteration_generators

    config = load_loop_config(ROOT / "configs" / "dpo" / "offline_default.yaml")
    assert config.generator_engine_args == {"dtype": "auto"}
    assert config.meta_judge["engine_args"] == {"dtype": "auto"}
    made = _default_factory(config)(str(config.generator), 1)
    assert made.engine_args == {"dtype": "auto"} and made.backend == "transformers"
    (tmp_path / "loop.json").write_text(json.dumps({"config": config.to_dict()}, default=str))
    [(name, spec)] = iteration_generators(tmp_path)
    assert name == "base" and spec["engine_args"] == {"dtype": "auto"}
    with pytest.raises(ValueError, match="field 'generator_engine_args' must be a mapping"):
        load_loop_config(TINY, generator="g", meta_judge="x", generator_engine_args="auto")
