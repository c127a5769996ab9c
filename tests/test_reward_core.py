"""The reward core's decisions, one at a time: think stripping, rubric labels, malformed samples, closing."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rubric_reward import Scorer
from rubric_reward.rewards import RubricResolver, SampleError, strip_think
from rubric_reward.rl import RubricReward
from rubric_reward.serve import ServiceThread

ROOT = Path(__file__).resolve().parents[1]
RUBRIC = {"criteria": [{"name": "ok", "requirement": "The reply is fine."}]}


@pytest.mark.parametrize(("text", "answer"), [
    ("plain answer", "plain answer"),
    ("  spaced  ", "  spaced  "),  # no tag: unchanged
    ("<think>plan</think>\n\nThe answer.", "The answer."),
    ("reasoning</think>ans", "ans"),  # Qwen3: the template opened <think>, the completion only closes it
    ("<think>a</think> b </think> c", "c"),  # after the last </think>
    ("<think>never closed", ""),  # stopped while reasoning: no answer
    ("done</think>answer <think>more", ""),  # a block opened after the answer and never closed
    ("<think></think>", ""),
])
def test_strip_think_takes_the_text_after_the_last_closing_tag(text, answer):
    assert strip_think(text) == answer


def test_one_strip_think_everywhere():
    import importlib
    from pathlib import Path

    import rubric_reward
    from rubric_reward.util.think import strip_think

    users = ["generation.answers", "generation.parsing", "evaluation.rollouts", "grading.criterion_prompt",
             "rewards.engine"]
    for name in users:
        assert importlib.import_module(f"rubric_reward.{name}").strip_think is strip_think, name
    from rubric_reward.rewards import strip_think as door

    assert door is strip_think
    root = Path(rubric_reward.__file__).parent
    defined = [p for p in root.rglob("*.py") if "def strip_think" in p.read_text()]
    assert [p.relative_to(root).as_posix() for p in defined] == ["util/think.py"]


def test_rubric_labels_in_every_form_and_errors_naming_the_field(tmp_path):
    (tmp_path / "polite.yaml").write_text("criteria:\n  - Polite?\n")
    resolver = RubricResolver(RUBRIC, rubric_dir=tmp_path, rubrics={"named": {"criteria": ["Named?"]}})
    questions = ["Is it polite?", "Is it short?"]
    assert resolver.resolve(None, "x") is resolver.default and resolver.resolve("  ", "x") is resolver.default
    assert len(resolver.resolve(json.dumps(json.dumps(questions)), "x")) == 2
    assert len(resolver.resolve({"rubrics": json.dumps(questions)}, "x")) == 2
    assert len(resolver.resolve("[Is it polite, Is it short]", "x")) == 2  # YAML flow list
    assert resolver.resolve("polite", "x").criteria[0].requirement == "Polite?"
    assert resolver.resolve({"rubric_id": "named"}, "x").criteria[0].requirement == "Named?"
    cases = [
        ("no_such_id", "labels[3]", "unknown_rubric_id"),
        ({"rubric_id": "../etc"}, "labels[3].rubric_id", "invalid_field"),
        ('["unclosed', "labels[3]", "invalid_rubric"),
        ({"criteria": []}, "labels[3]", "invalid_rubric"),
        (42, "labels[3]", "invalid_rubric"),
    ]
    for label, field, code in cases:
        with pytest.raises(SampleError) as info:
            resolver.resolve(label, "labels[3]")
        assert (info.value.field, info.value.code, info.value.kind) == (field, code, "rubric"), label
    with pytest.raises(ValueError, match="rubric_dir"):
        RubricResolver(rubric_dir=tmp_path / "missing")


@pytest.mark.timeout(60)
def test_malformed_completions_are_unscored_with_a_named_cause(judge_server):
    server = judge_server(default="MET")
    with RubricReward(judge="judge", base_url=server.base_url, rubric=RUBRIC) as reward:
        completions = ["Here you go: 42.", [["nested"]], [1, 2], b"bytes", [{"role": "user", "content": "only a user turn"}], 5,
                       [{"role": "assistant", "content": "Here you go as well: 42."}]]
        prompts = ["p", "p", "p", "p", "p", "p", [{"no_role": 1}]]
        records = reward.score_batch(prompts, completions)
        rewards = reward(prompts=prompts[:6], completions=completions[:6])
    assert records[0].reward == 1.0 and rewards[0] == 1.0 and rewards[1:] == [None] * 5
    for rec in records[1:]:
        assert rec.reward is None and rec.error_kinds == ("data",) and rec.error.startswith("data: row "), rec.error
    assert "completion" in records[1].error and "bytes" in records[3].error and "no assistant turn" in records[4].error
    assert "row 6: prompt" in records[6].error
    assert server.requests == 2  # only the good completion reached the judge (once per call)


@pytest.mark.timeout(60)
def test_batches_that_cannot_be_aligned_are_one_clear_error(judge_server):
    server = judge_server(default="MET")
    with RubricReward(judge="judge", base_url=server.base_url, rubric=RUBRIC) as reward:
        for kwargs, says in [
            ({"prompts": ["p", "q"], "completions": "ab"}, "'completions' must be a list"),
            ({"prompts": None, "completions": None}, "'completions' must be a list"),
            ({"prompts": None, "completions": 3}, "'completions' must be a list"),
            ({"prompts": {"a": 1}, "completions": ["x"]}, "'prompts' must be a list"),
            ({"prompts": ["p"], "completions": ["x", "y"]}, "'prompts' has 1 entries for 2 completions"),
            ({"prompts": ["p"], "completions": ["x"], "rubric": [RUBRIC, RUBRIC]}, "'rubric' has 2 entries"),
        ]:
            with pytest.raises(ValueError, match=says):
                reward(**kwargs)
    assert server.requests == 0


@pytest.mark.timeout(60)
def test_service_names_the_malformed_field(judge_server):
    server = judge_server(default="MET")
    cfg = {"judge": {"model": "judge"}, "base_url": server.base_url, "rubric": RUBRIC}
    with ServiceThread(cfg) as svc:
        for item, field in [({"response": [1, 2]}, "items[0].response"),
                            ({"response": [{"role": "user", "content": "x"}]}, "items[0].response"),
                            ({"response": "x", "conversation": [{"no_role": 1}]}, "items[0].conversation"),
                            ({"response": "x", "label": "[unclosed"}, "items[0].label")]:
            req = urllib.request.Request(svc.url + "/score", json.dumps({"items": [item]}).encode(),
                                         {"Content-Type": "application/json"})
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(req, timeout=30)
            assert info.value.code == 422 and json.loads(info.value.read())["error"]["field"] == field, item
    assert server.requests == 0


def test_a_mapping_judge_takes_the_top_level_base_url(judge_server):
    server = judge_server(default="MET")
    with Scorer(RUBRIC, {"model": "judge", "timeout_s": 5}, base_url=server.base_url) as scorer:
        assert scorer.score("q", "Here you go: 42.").score == 1.0
    assert server.requests == 1 and scorer.judge_names == ["judge"] and scorer.has_judge


def _sessions(reward):
    return list(reward.engine.scorer.grader.judges[0].backend._sessions._sessions.values())


@pytest.mark.timeout(60)
def test_async_form_closes_its_session_on_the_loop_that_opened_it(judge_server):
    server = judge_server(default="MET")
    reward = RubricReward(judge="judge", base_url=server.base_url, rubric=RUBRIC)
    loop = asyncio.new_event_loop()  # TRL's persistent loop thread for async reward functions
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        out = asyncio.run_coroutine_threadsafe(reward.as_async()(prompts=["p"], completions=["Here you go: 42."]), loop).result(30)
        sessions = _sessions(reward)
        assert out == [1.0] and sessions and not any(s.closed for s in sessions)
        reward.as_async().close()
        assert all(s.closed for s in sessions)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


@pytest.mark.timeout(60)
def test_a_reward_nobody_closes_is_closed_when_collected(judge_server):
    server = judge_server(default="MET")
    reward = RubricReward(judge="judge", base_url=server.base_url, rubric=RUBRIC)
    assert reward(prompts=["p"], completions=["Here you go: 42."]) == [1.0]
    sessions = _sessions(reward)
    del reward
    gc.collect()
    assert sessions and all(s.closed for s in sessions)


@pytest.mark.timeout(90)
def test_no_unclosed_session_warning_at_exit():
    code = (
        "from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge\n"
        "from rubric_reward.rl import RubricReward\n"
        "from rubric_reward.integrations.verl import compute_score\n"
        "import yaml, tempfile, os\n"
        "server = JudgeServer(ScriptedJudge()).start()\n"
        "rubric = {'criteria': ['Does it answer?']}\n"
        "reward = RubricReward(judge='judge', base_url=server.base_url, rubric=rubric)\n"
        "print(reward(prompts=['p'], completions=['Here you go: 42.']))\n"
        "path = os.path.join(tempfile.mkdtemp(), 'reward.yaml')\n"
        "open(path, 'w').write(yaml.safe_dump({'judge': 'judge', 'base_url': server.base_url, 'rubric': rubric}))\n"
        "print(compute_score('x', 'Here you go: 42.', None, None, config=path)['score'])\n"
        "# neither is closed: TRL never closes reward functions, verl never closes its backend\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=80)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[1.0]", "1.0"]
    assert "Unclosed" not in out.stderr, out.stderr


@pytest.mark.timeout(60)
def test_a_rows_rubric_wins_over_the_default_unless_the_column_is_off(judge_server):
    server = judge_server({"ok": "MET", "other": "UNMET"})
    own = {"criteria": [{"name": "other", "requirement": "Something else."}]}
    with RubricReward(judge="judge", base_url=server.base_url, rubric=RUBRIC) as reward:
        assert reward(prompts=["p", "p"], completions=["Here you go: 42."] * 2, rubric=[own, None]) == [0.0, 1.0]
    with RubricReward(judge="judge", base_url=server.base_url, rubric=RUBRIC, rubric_column=None) as fixed:
        assert fixed(prompts=["p"], completions=["Here you go: 42."], rubric=[own]) == [1.0]


@pytest.mark.timeout(60)
def test_one_batch_parses_each_reply_once_and_normalises_each_prompt_once(judge_server, tmp_path, monkeypatch):
    import rubric_reward.grading.criterion_prompt as criterion_prompt
    import rubric_reward.items as items

    server = judge_server(default="MET")
    parses, normalised = [], []
    parse_reply, as_messages = criterion_prompt.parse_reply, items.as_messages
    monkeypatch.setattr(criterion_prompt, "parse_reply", lambda *a, **k: parses.append(1) or parse_reply(*a, **k))
    monkeypatch.setattr(items, "as_messages", lambda *a, **k: normalised.append(1) or as_messages(*a, **k))
    # a fresh list per generation, as TRL's data loader gives them
    prompts = [[{"role": "user", "content": f"Question {p}?"}] for p in range(2) for _ in range(4)]
    completions = [f"Answer {i}: 42." for i in range(8)]
    with RubricReward(judge="judge", base_url=server.base_url, rubric=RUBRIC, cache=str(tmp_path / "c.sqlite")) as r:
        import rubric_reward.rewards.engine as engine

        monkeypatch.setattr(engine, "as_messages", items.as_messages)
        assert r(prompts=prompts, completions=completions) == [1.0] * 8
    assert server.requests == 8 and len(parses) == 8  # vetted for the cache and read for the verdict at once
    assert len(normalised) == 2  # one per distinct prompt
