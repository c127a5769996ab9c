"""RubricReward called exactly as TRL 1.16's GRPOTrainer calls it, against the loopback judge server.

TRL passes ``prompts``, ``completions`` and ``completion_ids`` as keywords, plus ``trainer_state``,
``log_extra``, ``log_metric`` and every other dataset column as a list aligned with the completions
(each prompt's value repeated ``num_generations`` times, consecutively).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import pickle
from types import SimpleNamespace

import pytest

from rubric_reward import Scorer
from rubric_reward.rl import RewardConfig, RubricReward, UnscorableBatchesError, rubric_rewards
from rubric_reward.testing.judge_server import Fault, FaultPlan

RUBRIC = {
    "name": "support",
    "criteria": [
        {"name": "apology", "requirement": "The reply apologises."},
        {"name": "refund", "requirement": "The reply offers a refund.", "weight": 2},
        {"name": "rude", "requirement": "The reply is rude.", "weight": -1},
    ],
}
G = 4  # num_generations


def _script():
    return {
        "apology": lambda r, b: "MET" if "sorry" in r.lower() else "UNMET",
        "refund": lambda r, b: "MET" if "refund" in r.lower() else ("CANNOT_ASSESS" if "maybe" in r else "UNMET"),
        "rude": lambda r, b: "MET" if "idiot" in r.lower() else "UNMET",
    }


PROMPTS = ["My order is late.", "The item broke."]
COMPLETIONS = [
    "Sorry! Here is a refund.", "Sorry for the delay.", "A refund is on its way.", "You idiot, sorry, refund.",
    "Sorry, maybe later.", "We will send a refund, sorry.", "No.", "Sorry for the delay.",
]


class Hooks:
    """Stands in for the trainer's log_metric / log_extra."""

    def __init__(self):
        self.metrics: dict[str, list[float]] = {}
        self.extra: dict[str, list] = {}

    def log_metric(self, name, value):
        self.metrics.setdefault(name, []).append(value)

    def log_extra(self, column, values):
        self.extra.setdefault(column, []).extend(values)


def trl_call(fn, prompts, completions, *, hooks=None, completion_ids=None, **columns):
    """Call ``fn`` the way GRPOTrainer._calculate_rewards does (a coroutine for async functions)."""
    n = len(prompts) * G
    hooks = hooks or Hooks()
    kw = {k: [v for v in vals for _ in range(G)] if len(vals) == len(prompts) else vals for k, vals in columns.items()}
    return fn(
        prompts=[p for p in prompts for _ in range(G)], completions=completions,
        completion_ids=completion_ids or [[1] * (3 + i) for i in range(n)],
        trainer_state=SimpleNamespace(global_step=1, epoch=0.0), log_extra=hooks.log_extra,
        log_metric=hooks.log_metric, **kw,
    )


@pytest.fixture
def reward_for(judge_server):
    made = []

    def make(server=None, **overrides):
        server = server or judge_server(_script())
        r = RubricReward(**{"judge": "judge", "base_url": server.base_url, "rubric": RUBRIC, **overrides})
        made.append(r)
        return r, server

    yield make
    for r in made:
        r.close()


@pytest.mark.timeout(60)
def test_trl_call_equals_scorer_and_logs(reward_for):
    reward, server = reward_for()
    hooks = Hooks()
    out = trl_call(reward, PROMPTS, COMPLETIONS, hooks=hooks, task_id=["a", "b"])
    assert len(out) == len(COMPLETIONS) and all(isinstance(x, float) for x in out)
    with Scorer(RUBRIC, "judge", base_url=server.base_url, scoring={"abstention": "zero"}) as scorer:
        expected = [r.score for r in scorer.score_batch(
            [(p, c) for p, c in zip([p for p in PROMPTS for _ in range(G)], COMPLETIONS, strict=True)])]
    assert out == expected
    assert out[0] == 1.0 and out[1] == pytest.approx(1 / 3) and out[3] == pytest.approx(2 / 3)
    assert out[4] == pytest.approx(1 / 3)  # refund abstained: zero, not skipped (1.0 under skip)
    names = set(hooks.metrics)
    for name in ("reward_mean", "unscored_frac", "abstention_rate", "failure_rate", "pass_rate", "judge_calls",
                 "cache_hits", "tokens", "cost", "cost_total", "latency_p50_s", "latency_p95_s",
                 "reward_length_spearman", "guarded_frac", "pass/apology", "pass/refund", "pass/rude",
                 "zero_spread_groups"):
        assert f"rubric/{name}" in names, name
    assert all(math.isfinite(v[0]) for v in hooks.metrics.values())
    assert hooks.metrics["rubric/unscored_frac"] == [0.0]
    assert hooks.metrics["rubric/abstention_rate"][0] == pytest.approx(1 / 24)  # one abstention in 8 completions x 3 criteria
    assert hooks.extra["rubric_score"] == out
    assert hooks.extra["rubric_failed"][0] == "" and hooks.extra["rubric_failed"][1] == "refund"
    assert hooks.extra["rubric_failed"][3] == "rude"
    assert reward.__name__ == "rubric"


@pytest.mark.timeout(60)
def test_duplicates_are_judged_once(reward_for):
    reward, server = reward_for()
    completions = ["Sorry, a refund."] * 3 + ["No refund."] + ["Sorry."] * 4
    hooks = Hooks()
    out = trl_call(reward, PROMPTS, completions, hooks=hooks)
    assert server.requests == 3 * 3  # three unique (prompt, completion) pairs x three criteria
    assert out[:3] == [1.0] * 3 and out[4:] == [out[4]] * 4
    assert hooks.metrics["rubric/judge_calls"] == [9.0]
    # the same completion under another prompt is a different item
    server.reset_stats()
    trl_call(reward, ["P1", "P2"], ["Same text."] * 8)
    assert server.requests == 2 * 3


@pytest.mark.timeout(60)
def test_conversational_prompts_and_think_blocks(reward_for):
    reward, server = reward_for()
    convo = [[{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Late order!"},
              {"role": "assistant", "content": "Checking."}, {"role": "user", "content": "Well?"}]]
    completions = [[{"role": "assistant", "content": "<think>they want money</think>Sorry, a refund."}],
                   [{"role": "assistant", "content": "<think>unfinished"}],
                   [{"role": "assistant", "content": "No."}],
                   [{"role": "assistant", "content": "<think>x</think>\n\nSorry."}]]
    out = trl_call(reward, convo, completions)
    assert out[0] == 1.0 and out[1] == 0.0  # unclosed think: nothing left, a degenerate (empty) answer
    body = server.bodies[0]["messages"][-1]["content"]
    assert "Checking." in body and "Well?" in body and "Be kind." in body  # the judge sees the conversation
    assert all("<think>" not in b["messages"][-1]["content"] for b in server.bodies)
    assert server.requests == 3 * 3


@pytest.mark.timeout(60)
def test_rubric_from_column_in_every_form(judge_server, tmp_path):
    server = judge_server(_script())
    (tmp_path / "refund_only.yaml").write_text("criteria:\n  - name: refund\n    requirement: Offers a refund.\n")
    import json

    forms = [
        {"criteria": [{"name": "apology", "requirement": "Apologises."}]},  # inline mapping
        "criteria:\n  - name: apology\n    requirement: Apologises.\n",  # YAML string
        json.dumps({"criteria": [{"name": "apology", "requirement": "Apologises."}]}),  # JSON string
        ["Does the reply apologise?"],  # AdvancedIF questions
        json.dumps(json.dumps(["Does the reply apologise?", "Is it polite?"])),  # AdvancedIF, encoded twice
        "refund_only",  # an id in rubric_dir
        "named",  # an id in the mapping
        "no_such_rubric",  # a bad row: unscored, named
    ]
    reward = RubricReward(judge="judge", base_url=server.base_url, rubric_dir=str(tmp_path),
                          rubrics={"named": {"criteria": [{"name": "refund", "requirement": "Refund."}]}})
    try:
        records = reward.score_batch(["p"] * len(forms), ["Sorry, a refund."] * len(forms), rubric=forms)
    finally:
        reward.close()
    assert [r.reward for r in records[:-1]] == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert records[3].rubric.criteria[0].requirement == "Does the reply apologise?"
    assert len(records[4].rubric) == 2
    assert records[-1].reward is None and "row 7" in records[-1].error and "no_such_rubric" in records[-1].error


@pytest.mark.timeout(60)
def test_hung_judge_ends_at_the_deadline(reward_for, judge_server):
    import time

    server = judge_server(_script(), faults=FaultPlan(fixed={1: Fault(hang_s=30), 2: Fault(hang_s=30)}))
    reward, _ = reward_for(server, deadline_s=1.0)
    start = time.monotonic()
    out = trl_call(reward, PROMPTS, COMPLETIONS)
    assert time.monotonic() - start < 5
    nones = [x for x in out if x is None]
    assert 1 <= len(nones) <= 2  # the completions whose calls hung, and only those
    assert all(x is not None for x in out if x is not None)


@pytest.mark.timeout(90)
def test_injected_faults_give_correct_or_none(reward_for, judge_server):
    clean, _ = reward_for()
    expected = trl_call(clean, PROMPTS * 4, COMPLETIONS * 4)
    faults = FaultPlan(rate=0.3, seed=3, kinds=(Fault(status=500), Fault(status=429, retry_after=0),
                                                Fault(content="not json"), Fault(body="{oops")))
    server = judge_server(_script(), faults=faults)
    reward, _ = reward_for(server, judge={"model": "judge", "max_retries": 0, "timeout_s": 5})
    out = trl_call(reward, PROMPTS * 4, COMPLETIONS * 4)
    assert any(x is None for x in out) and any(x is not None for x in out)
    for got, want in zip(out, expected, strict=True):
        assert got is None or got == want


@pytest.mark.timeout(60)
def test_an_exception_gives_nones_and_one_log_line(reward_for, caplog, monkeypatch):
    reward, server = reward_for()

    async def boom(*a, **k):
        raise RuntimeError("the grader broke")

    monkeypatch.setattr(reward.scorer.grader, "grade_many", boom)
    with caplog.at_level(logging.WARNING, logger="rubric_reward.rl"):
        hooks = Hooks()
        out = trl_call(reward, PROMPTS, COMPLETIONS, hooks=hooks)
    assert out == [None] * len(COMPLETIONS)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "RuntimeError: the grader broke" in errors[0].getMessage()
    assert hooks.metrics["rubric/unscored_frac"] == [1.0]
    assert hooks.extra["rubric_failed"] == ["unscored: internal"] * len(COMPLETIONS)


@pytest.mark.timeout(60)
def test_consecutive_unscorable_batches_raise_a_clear_error(judge_server):
    server = judge_server(_script(), faults=FaultPlan(rate=1.0, kinds=(Fault(status=503),)))
    reward = RubricReward(judge={"model": "judge-x", "max_retries": 0}, base_url=server.base_url, rubric=RUBRIC,
                          max_unscorable_steps=2)
    try:
        assert trl_call(reward, PROMPTS, COMPLETIONS) == [None] * 8  # step 1 completes
        with pytest.raises(UnscorableBatchesError) as info:
            trl_call(reward, PROMPTS, COMPLETIONS)
    finally:
        reward.close()
    msg = str(info.value)
    assert "2 consecutive batches" in msg and "judge-x" in msg and "16 completions unscored" in msg and "server x48" in msg


@pytest.mark.timeout(60)
def test_guards_make_no_judge_call(reward_for):
    reward, server = reward_for(guards={"truncated": True, "max_completion_length": 5, "min_reward": -1.0})
    completions = ["", "   ", "...", ":", "Thought process:", "**Solution**", "My order is late.", "Sorry, refund."]
    ids = [[1, 2]] * 7 + [[1] * 5]  # the last hit the length limit
    hooks = Hooks()
    out = trl_call(reward, PROMPTS[:1] * 2, completions, hooks=hooks, completion_ids=ids)
    assert out == [-1.0] * 8
    assert server.requests == 0
    assert hooks.metrics["rubric/guarded_frac"] == [1.0]
    assert hooks.metrics["rubric/guard/truncated_frac"] == [1 / 8]
    assert hooks.extra["rubric_failed"][-1] == "guard: truncated"


@pytest.mark.timeout(60)
def test_truncation_guard_needs_a_length_and_takes_it_from_the_trainer(reward_for):
    reward, server = reward_for(guards={"truncated": True})
    with pytest.raises(ValueError, match="max_completion_length"):
        trl_call(reward, PROMPTS, COMPLETIONS)
    reward.bind(SimpleNamespace(args=SimpleNamespace(max_completion_length=4), eos_token_ids=[9]))
    out = trl_call(reward, PROMPTS, COMPLETIONS, completion_ids=[[1, 1, 1, 9]] + [[1, 2]] * 6 + [[1] * 4])
    assert out[-1] == 0.0  # "Sorry for the delay." would score 1/3, but it ran into the limit
    assert out[0] == 1.0  # ended on its end-of-sequence token right at the limit: finished, judged


@pytest.mark.timeout(60)
def test_length_penalty_is_recorded_apart_from_the_score(reward_for):
    reward, _ = reward_for(length_penalty={"enabled": True, "free": 2, "cap": 6, "penalty": 0.4})
    records = reward.score_batch(["p"] * 3, ["Sorry refund.", "Sorry, a refund now.", "Sorry a refund " + "x " * 20])
    assert [r.score for r in records] == [1.0, 1.0, 1.0]
    assert [r.penalty for r in records] == pytest.approx([0.0, 0.2, 0.4])
    assert [r.reward for r in records] == pytest.approx([1.0, 0.8, 0.6])
    import json

    d = json.loads(json.dumps(records[1].to_dict()))
    assert d["score"] == 1.0 and d["penalty"] == pytest.approx(0.2) and d["failed"] == []
    assert d["result"]["verdicts"][0]["criterion"] == "apology"


@pytest.mark.timeout(60)
def test_reward_field_and_all_or_nothing(reward_for):
    aon, _ = reward_for(scoring={"all_or_nothing": True})  # laid over the RL defaults: abstention stays zero
    assert aon.scorer.grader.scoring.abstention == "zero"
    out = aon.score_batch(["p"] * 3, ["Sorry, refund.", "Sorry.", "Sorry you idiot, refund."])
    assert [r.reward for r in out] == [1.0, 0.0, 0.0]
    raw, _ = reward_for(reward="raw_score")
    assert raw.score_batch(["p"], ["You idiot."])[0].reward == pytest.approx(-1 / 3)  # unclipped


@pytest.mark.timeout(60)
def test_async_form_under_trl_style_gather(reward_for):
    reward, server = reward_for()
    areward = reward.as_async()
    hooks = Hooks()

    async def trainer_loop():  # TRL gathers async reward functions on one persistent loop thread
        return await asyncio.gather(trl_call(areward, PROMPTS, COMPLETIONS, hooks=hooks),
                                    trl_call(areward, PROMPTS, COMPLETIONS[::-1]))

    first, second = asyncio.run(trainer_loop())
    assert first == reward(prompts=[p for p in PROMPTS for _ in range(G)], completions=COMPLETIONS)
    assert second[::-1][0] == first[0] or second[-1] == first[0]
    assert areward.__name__ == "rubric" and "rubric/reward_mean" in hooks.metrics
    # TRL's is_async_callable looks at the object and its __call__
    assert inspect.iscoroutinefunction(areward.__call__) and not inspect.iscoroutinefunction(reward.__call__)


@pytest.mark.timeout(60)
def test_pickle_round_trip_scores_identically(reward_for):
    reward, _ = reward_for()
    before = trl_call(reward, PROMPTS, COMPLETIONS)
    clone = pickle.loads(pickle.dumps(reward))
    aclone = pickle.loads(pickle.dumps(reward.as_async()))
    try:
        assert clone._engine is None  # judges are rebuilt lazily, in the new process
        assert trl_call(clone, PROMPTS, COMPLETIONS) == before
        assert asyncio.run(trl_call(aclone, PROMPTS, COMPLETIONS)) == before
    finally:
        clone.close()
        aclone.close()


@pytest.mark.timeout(60)
def test_from_config_yaml_and_plain_function(judge_server, tmp_path):
    server = judge_server(_script())
    path = tmp_path / "reward.yaml"
    path.write_text(f"judge: judge\nbase_url: {server.base_url}\nrubric_column: rubric\ndeadline_s: 30\n"
                    "guards:\n  min_reward: 0.0\n")
    cfg = RewardConfig.from_yaml(path)
    assert cfg.scoring == {"abstention": "zero", "on_failure": "unscored"} and cfg.deadline_s == 30
    rubrics = [RUBRIC] * 3
    out = rubric_rewards(PROMPTS[:1] * 3, ["Sorry, a refund.", "Sorry.", ""], rubrics, config=path)
    assert out == [1.0, pytest.approx(1 / 3), 0.0]
    assert rubric_rewards(["q"], ["Sorry."], config=str(path), rubric=RUBRIC) == [pytest.approx(1 / 3)]
    with pytest.raises(ValueError, match="unknown field"):
        RewardConfig.from_dict({"judge": "x", "rubrik": "y"})
    with pytest.raises(ValueError, match="field 'reward' must be one of"):
        RewardConfig(reward="best")
    with pytest.raises(ValueError, match="abstention"):
        RewardConfig(scoring={"abstention": "sometimes"})


@pytest.mark.timeout(60)
def test_reply_cache_makes_repeated_batches_free(reward_for, tmp_path):
    reward, server = reward_for(cache=str(tmp_path / "judge-cache.sqlite"))
    first = trl_call(reward, PROMPTS, COMPLETIONS)
    calls = server.requests
    hooks = Hooks()
    assert trl_call(reward, PROMPTS, COMPLETIONS, hooks=hooks) == first
    assert server.requests == calls  # every verdict came from the cache
    assert hooks.metrics["rubric/judge_calls"] == [0.0] and hooks.metrics["rubric/cache_hits"] == [calls]
    assert hooks.metrics["rubric/cost"] == [0.0]


@pytest.mark.timeout(60)
def test_expected_score_reward_from_logprob_verdicts(judge_server):
    server = judge_server({"apology": {"MET": 0.7, "UNMET": 0.3}})
    reward = RubricReward(judge={"model": "judge", "logprobs": True}, base_url=server.base_url,
                          rubric={"criteria": [{"name": "apology", "requirement": "Apologises."}]},
                          reward="expected_score")
    try:
        (record,) = reward.score_batch(["p"], ["Sorry."])
    finally:
        reward.close()
    assert record.reward == pytest.approx(0.7, abs=1e-6) and record.result.score == 1.0


@pytest.mark.timeout(60)
def test_ensemble_of_judges(reward_for):
    reward, server = reward_for(judge=[{"model": "judge-a"}, {"model": "judge-b", "samples": 2}])
    out = trl_call(reward, PROMPTS[:1] * 2, COMPLETIONS[:8])
    assert out[:4] == [1.0, pytest.approx(1 / 3), pytest.approx(2 / 3), pytest.approx(2 / 3)]
    assert {b["model"] for b in server.bodies} == {"judge-a", "judge-b"}
    assert server.requests == 7 * 3 * 3  # 7 unique completions x 3 criteria x (1 + 2 samples)
