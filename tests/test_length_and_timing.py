"""Length per sample: the fixed and the group-relative length penalty; deadline lengths and slow calls per step."""

from __future__ import annotations

import pytest

from rubric_reward.rewards.config import LengthPenalty, RewardConfig
from rubric_reward.rewards.length import length_penalties, quantile
from rubric_reward.rl import RubricReward
from rubric_reward.testing.judge_server import response_in_request

GROUP = {"enabled": True, "reference": "group", "quantile": 0.5, "penalty": 0.4, "cap_ratio": 2.0}


def test_quantile():
    assert quantile([4, 1, 3, 2], 0.5) == 2.5 and quantile([7], 0.9) == 7 and quantile([0, 10], 0.25) == 2.5


def test_fixed_penalty_arithmetic():
    cfg = LengthPenalty(enabled=True, free=10, cap=20, penalty=0.5, exponent=2.0)
    assert length_penalties(cfg, [5, 10, 15, 20, 40], [1, 1, 1, 1, None], ["p"] * 5) == [0.0, 0.0, 0.125, 0.5, 0.0]
    assert length_penalties(LengthPenalty(), [999], [1.0], ["p"]) == [0.0]  # off


def test_group_penalty_arithmetic():
    cfg = LengthPenalty(**GROUP)
    lengths = [10, 20, 30, 40, 60, 5, 50]
    scores = [1.0, 1.0, 0.5, 1.0, 1.0, 0.0, None]
    groups = ["a"] * 5 + ["b", "b"]
    # group a: passing lengths 10, 20, 40, 60 -> median 30, cap 60; group b: nothing passes
    got = length_penalties(cfg, lengths, scores, groups)
    assert got == pytest.approx([0.0, 0.0, 0.0, 0.4 * 10 / 30, 0.4, 0.0, 0.0])
    low = length_penalties(LengthPenalty(**{**GROUP, "quantile": 0.0}), lengths, scores, groups)
    assert low[:5] == pytest.approx([0.0, 0.4 * 10 / 10, 0.4, 0.4, 0.4])  # reference 10, cap 20
    loose = length_penalties(LengthPenalty(**{**GROUP, "pass_score": 0.5}), lengths, scores, groups)
    assert loose[:5] == pytest.approx([0.0, 0.0, 0.0, 0.4 * 10 / 30, 0.4])  # passing 10..60: median 30 again
    assert loose[2] == 0.0  # the 0.5 scorer now passes and sits at the reference


@pytest.mark.parametrize("bad", [{"reference": "median"}, {"quantile": 1.5}, {"cap_ratio": 1.0}])
def test_group_penalty_config_is_checked(bad):
    with pytest.raises(ValueError, match="length_penalty"):
        RewardConfig(length_penalty={**GROUP, **bad})


def test_group_penalty_through_the_reward(judge_server):
    server = judge_server({"ok": lambda r, b: "MET" if "good" in r else "UNMET"})
    rubric = {"criteria": [{"name": "ok", "requirement": "Says good."}]}
    reward = RubricReward(judge={"model": "j", "base_url": server.base_url}, rubric=rubric, length_penalty=GROUP)
    try:
        short, long_ = "good answer here", "good " + "word " * 10
        records = reward.score_batch(["P"] * 3 + ["Q"] * 2, [short, long_, "bad reply text", "bad one", "bad two"])
    finally:
        reward.close()
    # P: passing lengths 3 and 11 -> median 7, cap 14: the long one pays 0.4 * 4 / 7; Q: nothing passes
    assert [r.penalty for r in records] == pytest.approx([0.0, 0.4 * 4 / 7, 0.0, 0.0, 0.0])
    assert records[1].reward == pytest.approx(1.0 - 0.4 * 4 / 7) and records[1].score == 1.0


def test_deadline_lengths_and_slowest_calls(judge_server):
    # long completions take the judge 2 s: the 0.5 s deadline falls on them
    server = judge_server(latency_s=lambda body: 2.0 if len(response_in_request(body["messages"]).split()) > 5 else 0.0)
    rubric = {"criteria": [{"name": "ok", "requirement": "Is fine."}]}
    reward = RubricReward(judge={"model": "j", "base_url": server.base_url}, rubric=rubric, deadline_s=0.5)
    metrics: dict[str, float] = {}
    try:
        out = reward(prompts=["P"] * 4, completions=["a short reply", "another brief reply",
                                                     "a much longer reply " * 3, "one more long reply " * 4],
                     log_metric=metrics.__setitem__)
    finally:
        reward.close()
    assert out[:2] == [1.0, 1.0] and out[2:] == [None, None]
    assert metrics["rubric/deadline_frac"] == 0.5
    assert metrics["rubric/length_deadline_mean"] == (12 + 16) / 2
    assert metrics["rubric/length_ontime_mean"] == (3 + 3) / 2
    assert metrics["rubric/latency_max_s"] >= 0.4  # the calls cut at the deadline are the slowest
    assert metrics["rubric/latency_p99_s"] <= metrics["rubric/latency_max_s"]
