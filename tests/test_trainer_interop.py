"""OpenRLHF and verl as they call us (tests/helpers/trainer_clients.py), against a judge with 20% faults
and a judge that hangs: every sample is a correct reward or an explicit unscored one, the trainer-side
code never sees a non-2xx or an exception, and a step's reward time stays within its budget."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from rubric_reward.rewards.budget import StepBudget
from rubric_reward.rewards.text import split_query
from rubric_reward.serve import ServeConfig, ServiceThread
from rubric_reward.testing.judge_server import Fault, FaultPlan
from tests.helpers import trainer_clients as tc

ROOT = Path(__file__).resolve().parents[1]
RUBRIC = {"name": "capital", "criteria": [
    {"name": "names_paris", "requirement": "The response names Paris as the capital of France."},
    {"name": "polite", "requirement": "The response asks politely."}]}
SCRIPT = {"names_paris": lambda r, b: "MET" if "Paris" in r else "UNMET",
          "polite": lambda r, b: "MET" if "please" in r else "UNMET"}
RESPONSES = ["The capital of France is Paris, please remember it.", "I believe the answer is Lyon, sorry.",
             "Paris is the answer to your question.", "Could you please ask about another country?"]
FALLBACK = -1.0
FAULTS = (Fault(status=500), Fault(status=429, retry_after=0), Fault(hang_s=1.0), Fault(body="{not json"))


def expected(response: str) -> float:
    return (("Paris" in response) + ("please" in response)) / 2


def _faulty(judge_server, rate=0.2, seed=3, **kw):
    return judge_server(SCRIPT, faults=FaultPlan(rate=rate, seed=seed, kinds=FAULTS), **kw)


def _hung(judge_server):
    return judge_server(SCRIPT, faults=FaultPlan(rate=1.0, kinds=(Fault(hang_s=30),)))


def _config(tmp_path, server, **fields) -> Path:
    (tmp_path / "rubrics").mkdir(exist_ok=True)
    (tmp_path / "rubrics" / "capital.yaml").write_text(yaml.safe_dump(RUBRIC))
    cfg = {"judge": {"model": "judge", "base_url": server.base_url, "timeout_s": 0.3, "max_retries": 3,
                     "backoff_base_s": 0.01, "backoff_max_s": 0.02, "max_concurrency": 64},
           "rubric": RUBRIC, "rubric_dir": "rubrics", "deadline_s": 8, "unscored_reward": FALLBACK, **fields}
    path = tmp_path / "reward.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _chat(question: str) -> str:
    return (f"<|im_start|>system\nYou answer geography questions.<|im_end|>\n<|im_start|>user\n{question}"
            "<|im_end|>\n<|im_start|>assistant\n")


def _words(text: str) -> list[str]:  # a stand-in tokenizer: cutting tokens cuts at word boundaries
    return re.findall(r"\S+\s*|\s+", text)


def _left_cut(prompt: str, keep: int) -> str:
    return "".join(_words(prompt)[-keep:])


def _check(responses, rewards, unscored, bad=()):
    """Every sample correct, or flagged unscored with the fallback; the samples in ``bad`` flagged."""
    for i, (resp, reward, flag) in enumerate(zip(responses, rewards, unscored, strict=True)):
        if i in bad or flag:
            assert flag == 1.0 and reward == FALLBACK, (i, resp, reward, flag)
        else:
            assert reward == pytest.approx(expected(resp)), (i, resp, reward)


# ---------------------------------------------------------------------------- the query split
def test_split_query_finds_the_response_after_a_cut_prompt():
    prompt = _chat("Long context. " * 40 + "What is the capital of France?")
    assert split_query(prompt + "Paris.<|im_end|>", prompt) == "Paris."
    assert split_query(_left_cut(prompt, 12) + "Paris.<|im_end|>", prompt) == "Paris."  # v0.11: cut from the left
    assert split_query("\ufffd" + _left_cut(prompt, 12)[1:] + "Paris.", prompt) == "Paris."  # a split character
    assert split_query(prompt[:120] + " and so on", prompt) == "and so on"  # v0.9: cut from the right
    # the prompt string differs from what was decoded: after the template's assistant marker
    assert split_query(prompt.replace("Long", "long") + "Paris.", prompt) == "Paris."
    # a query that only echoes the prompt's last words in its response is not a cut prompt
    assert split_query("unrelated text <|im_start|>assistant\nParis", "no marker here" * 3) is None


# ---------------------------------------------------------------------------- OpenRLHF
def _openrlhf_rows():
    """(query, prompt, label, responses index) with cut prompts, a bad id, a bad rubric, an unrelated query."""
    rows, bad = [], set()
    for i in range(12):
        prompt = _chat("Background. " * (5 + i) + "What is the capital of France?")
        response = RESPONSES[i % 4]
        query = (_left_cut(prompt, 8 + i) if i % 2 else prompt) + response + "<|im_end|>"
        label = "capital" if i % 3 else json.dumps(RUBRIC)
        rows.append([query, prompt, label, response])
    rows[4][2], rows[7][2] = "no_such_rubric", {"criteria": []}
    rows[9][0] = "a query that holds none of its prompt"
    bad.update({4, 7, 9})
    return rows, bad


@pytest.mark.timeout(90)
def test_openrlhf_v011_per_sample_requests_with_cut_prompts_and_faults(judge_server, tmp_path):
    server = _faulty(judge_server)
    rows, bad = _openrlhf_rows()
    statuses: list[int] = []
    with ServiceThread(ServeConfig.from_yaml(_config(tmp_path, server))) as svc:
        async def step():
            return await asyncio.gather(*(tc.openrlhf_v011_http(svc.url + "/openrlhf", q, p, lab, statuses=statuses)
                                          for q, p, lab, _ in rows))

        infos = asyncio.run(step())
    assert statuses == [200] * len(rows)  # never a retry, never a non-2xx
    batch = tc.openrlhf_v011_batch([tc.openrlhf_v011_experience(i) for i in infos])
    _check([r[3] for r in rows], batch["reward"], batch["rubric_unscored"], bad)
    assert set(np.flatnonzero(batch["rubric_unscored_input"])) == bad
    assert "no rubric" in infos[4]["errors"][0] and "query[0]" in infos[9]["errors"][0]
    assert server.requests > 0


@pytest.mark.timeout(90)
def test_openrlhf_v011_reward_func_agrees_with_the_service(judge_server, tmp_path, monkeypatch):
    from rubric_reward.integrations.openrlhf import reward_func

    server = _faulty(judge_server, seed=5)
    monkeypatch.delenv("RUBRIC_REWARD_URL", raising=False)
    monkeypatch.setenv("RUBRIC_REWARD_CONFIG", str(_config(tmp_path, server)))
    rows, bad = _openrlhf_rows()

    async def step():
        return await asyncio.gather(*(tc.openrlhf_v011_func(reward_func, q, p, lab) for q, p, lab, _ in rows))

    batch = tc.openrlhf_v011_batch([tc.openrlhf_v011_experience(i) for i in asyncio.run(step())])
    _check([r[3] for r in rows], batch["reward"], batch["rubric_unscored"], bad)
    assert set(np.flatnonzero(batch["rubric_unscored_input"])) == bad  # the same samples as over HTTP


@pytest.mark.timeout(90)
def test_openrlhf_v09_batch_requests_too_many_and_draining(judge_server, tmp_path):
    from rubric_reward.serve.app import STATE

    server = _faulty(judge_server, seed=11)
    rows, bad = _openrlhf_rows()
    rows = rows[:8]
    rows[1][0] = rows[1][1][:150] + rows[1][3]  # v0.9's tokenizer cuts from the right
    cfg = ServeConfig.from_yaml(_config(tmp_path, server, serve={"max_batch_items": 8}))
    statuses: list[int] = []
    with ServiceThread(cfg) as svc:
        url = svc.url + "/openrlhf"
        cols = [list(c) for c in zip(*rows, strict=True)]
        first = tc.openrlhf_v09_http(url, cols[0], cols[1], cols[2], statuses=statuses)
        over = tc.openrlhf_v09_http(url, cols[0] + cols[0][:1], cols[1] + cols[1][:1], cols[2] + cols[2][:1],
                                    statuses=statuses)
        svc.app[STATE]["draining"] = True
        draining = tc.openrlhf_v09_http(url, cols[0][:2], cols[1][:2], cols[2][:2], statuses=statuses)
        svc.app[STATE]["draining"] = False
    assert statuses == [200, 200, 200]
    merged = tc.openrlhf_v09_update([first, over, draining], [8, 9, 2])
    _check(cols[3], merged["rewards"][0], merged["rubric_unscored"][0], {b for b in bad if b < 8})
    for part in merged["rubric_unscored_service"][1:]:  # over the batch limit, and while shutting down
        assert list(part) == [1.0] * len(part)
    assert "max_batch_items" in over["errors"][0] and "shutting down" in draining["errors"][0]


@pytest.mark.timeout(60)
def test_openrlhf_hung_judge_gives_unscored_samples_before_the_client_gives_up(judge_server, tmp_path):
    server = _hung(judge_server)
    rows, _ = _openrlhf_rows()
    cfg = ServeConfig.from_yaml(_config(tmp_path, server, deadline_s=1.0, judge={
        "model": "judge", "base_url": server.base_url, "timeout_s": 30}))
    with ServiceThread(cfg) as svc:
        start = time.monotonic()
        info = asyncio.run(tc.openrlhf_v011_http(svc.url + "/openrlhf", rows[0][0], rows[0][1], rows[0][2]))
        took = time.monotonic() - start
    exp = tc.openrlhf_v011_experience(info)
    assert exp["rubric_unscored_judge"][0] == 1.0 and exp["reward"][0] == FALLBACK and took < 5


# ---------------------------------------------------------------------------- verl
def _verl_config(tmp_path, server, name, *, manager="naive", loop=True, **fields):
    return {"custom_reward_function": {"path": str(ROOT / "examples/serve/verl_reward.py"), "name": name,
                                       "reward_kwargs": {"config": str(_config(tmp_path, server, **fields))}},
            "reward_model": {"reward_manager": manager, "use_reward_loop": loop}}


def _verl_batch(n=16, step=None):
    rows = []
    for i in range(n):
        info = {"prompt": [{"role": "user", "content": "What is the capital of France?"}], "index": i}
        if step is not None:
            info["global_step"] = np.int64(step)
        response = f"{RESPONSES[i % 4]} (answer {i})"  # distinct: identical samples are judged once
        rows.append((response, np.array(["capital"], dtype=object)[0] if i % 2 else json.dumps(RUBRIC), info))
    rows[5] = (rows[5][0], "no_such_rubric", rows[5][2])
    return tc.verl_rows(rows), {5}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name,manager,loop", [("compute_score", "naive", False), ("compute_score_batch", "batch", False),
                                               ("compute_score_async", "naive", True), ("compute_score", "naive", True)])
def test_verl_managers_with_judge_faults(name, manager, loop, judge_server, tmp_path):
    server = _faulty(judge_server, seed=17)
    fn, found, reward_loop = tc.verl_lookup(_verl_config(tmp_path, server, name, manager=manager, loop=loop), "0.7")
    assert (found, reward_loop) == (manager, loop)
    batch, bad = _verl_batch()
    if loop:
        scores, extra = asyncio.run(tc.verl_reward_loop(fn, batch))
    else:
        scores, extra = (tc.verl_batch if manager == "batch" else tc.verl_naive)(fn, batch)
    _check(list(batch["responses"]), scores, extra["rubric_unscored"], bad)
    assert extra["rubric_unscored_input"][5] == 1.0


@pytest.mark.timeout(120)
def test_verl_prime_manager(judge_server, tmp_path):
    server = _faulty(judge_server, rate=0.0)
    fn, _, _ = tc.verl_lookup(_verl_config(tmp_path, server, "compute_score_prime", manager="prime", loop=False), "0.7")
    batch, bad = _verl_batch(8)
    scores = tc.verl_prime(fn, batch, workers=2)  # positional, in fresh worker processes
    _check(list(batch["responses"]), scores, [1.0 if i in bad else 0.0 for i in range(8)], bad)
    # the dict-returning function under prime fails loudly, naming the one to use (verl prints it)
    plain, _, _ = tc.verl_lookup(_verl_config(tmp_path, server, "compute_score", manager="prime", loop=False), "0.7")
    with pytest.raises(TypeError, match="compute_score_prime"):
        tc.verl_prime(plain, tc.verl_rows([(RESPONSES[0], "capital", {})]), workers=1)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name,loop", [("compute_score", False), ("compute_score_async", True), ("compute_score", True)])
def test_verl_hung_judge_costs_one_budget_per_step(name, loop, judge_server, tmp_path):
    """Sequential (legacy naive), async and thread-pool calls: 16 samples of a hung judge take about one
    step budget, not 16 deadlines; the next step (its global_step) gets a fresh budget."""
    server = _hung(judge_server)
    fn, _, _ = tc.verl_lookup(_verl_config(tmp_path, server, name, loop=loop, deadline_s=1.0, judge={
        "model": "judge", "base_url": server.base_url, "timeout_s": 30}), "0.7")
    for step in (1, 2):
        batch, bad = _verl_batch(16, step=step)
        start = time.monotonic()
        scores, extra = asyncio.run(tc.verl_reward_loop(fn, batch)) if loop else tc.verl_naive(fn, batch)
        took = time.monotonic() - start
        assert took < 4.0, took  # budget 1 s (deadline_s); was 16 x 1 s sequentially
        assert scores == [FALLBACK] * 16 and list(extra["rubric_unscored"]) == [1.0] * 16
        judge, service = extra["rubric_unscored_judge"].sum(), extra["rubric_unscored_service"].sum()
        # judged and failed, or refused unread once the budget was spent (sample 5 names no rubric)
        assert judge >= 1 and judge + service + extra["rubric_unscored_input"].sum() == 16


@pytest.mark.timeout(60)
def test_compute_score_async_overlaps_samples_up_to_the_judge_limit(judge_server, tmp_path):
    server = judge_server(SCRIPT, latency_s=0.3)
    fn, _, _ = tc.verl_lookup(_verl_config(tmp_path, server, "compute_score_async"), "0.7")
    batch, _ = _verl_batch(48)
    asyncio.run(tc.verl_reward_loop(fn, batch))
    # 48 samples x 2 criteria under a limit of 64: far beyond what verl's default thread pool
    # (min(32, cpus + 4) threads, one sample each) would keep in flight
    assert server.max_in_flight >= 48, server.max_in_flight


def test_step_budget_counts_failed_call_time_once_and_resets_per_step():
    now = [0.0]
    budget = StepBudget(10.0, gap_s=5.0, clock=lambda: now[0])
    a, b = budget.begin(), budget.begin()  # two calls overlap for 6 s and fail: 6 s lost, not 12
    now[0] = 6.0
    budget.end(a, failed=True)
    budget.end(b, failed=True)
    c = budget.begin()
    assert a.remaining_s == 10.0 and c.remaining_s == pytest.approx(4.0)
    now[0] = 7.0
    budget.end(c, failed=False)  # a healthy call costs nothing
    d = budget.begin()
    assert d.remaining_s == pytest.approx(4.0) and d.step == c.step
    budget.end(d, failed=False)
    now[0] = 20.0  # idle for longer than the gap: a new step
    e = budget.begin()
    assert e.remaining_s == 10.0 and e.step == d.step + 1
    budget.end(e, failed=False)
    k = budget.begin(key=7)  # a step the trainer names
    now[0] = 25.0
    budget.end(k, failed=True)
    assert budget.begin(key=7).remaining_s == pytest.approx(5.0) and budget.begin(key=8).remaining_s == 10.0
    assert StepBudget(None).begin().remaining_s is None


# ---------------------------------------------------------------------------- TRL with several rewards
@pytest.mark.timeout(60)
def test_combined_reward_is_none_for_the_row_when_the_rubric_is_unscored(judge_server):
    from rubric_reward.rl import RubricReward, combine_rewards

    server = judge_server(SCRIPT, faults=FaultPlan(fixed={1: Fault(status=400)}))  # one call fails, not retried
    rubric = RubricReward(judge={"model": "judge", "base_url": server.base_url, "max_concurrency": 1},
                          rubric=RUBRIC, rubric_column=None)

    def length_reward(completions, **kwargs):
        return [len(c) / 100 for c in completions]

    logged = {}
    reward = combine_rewards(rubric, [length_reward], weights=[1.0, 0.5])
    try:
        out = reward(prompts=["What is the capital of France?"] * 3, completions=RESPONSES[:3],
                     log_metric=lambda k, v: logged.__setitem__(k, v))
    finally:
        reward.close()
    assert out.count(None) == 1 and reward.__name__ == "rubric+length_reward"
    for resp, value in zip(RESPONSES[:3], out, strict=True):
        assert value is None or value == pytest.approx(expected(resp) + 0.5 * len(resp) / 100)
    assert "rewards/length_reward/mean" in logged
    with pytest.raises(ValueError, match="weights"):
        combine_rewards(rubric, [length_reward], weights=[1.0])
    with pytest.raises(ValueError, match="async"):
        combine_rewards(rubric.as_async(), [length_reward])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_split_query_on_a_real_byte_level_tokenizer_cut_as_openrlhf_cuts(tmp_path):
    """OpenRLHF v0.11 keeps the last tokens of a long prompt (``prompt_token_ids[-max_prompt_length:]``)
    and decodes prompt + response with special tokens; v0.9's tokenizer keeps the first ones. A cut may
    fall inside a multi-byte character."""
    from transformers import AutoTokenizer

    from rubric_reward.testing.tiny_model import build_tiny_qwen3

    tok = AutoTokenizer.from_pretrained(str(build_tiny_qwen3(tmp_path / "tiny")))
    prompt = _chat("Contexte très long, 中文 ünïcödé. " * 30 + "Quelle est la capitale de la France ?")
    response = "Paris, s'il vous plaît."
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    reply = tok(response + "<|im_end|>", add_special_tokens=False)["input_ids"]
    for keep in (len(ids) // 3, len(ids) // 3 + 1, len(ids) // 2 + 3, 40, 41):
        query = tok.decode(ids[-keep:] + reply, skip_special_tokens=False)  # v0.11: from the left
        assert split_query(query, prompt) == response, keep
    for keep in (60, 61, 150):
        query = tok.decode(ids[:keep] + reply, skip_special_tokens=False)  # v0.9: from the right
        assert split_query(query, prompt) == response, keep


@pytest.mark.timeout(60)
def test_hung_judge_in_process_openrlhf_and_prime(judge_server, tmp_path, monkeypatch):
    from rubric_reward.integrations.openrlhf import reward_func

    server = _hung(judge_server)
    hung = {"deadline_s": 1.0, "judge": {"model": "judge", "base_url": server.base_url, "timeout_s": 30}}
    monkeypatch.delenv("RUBRIC_REWARD_URL", raising=False)
    monkeypatch.setenv("RUBRIC_REWARD_CONFIG", str(_config(tmp_path, server, **hung)))
    rows, _ = _openrlhf_rows()
    start = time.monotonic()
    info = asyncio.run(tc.openrlhf_v011_func(reward_func, *rows[0][:3]))
    exp = tc.openrlhf_v011_experience(info)
    assert exp["rubric_unscored_judge"][0] == 1.0 and exp["reward"][0] == FALLBACK
    fn, _, _ = tc.verl_lookup(_verl_config(tmp_path, server, "compute_score_prime", manager="prime", loop=False,
                                           **hung), "0.7")
    scores = tc.verl_prime(fn, _verl_batch(8)[0], workers=2)
    assert scores == [FALLBACK] * 8 and time.monotonic() - start < 12  # each worker: about one budget
