"""Monitor-only criteria (``monitor: true`` or weight 0): judged and logged, adding nothing to the reward; and the
logged per-criterion contributions that sum to the logged reward (the TRL #5352 lesson).

Every trainer path's parity with a monitor criterion is in ``tests/test_reward_parity.py``."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

from rubric_reward.arithmetic import (
    CLIP_TERM,
    ScoringConfig,
    score_terms,
    score_verdicts,
)
from rubric_reward.results import ErrorKind, JudgeError, Verdict
from rubric_reward.rl import RubricReward
from rubric_reward.rl.criteria import criterion_weights
from rubric_reward.rubric import Rubric, RubricError

RUBRIC = {"name": "r", "criteria": [
    {"name": "a", "requirement": "A.", "weight": 2},
    {"name": "b", "requirement": "B.", "weight": 1},
    {"name": "flaw", "requirement": "A flaw.", "weight": -1},
    {"name": "watch", "requirement": "Watched.", "weight": -4, "monitor": True},
    {"name": "zero", "requirement": "Weight zero.", "weight": 0},
    {"name": "tone", "requirement": "Tone?", "kind": "ordinal", "weight": 1,
     "options": [{"label": "bad", "value": 0}, {"label": "ok", "value": 0.5}, {"label": "good", "value": 1}]},
]}


def _without_monitors(obj: dict) -> Rubric:
    return Rubric.from_obj({**obj, "criteria": [c for c in obj["criteria"]
                                                if not c.get("monitor") and c.get("weight", 1) != 0]})


def test_monitor_is_read_written_and_validated():
    rubric = Rubric.from_obj(RUBRIC)
    assert rubric["watch"].monitor and rubric["watch"].is_monitor and rubric["watch"].reward_weight == 0
    assert rubric["zero"].is_monitor and not rubric["zero"].monitor
    assert rubric["watch"].weight == -4  # the sign stays: a later promotion, and the judge's verdict semantics
    assert rubric.positive_weight == 4
    assert Rubric.from_obj(rubric.to_dict()) == rubric
    assert rubric.to_dict()["criteria"][3]["monitor"] is True and "monitor" not in rubric.to_dict()["criteria"][0]
    with pytest.raises(RubricError, match="field 'monitor' must be true or false"):
        Rubric.from_obj({"criteria": [{"requirement": "x", "monitor": "yes"}]})
    with pytest.raises(RubricError, match="every criterion is a monitor"):
        Rubric.from_obj({"criteria": [{"requirement": "x", "monitor": True}, {"requirement": "y", "weight": 0}]})


def _random_verdicts(rubric: Rubric, rng: random.Random) -> list[Verdict]:
    out = []
    for c in rubric.criteria:
        roll = rng.random()
        if roll < 0.1:
            out.append(Verdict(c.name, None, None, error=JudgeError(ErrorKind.PARSE, "bad")))
        elif roll < 0.2 and c.abstain_label:
            out.append(Verdict(c.name, c.abstain_label, None, abstained=True))
        else:
            o = rng.choice(c.options)
            out.append(Verdict(c.name, o.label, o.value, expected_value=rng.random() if rng.random() < 0.5 else None))
    return out


CONFIGS = [ScoringConfig(), ScoringConfig(abstention="zero"), ScoringConfig(abstention="fail", on_failure="worst_case"),
           ScoringConfig(abstention="partial", all_or_nothing=True), ScoringConfig(on_failure="worst_case")]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.abstention}-{c.on_failure}-{c.all_or_nothing}")
def test_a_monitor_never_moves_or_unscores_a_score(config):
    rubric, plain = Rubric.from_obj(RUBRIC), _without_monitors(RUBRIC)
    rng = random.Random(0)
    for _ in range(400):
        verdicts = _random_verdicts(rubric, rng)
        kept = [v for v in verdicts if v.criterion in {c.name for c in plain.criteria}]
        got, want = score_verdicts(rubric, verdicts, config), score_verdicts(plain, kept, config)
        assert (got.score, got.raw_score, got.expected_score) == (want.score, want.raw_score, want.expected_score)
    only_monitor_failed = [Verdict(c.name, "MET", 1.0) if c.kind.value == "binary" else Verdict(c.name, "good", 1.0)
                           for c in rubric.criteria]
    only_monitor_failed[3] = Verdict("watch", None, None, error=JudgeError(ErrorKind.TIMEOUT, "slow"))
    assert score_verdicts(rubric, only_monitor_failed, config).score is not None


@pytest.mark.parametrize("field", ["score", "raw_score", "expected_score"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.abstention}-{c.on_failure}-{c.all_or_nothing}")
def test_score_terms_sum_to_the_score(config, field):
    penalties_only = {"criteria": [{"name": "p", "requirement": "P.", "weight": -1},
                                   {"name": "q", "requirement": "Q.", "weight": -3},
                                   {"name": "m", "requirement": "M.", "weight": 1, "monitor": True}]}
    rng = random.Random(1)
    for obj in (RUBRIC, penalties_only):
        rubric = Rubric.from_obj(obj)
        for _ in range(300):
            verdicts = _random_verdicts(rubric, rng)
            result = score_verdicts(rubric, verdicts, config)
            terms = score_terms(rubric, verdicts, config, field)
            if result.score is None:
                assert terms is None
                continue
            assert math.isclose(math.fsum(terms.values()), getattr(result, field), abs_tol=1e-12)
            assert all(terms[c.name] == 0.0 for c in rubric.criteria if c.is_monitor)
            if field == "raw_score" and not config.all_or_nothing:
                assert abs(terms[CLIP_TERM]) < 1e-12  # nothing clipped


def test_per_criterion_rewards_give_a_monitor_weight_zero():
    assert criterion_weights([Rubric.from_obj(RUBRIC)]) == {"a": 2.0, "b": 1.0, "flaw": -1.0, "watch": 0.0,
                                                            "zero": 0.0, "tone": 1.0}


def _judge(response: str, body: dict) -> str:
    return "MET" if "yes" in response else "UNMET"


def test_logged_contributions_sum_to_the_logged_reward(judge_server):
    """Criteria, a monitor, the length penalty and a guard each their own term; together the logged reward."""
    server = judge_server({"tone": lambda r, b: "good" if "!" in r else "bad"}, default=_judge)
    reward = RubricReward({"judge": {"model": "j"}, "base_url": server.base_url, "rubric": RUBRIC,
                           "guards": {"degenerate": True, "min_reward": -0.25},
                           "length_penalty": {"enabled": True, "free": 3, "cap": 8, "penalty": 0.3}})
    completions = ["yes yes!", "no", "yes " * 9, "maybe yes, a long answer that goes on and on!", "", "no no no no"]
    logged = {}
    try:
        rewards = reward(prompts=["Q?"] * len(completions), completions=completions,
                         trainer_state=SimpleNamespace(global_step=1), log_metric=logged.__setitem__)
    finally:
        reward.close()
    assert rewards[4] == -0.25  # the empty answer: the degenerate guard
    terms = {k: v for k, v in logged.items() if k.startswith("rubric/contrib/")}
    assert terms["rubric/contrib/watch"] == 0.0 and terms["rubric/contrib/zero"] == 0.0
    assert terms["rubric/contrib/_length_penalty"] < 0 and terms["rubric/contrib/_guard"] == pytest.approx(-0.25 / 6)
    assert math.isclose(math.fsum(terms.values()), logged["rubric/reward_mean"], abs_tol=1e-12)
    assert math.isclose(logged["rubric/reward_mean"], sum(rewards) / len(rewards), abs_tol=1e-12)
    assert "rubric/pass/watch" in logged  # a monitor's pass rate is logged like any criterion's
