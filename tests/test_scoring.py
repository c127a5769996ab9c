import pytest

from rubric_reward.results import ErrorKind, JudgeError, Verdict
from rubric_reward.rubric import Rubric
from rubric_reward.arithmetic import ScoringConfig, score_verdicts

# The worked example: a +10, b +5, neg -5, ord +8 with options 0 / .5 / 1 and N/A.
WORKED = Rubric.from_obj({"criteria": [
    {"name": "a", "requirement": "a", "weight": 10},
    {"name": "b", "requirement": "b", "weight": 5},
    {"name": "neg", "requirement": "flaw", "weight": -5},
    {"name": "ord", "requirement": "o", "weight": 8, "allow_abstain": True,
     "options": [{"label": "lo", "value": 0}, {"label": "mid", "value": 0.5}, {"label": "hi", "value": 1}]},
]})


def v(name, label, value, **kw):
    return Verdict(name, label, value, **kw)


def abstain(name, label="CANNOT_ASSESS"):
    return Verdict(name, label, None, abstained=True)


def failed(name, kind=ErrorKind.PARSE):
    return Verdict(name, None, None, error=JudgeError(kind, "boom"))


BASE = [v("a", "MET", 1.0), abstain("b"), v("neg", "UNMET", 0.0), v("ord", "hi", 1.0)]


@pytest.mark.parametrize(("strategy", "expected"), [
    ("skip", 18 / 18), ("zero", 18 / 23), ("partial", 20.5 / 23), ("fail", 18 / 23),
])
def test_worked_example_abstention_strategies(strategy, expected):
    result = score_verdicts(WORKED, BASE, ScoringConfig(abstention=strategy))
    assert result.score == pytest.approx(expected)
    assert round(result.score, 3) == {"skip": 1.0, "zero": 0.783, "partial": 0.891, "fail": 0.783}[strategy]


def test_partial_credit_is_configurable():
    result = score_verdicts(WORKED, BASE, ScoringConfig(abstention="partial", partial_credit=0.2))
    assert result.score == pytest.approx((10 + 1 + 8) / 23)


def test_penalty_fires_and_clips_at_zero():
    verdicts = [v("a", "UNMET", 0.0), v("b", "UNMET", 0.0), v("neg", "MET", 1.0), v("ord", "lo", 0.0)]
    result = score_verdicts(WORKED, verdicts)
    assert result.raw_score == pytest.approx(-5 / 23) and result.score == 0.0


def test_penalty_abstention_under_fail_takes_the_penalty():
    verdicts = [v("a", "MET", 1.0), v("b", "MET", 1.0), abstain("neg"), v("ord", "mid", 0.5)]
    assert score_verdicts(WORKED, verdicts, ScoringConfig(abstention="fail")).score == pytest.approx(14 / 23)
    assert score_verdicts(WORKED, verdicts, ScoringConfig(abstention="partial")).score == pytest.approx(19 / 23)


def test_ordinal_na_is_an_abstention():
    verdicts = [v("a", "MET", 1.0), v("b", "MET", 1.0), v("neg", "UNMET", 0.0), abstain("ord", "N/A")]
    assert score_verdicts(WORKED, verdicts, ScoringConfig(abstention="skip")).score == pytest.approx(1.0)
    assert score_verdicts(WORKED, verdicts, ScoringConfig(abstention="fail")).score == pytest.approx(15 / 23)


PENALTY_ONLY = Rubric.from_obj({"criteria": [
    {"name": "p1", "requirement": "x", "weight": -2}, {"name": "p2", "requirement": "y", "weight": -6},
]})


@pytest.mark.parametrize(("labels", "expected"), [
    (("UNMET", "UNMET"), 1.0), (("MET", "UNMET"), 0.75), (("UNMET", "MET"), 0.25), (("MET", "MET"), 0.0),
])
def test_penalty_only_rubric_starts_at_one(labels, expected):
    verdicts = [v(n, lab, 1.0 if lab == "MET" else 0.0) for n, lab in zip(("p1", "p2"), labels)]
    assert score_verdicts(PENALTY_ONLY, verdicts).score == pytest.approx(expected)


def test_all_or_nothing():
    ok = [v("a", "MET", 1.0), v("b", "MET", 1.0), v("neg", "UNMET", 0.0), v("ord", "hi", 1.0)]
    cfg = ScoringConfig(all_or_nothing=True)
    assert score_verdicts(WORKED, ok, cfg).score == 1.0
    assert score_verdicts(WORKED, [*ok[:3], v("ord", "mid", 0.5)], cfg).score == 0.0
    assert score_verdicts(WORKED, [ok[0], ok[1], v("neg", "MET", 1.0), ok[3]], cfg).score == 0.0
    # abstentions follow the strategy: skipped under SKIP, failing under ZERO
    assert score_verdicts(WORKED, BASE, cfg).score == 1.0
    assert score_verdicts(WORKED, BASE, ScoringConfig(all_or_nothing=True, abstention="zero")).score == 0.0


def test_failures_are_unscored_not_renormalised():
    verdicts = [v("a", "MET", 1.0), failed("b"), v("neg", "UNMET", 0.0), v("ord", "hi", 1.0)]
    result = score_verdicts(WORKED, verdicts, ScoringConfig(abstention="skip"))
    assert result.score is None and "b (parse: boom)" in result.error
    worst = score_verdicts(WORKED, verdicts, ScoringConfig(on_failure="worst_case"))
    assert worst.score == pytest.approx(18 / 23)


def test_missing_verdict_is_a_failure():
    result = score_verdicts(WORKED, BASE[:3])
    assert result.score is None and "ord" in result.error


def test_all_abstained_is_unscored_under_skip():
    result = score_verdicts(WORKED, [abstain("a"), abstain("b"), abstain("neg"), abstain("ord", "N/A")])
    assert result.score is None and "abstained" in result.error
    assert score_verdicts(PENALTY_ONLY, [abstain("p1"), abstain("p2")]).score is None


def test_expected_score_uses_continuous_values():
    verdicts = [v("a", "MET", 1.0, expected_value=0.8), v("b", "MET", 1.0), v("neg", "UNMET", 0.0, expected_value=0.1),
                v("ord", "hi", 1.0)]
    result = score_verdicts(WORKED, verdicts)
    assert result.score == pytest.approx(1.0)
    assert result.expected_score == pytest.approx((8 + 5 - 0.5 + 8) / 23)


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="abstention"):
        ScoringConfig(abstention="ignore")
    with pytest.raises(ValueError, match="partial_credit"):
        ScoringConfig(partial_credit=2)
