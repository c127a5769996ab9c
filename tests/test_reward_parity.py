"""One reward.yaml, one table of tricky samples, every trainer path: the same rewards and the same judge requests.

Paths: the TRL call (``RubricReward.from_config``), ``rubric_rewards``, the service's ``POST /score`` and
``POST /openrlhf``, and the OpenRLHF and verl adapters judging in-process (verl's batch, per-sample and
async forms). The loopback judge records every
request; each path's requests must equal the TRL path's, body for body.

The default rubric carries a monitor criterion (``monitor: true``, a heavy penalty that fires often and fails on
one row): every path judges it, and every path's rewards equal the TRL rewards of the rubric without it.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import urllib.request
from types import SimpleNamespace

import pytest
import yaml

from rubric_reward.integrations.openrlhf import reward_func
from rubric_reward.integrations.verl import compute_score, compute_score_async, compute_score_batch
from rubric_reward.rl import RubricReward, rubric_rewards
from rubric_reward.serve import ServeConfig, ServiceThread

CAPITAL = {"name": "capital", "criteria": [
    {"name": "names_paris", "requirement": "The response names Paris."},
    {"name": "sourced", "requirement": "The response cites a source."},
    {"name": "rambles", "requirement": "The response rambles.", "weight": -1},
    {"name": "says_please", "requirement": "The response says please.", "weight": -5, "monitor": True},
]}
WITHOUT_MONITOR = {**CAPITAL, "criteria": CAPITAL["criteria"][:-1]}
LIBRARY = {"geo": {"criteria": [{"name": "names_paris", "requirement": "Names Paris."}]}}
SHORT_YAML = "criteria:\n  - name: short\n    requirement: The response is short.\n"
QUESTIONS = ["Does the response name Paris?", "Is the response polite?"]
CONVERSATION = [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Capital of France?"}]

# (prompt, completion, rubric label): every row of issue 18's table, think blocks, conversations, ids, guards
ROWS = [
    ("Capital of France?", "Paris.", None),  # the config's default rubric
    ("Capital of France?", "reasoning about it</think>Paris, please.", None),  # Qwen3: <think> opened by the template
    ("Capital of France?", "<think>hmm</think>\n\nParis, maybe, per Larousse.", None),  # an abstention ('maybe')
    ("Capital of France?", "<think>never closed", None),  # no answer: degenerate, min_reward
    ("Capital of France?", "Lyon.", json.dumps(json.dumps(QUESTIONS))),  # AdvancedIF list, JSON-encoded twice
    ("Capital of France?", "Paris!", {"rubrics": json.dumps(QUESTIONS)}),  # AdvancedIF prompt_metadata
    (CONVERSATION, "Paris", "concise"),  # a conversation; an id from rubric_dir
    (CONVERSATION, "Lyon", "geo"),  # an id from the `rubrics` library
    ("Capital of France?", "Paris, please.", {"rubric_id": "concise"}),
    ("Say something short.", "Paris.", SHORT_YAML),  # inline YAML text
]

SCRIPT = {
    "names_paris": lambda r, b: "MET" if "Paris" in r else "UNMET",
    "sourced": lambda r, b: "CANNOT_ASSESS" if "maybe" in r else ("MET" if "per " in r else "UNMET"),
    "rambles": lambda r, b: "MET" if len(r) > 40 else "UNMET",
    # the monitor: fires on two rows, off the menu (a failed verdict) on the abstaining row
    "says_please": lambda r, b: "NOT A LABEL" if "maybe" in r else ("MET" if "please" in r else "UNMET"),
}


def _default(response, body):
    if body.get("logprobs"):
        return {"MET": 0.8, "UNMET": 0.2} if "Paris" in response else {"MET": 0.3, "UNMET": 0.7}
    return "MET" if "Paris" in response or "please" in response else "UNMET"


# each: judge spec, reward field, partial scoring section; the judge names no base_url (the top-level one applies)
CONFIGS = {
    "mapping-judge-partial-scoring": ({"model": "judge", "max_concurrency": 8}, "score", {"all_or_nothing": False}),
    "all-or-nothing": ({"model": "judge"}, "score", {"all_or_nothing": True}),
    "ensemble-raw-score": ([{"model": "judge-a"}, {"model": "judge-b", "samples": 2}], "raw_score", {}),
    "logprobs-expected-score": ({"model": "judge", "logprobs": True}, "expected_score", {}),
}


def _chatml(prompt):
    if isinstance(prompt, str):
        return prompt
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in prompt) + "<|im_start|>assistant\n"


def _post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def _write_config(tmp_path, server, judge, reward, scoring, rubric=CAPITAL, name="reward.yaml"):
    (tmp_path / "rubrics").mkdir(exist_ok=True)
    (tmp_path / "rubrics" / "concise.yaml").write_text(
        "criteria:\n  - name: names_paris\n    requirement: Names Paris.\n  - name: polite\n    requirement: Polite?\n")
    cfg = {
        "judge": judge, "base_url": server.base_url, "rubric": rubric, "rubric_dir": "rubrics", "rubrics": LIBRARY,
        "scoring": scoring, "reward": reward, "deadline_s": 60, "unscored_reward": -7.0,
        # trainer-only fields and the service's section: one file drives every path
        "name": "rubric", "log_completions": True, "max_criteria_metrics": 5, "metric_prefix": "rubric",
        "guards": {"degenerate": True, "min_reward": -0.5}, "serve": {"max_batch_items": 64},
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def _requests(server):
    bodies = sorted(json.dumps(b, sort_keys=True) for b in server.bodies)
    server.reset_stats()
    return bodies


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_path_gives_the_same_rewards_and_judge_requests(name, judge_server, tmp_path, monkeypatch):
    server = judge_server(SCRIPT, default=_default)
    path = _write_config(tmp_path, server, *CONFIGS[name])
    prompts, completions, labels = (list(col) for col in zip(*ROWS, strict=True))
    got, requests = {}, {}

    reward = RubricReward.from_config(path)
    try:
        got["trl"] = reward(prompts=prompts, completions=completions, completion_ids=[[1]] * len(ROWS),
                            rubric=labels, trainer_state=SimpleNamespace(global_step=1), log_metric=lambda *a: None,
                            log_extra=lambda *a: None)
        metrics = reward.last_metrics
    finally:
        reward.close()
    requests["trl"] = _requests(server)
    # the monitor is judged and logged (its term 0), and the logged terms sum to the logged reward
    assert any("says_please" in json.dumps(b) for b in map(json.loads, requests["trl"]))
    assert metrics["rubric/contrib/says_please"] == 0.0
    terms = [v for k, v in metrics.items() if k.startswith("rubric/contrib/")]
    assert math.isclose(math.fsum(terms), metrics["rubric/reward_mean"], abs_tol=1e-12)

    plain = RubricReward.from_config(_write_config(tmp_path, server, *CONFIGS[name], rubric=WITHOUT_MONITOR,
                                                   name="plain.yaml"))
    try:
        got["trl without the monitor"] = plain(prompts=prompts, completions=completions, rubric=labels)
    finally:
        plain.close()
    server.reset_stats()

    got["rubric_rewards"] = rubric_rewards(prompts, completions, labels, config=str(path))
    requests["rubric_rewards"] = _requests(server)

    with ServiceThread(ServeConfig.from_yaml(path)) as svc:
        items = [{"id": str(i), "response": c, "label": lab,
                  **({"prompt": p} if isinstance(p, str) else {"conversation": p})} for i, (p, c, lab) in enumerate(ROWS)]
        got["/score"] = [r["reward"] for r in _post(svc.url + "/score", {"items": items})["results"]]
        requests["/score"] = _requests(server)
        body = {"query": [_chatml(p) + c for p, c in zip(prompts, completions, strict=True)],
                "prompts": [_chatml(p) for p in prompts], "labels": labels}
        got["/openrlhf"] = _post(svc.url + "/openrlhf", body)["rewards"]
        requests["/openrlhf"] = _requests(server)

    monkeypatch.delenv("RUBRIC_REWARD_URL", raising=False)
    torch = sys.modules.pop("torch", None)  # plain lists without torch loaded
    try:
        got["openrlhf"] = reward_func(body["query"], body["prompts"], labels, config=str(path))["rewards"]
    finally:
        if torch is not None:
            sys.modules["torch"] = torch
    requests["openrlhf"] = _requests(server)

    out = compute_score_batch(["geo"] * len(ROWS), completions, labels, [{"prompt": p} for p in prompts],
                              config=str(path))
    got["verl"] = [o["score"] for o in out]
    requests["verl"] = _requests(server)

    got["verl per sample"] = [compute_score("geo", c, lab, {"prompt": p}, config=str(path))["score"]
                              for p, c, lab in ROWS]
    requests["verl per sample"] = _requests(server)

    async def reward_loop():  # verl's reward loop: one task per sample, awaited together
        return await asyncio.gather(*(compute_score_async(data_source="geo", solution_str=c, ground_truth=lab,
                                                          extra_info={"prompt": p}, config=str(path))
                                      for p, c, lab in ROWS))

    got["verl async"] = [o["score"] for o in asyncio.run(reward_loop())]
    requests["verl async"] = _requests(server)

    assert all(r is not None and r != -7.0 for r in got["trl"]), got["trl"]  # every row scored
    assert got["trl"][3] == -0.5  # the unclosed think block: no answer, the degenerate guard's min_reward
    for path_name, rewards in got.items():
        assert rewards == got["trl"], (path_name, rewards, got["trl"])
    assert requests["trl"], "the judge saw nothing"
    for path_name, bodies in requests.items():
        assert bodies == requests["trl"], path_name
    texts = [m["content"] for b in map(json.loads, requests["trl"]) for m in b["messages"]]
    assert not any("reasoning about it" in t or "<think>" in t for t in texts)  # think blocks never judged
    assert {json.loads(b)["model"] for b in requests["trl"]} <= {"judge", "judge-a", "judge-b"}


def test_defaults_and_base_url_are_one_rule(tmp_path):
    """The rows of issue 18's table that are config decisions, on the trainer and the service configs alike."""
    from rubric_reward.rewards.engine import RewardEngine
    from rubric_reward.serve.service import ServiceEngine

    for cls in (RewardEngine, ServiceEngine):
        engine = cls({"judge": {"model": "m"}, "base_url": "http://127.0.0.1:9/v1",
                      "scoring": {"all_or_nothing": True}, "name": "r", "log_completions": False,
                      "rubrics": LIBRARY, "max_criteria_metrics": 3})
        judge = engine.scorer.grader.judges[0]
        assert judge.config.base_url == "http://127.0.0.1:9/v1" and judge.config.resolved_backend() == "http"
        scoring = engine.scorer.grader.scoring
        assert scoring.abstention == "zero" and scoring.all_or_nothing and scoring.on_failure == "unscored"
    path = tmp_path / "reward.yaml"
    path.write_text("judge: m\nbase_url: http://127.0.0.1:9/v1\nserve: {port: 9001}\n")
    assert RubricReward.from_config(path).config.base_url == "http://127.0.0.1:9/v1"  # the service's file, too
    assert ServeConfig.from_yaml(path).serve.port == 9001
