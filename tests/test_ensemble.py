"""Ensemble aggregation on hand-built votes, and ensembles of judges through the grader."""

from __future__ import annotations

import pytest

from rubric_reward import Scorer
from rubric_reward.grading.ensemble import aggregate_votes
from rubric_reward.grading.grader import GradingConfig
from rubric_reward.judges import JudgeConfig
from rubric_reward.results import ErrorKind, JudgeError, Verdict
from rubric_reward.rubric import Rubric
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

try:
    from ._clients_fixtures import fresh_limiters, items  # noqa: F401
except ImportError:
    from _clients_fixtures import fresh_limiters, items  # noqa: F401

R = Rubric.from_obj([
    {"name": "good", "requirement": "Good.", "weight": 1},
    {"name": "flaw", "requirement": "Has a flaw.", "weight": -1},
    {"name": "level", "requirement": "Level.", "kind": "ordinal", "options": [
        {"label": "none", "value": 0.0}, {"label": "low", "value": 1 / 3}, {"label": "high", "value": 2 / 3},
        {"label": "full", "value": 1.0}]},
    {"name": "penalty_level", "requirement": "Harm.", "weight": -1, "kind": "ordinal", "options": [
        {"label": "none", "value": 0.0}, {"label": "low", "value": 1 / 3}, {"label": "high", "value": 2 / 3},
        {"label": "full", "value": 1.0}]},
    {"name": "style", "requirement": "Style.", "kind": "nominal", "allow_abstain": True, "options": [
        {"label": "formal", "value": 1.0}, {"label": "casual", "value": 0.5}, {"label": "slang", "value": 0.0}]},
])
GOOD, FLAW, LEVEL, PENALTY_LEVEL, STYLE = R.criteria


def vote(c, label, judge="j", expected=None):
    if label == c.abstain_label:
        return Verdict(c.name, label, None, abstained=True, judge=judge)
    return Verdict(c.name, label, c.value_of(label), reason=f"{judge} says {label}", judge=judge,
                   expected_value=expected)


def votes(c, *labels):
    return [vote(c, label, f"j{i}") for i, label in enumerate(labels)]


def test_binary_majority_with_agreement():
    v = aggregate_votes(GOOD, votes(GOOD, "MET", "MET", "UNMET"))
    assert (v.label, v.value, v.judge) == ("MET", 1.0, "ensemble")
    assert v.agreement == pytest.approx(2 / 3) and v.expected_value == pytest.approx(2 / 3)
    assert len(v.votes) == 3 and v.reason.endswith("MET")


def test_binary_ties_go_against_the_response():
    assert aggregate_votes(GOOD, votes(GOOD, "MET", "UNMET")).label == "UNMET"  # positive stays unmet
    assert aggregate_votes(FLAW, votes(FLAW, "MET", "UNMET")).label == "MET"  # the penalty fires


def test_binary_weighted_unanimous_any():
    cast = votes(GOOD, "UNMET", "MET", "MET")
    assert aggregate_votes(GOOD, cast, binary="majority", weights=[3, 1, 1]).label == "MET"
    v = aggregate_votes(GOOD, cast, binary="weighted", weights=[3, 1, 1])
    assert v.label == "UNMET" and v.agreement == pytest.approx(3 / 5)
    assert aggregate_votes(GOOD, cast, binary="unanimous").label == "UNMET"
    assert aggregate_votes(GOOD, votes(GOOD, "MET", "MET"), binary="unanimous").label == "MET"
    assert aggregate_votes(GOOD, votes(GOOD, "UNMET", "UNMET", "MET"), binary="any").label == "MET"
    assert aggregate_votes(GOOD, votes(GOOD, "UNMET", "UNMET"), binary="any").label == "UNMET"


def test_abstentions_are_left_out_but_lower_agreement():
    v = aggregate_votes(GOOD, votes(GOOD, "CANNOT_ASSESS", "CANNOT_ASSESS", "MET"))
    assert v.label == "MET" and not v.abstained and v.agreement == pytest.approx(1 / 3)
    v = aggregate_votes(GOOD, votes(GOOD, "CANNOT_ASSESS", "CANNOT_ASSESS"))
    assert v.abstained and v.value is None and v.label == "CANNOT_ASSESS"


def test_a_failed_vote_fails_the_ensemble():
    err = JudgeError(ErrorKind.TIMEOUT, "slow")
    cast = [*votes(GOOD, "MET", "MET"), Verdict("good", None, None, error=err, judge="j2")]
    v = aggregate_votes(GOOD, cast)
    assert v.error == err and v.value is None and len(v.votes) == 3


def test_ordinal_mean_snaps_to_the_nearest_option_and_keeps_the_mean():
    v = aggregate_votes(LEVEL, votes(LEVEL, "full", "full", "none"))
    assert v.label == "high" and v.value == pytest.approx(2 / 3) and v.expected_value == pytest.approx(2 / 3)
    v = aggregate_votes(LEVEL, votes(LEVEL, "full", "high", "none", "none"))  # mean 5/12: nearest is low
    assert v.label == "low" and v.expected_value == pytest.approx(5 / 12)


def test_ordinal_ties_go_against_the_response():
    # mean 0.5 is equidistant from low (1/3) and high (2/3)
    assert aggregate_votes(LEVEL, votes(LEVEL, "low", "high")).label == "low"
    assert aggregate_votes(PENALTY_LEVEL, votes(PENALTY_LEVEL, "low", "high")).label == "high"
    assert aggregate_votes(LEVEL, votes(LEVEL, "low", "high"), ordinal="mode").label == "low"
    assert aggregate_votes(PENALTY_LEVEL, votes(PENALTY_LEVEL, "low", "high"), ordinal="mode").label == "high"


def test_ordinal_median_and_mode_are_weighted():
    cast = votes(LEVEL, "none", "full", "full", "low")
    assert aggregate_votes(LEVEL, cast, ordinal="median").label == "high"  # median (1/3 + 1)/2 = 2/3
    assert aggregate_votes(LEVEL, cast, ordinal="median", weights=[5, 1, 1, 1]).label == "none"
    assert aggregate_votes(LEVEL, cast, ordinal="mode").label == "full"
    assert aggregate_votes(LEVEL, cast, ordinal="mode", weights=[3, 1, 1, 1]).label == "none"


def test_nominal_always_uses_the_mode():
    v = aggregate_votes(STYLE, votes(STYLE, "formal", "slang", "slang"), ordinal="mean")
    assert v.label == "slang" and v.value == 0.0 and v.agreement == pytest.approx(2 / 3)


def test_continuous_votes_feed_the_mean():
    cast = [vote(GOOD, "MET", "a", expected=0.9), vote(GOOD, "MET", "b", expected=0.6)]
    v = aggregate_votes(GOOD, cast)
    assert v.label == "MET" and v.expected_value == pytest.approx(0.75)


def test_zero_weight_judges_are_observers():
    cast = votes(GOOD, "MET", "UNMET", "UNMET")
    v = aggregate_votes(GOOD, cast, weights=[0, 1, 1], binary="any")
    assert v.label == "UNMET" and v.agreement == 1.0
    assert aggregate_votes(GOOD, cast, weights=[0, 0, 0]).label == "UNMET"  # all zero: equal votes


def test_a_single_vote_is_returned_as_is_and_bad_methods_are_refused():
    only = vote(GOOD, "MET")
    assert aggregate_votes(GOOD, [only]) is only
    with pytest.raises(ValueError, match="binary"):
        aggregate_votes(GOOD, [only], binary="vibes")
    with pytest.raises(ValueError, match="ordinal"):
        GradingConfig(ordinal_aggregation="max")
    with pytest.raises(ValueError, match="weights"):
        aggregate_votes(GOOD, votes(GOOD, "MET", "MET"), weights=[1])


def test_an_ensemble_of_judges_and_samples_through_the_grader():
    rubric = Rubric.from_obj([{"name": "good", "requirement": "Good."}, {"name": "level", "requirement": "Level.",
                              "options": {"low": 0.0, "mid": 0.5, "top": 1.0}}])
    with JudgeServer(ScriptedJudge({"good": "MET", "level": "top"})) as a, \
            JudgeServer(ScriptedJudge({"good": "UNMET", "level": "mid"})) as b:
        judges = [JudgeConfig(model="a", base_url=a.base_url, weight=2.0, samples=2),
                  JudgeConfig(model="b", base_url=b.base_url, weight=1.0)]
        with Scorer(rubric, judges, grading={"binary_aggregation": "weighted"}) as s:
            [r] = s.score_batch(items(1))
        assert a.requests == 4 and b.requests == 2  # two samples from a, one from b
        with Scorer(rubric, JudgeConfig(model="b", base_url=b.base_url)) as s:
            [single] = s.score_batch(items(1))
    good, level = r.verdict("good"), r.verdict("level")
    assert good.label == "MET" and good.agreement == pytest.approx(4 / 5) and len(good.votes) == 3
    assert level.expected_value == pytest.approx((2 * 1.0 + 2 * 1.0 + 0.5) / 5) and level.label == "top"
    assert r.score == pytest.approx(1.0) and r.expected_score == pytest.approx((0.8 + 0.9) / 2)
    assert single.verdict("good").label == "UNMET" and not single.verdict("good").votes  # ensemble of one
