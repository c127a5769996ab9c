"""Tests for rubric_reward.stats: library cross-checks, hand-computed cases, degenerate inputs."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as sps
from sklearn import metrics as skm

from rubric_reward.stats import (
    AgreementSummary,
    Interval,
    TestResult,
    adjacent_accuracy,
    agreement_summary,
    bootstrap_ci,
    cohen_kappa,
    cohens_d,
    earth_movers_distance,
    exact_accuracy,
    holm_adjust,
    kendall,
    krippendorff_alpha,
    mcnemar_exact,
    mean_bias,
    paired_bootstrap_ci,
    paired_permutation_test,
    per_option_precision_recall,
    quadratic_weighted_kappa,
    spearman,
    wilcoxon_signed_rank,
    exact_differences,
)
from rubric_reward.stats._common import rng_kwargs

# Undefined statistics must come back as None, never as NaN with a warning.
pytestmark = pytest.mark.filterwarnings("error")

ORDER = ["low", "mid", "high"]


# --- agreement ---------------------------------------------------------------


def test_exact_and_adjacent_accuracy_drop_missing_pairwise() -> None:
    pred = ["low", "high", "mid", None, "high"]
    gold = ["low", "mid", "low", "mid", None]
    assert exact_accuracy(pred, gold) == pytest.approx(1 / 3)
    assert adjacent_accuracy(pred, gold, ORDER) == pytest.approx(1.0)
    assert adjacent_accuracy(["low"], ["high"], ORDER) == 0.0


def test_order_as_mapping_ranks_by_value() -> None:
    order = {"high": 10.0, "low": 0.0, "mid": 5.0}
    assert adjacent_accuracy(["low", "high"], ["high", "high"], order) == 0.5


def test_cohen_kappa_hand_computed_2x2() -> None:
    # pred\gold: MET/MET 20, MET/UNMET 5, UNMET/MET 10, UNMET/UNMET 15 (n=50)
    # p_o = 35/50 = 0.7; p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = 0.2/0.5 = 0.4
    pred = ["MET"] * 25 + ["UNMET"] * 25
    gold = ["MET"] * 20 + ["UNMET"] * 5 + ["MET"] * 10 + ["UNMET"] * 15
    assert cohen_kappa(pred, gold) == pytest.approx(0.4)
    assert cohen_kappa(pred, gold) == pytest.approx(skm.cohen_kappa_score(gold, pred))


def test_qwk_hand_computed_and_against_sklearn() -> None:
    # gold 0,1,2 vs pred 0,2,2: observed weighted disagreement 1/3, expected 5/3 -> 1 - 1/5
    assert quadratic_weighted_kappa([0, 2, 2], [0, 1, 2], order=[0, 1, 2]) == pytest.approx(0.8)
    rng = np.random.default_rng(1)
    gold = rng.integers(0, 5, 40)
    pred = np.clip(gold + rng.integers(-1, 2, 40), 0, 4)
    labels = ["a", "b", "c", "d", "e"]
    got = quadratic_weighted_kappa([labels[i] for i in pred], [labels[i] for i in gold], labels)
    assert got == pytest.approx(skm.cohen_kappa_score(gold, pred, weights="quadratic", labels=range(5)))


def test_qwk_counts_unobserved_middle_categories() -> None:
    wide = quadratic_weighted_kappa(["lo", "hi", "hi"], ["lo", "lo", "hi"], ["lo", "x", "y", "hi"])
    narrow = quadratic_weighted_kappa(["lo", "hi", "hi"], ["lo", "lo", "hi"], ["lo", "hi"])
    expected = skm.cohen_kappa_score([0, 0, 3], [0, 3, 3], weights="quadratic", labels=range(4))
    assert wide == pytest.approx(expected)
    assert narrow == pytest.approx(skm.cohen_kappa_score([0, 0, 1], [0, 1, 1], weights="quadratic"))


def test_kappa_one_class_only_is_none() -> None:
    assert cohen_kappa(["MET"] * 4, ["MET"] * 4) is None
    assert quadratic_weighted_kappa(["mid"] * 3, ["mid"] * 3, ORDER) is None
    # One rater constant, the other not: defined (chance-level) kappa of 0.
    assert cohen_kappa(["MET"] * 4, ["MET", "UNMET", "MET", "UNMET"]) == pytest.approx(0.0)


def test_label_not_in_order_raises() -> None:
    with pytest.raises(ValueError, match="pred contains label 'huge'"):
        adjacent_accuracy(["huge"], ["low"], ORDER)
    with pytest.raises(ValueError, match="duplicate"):
        quadratic_weighted_kappa(["low"], ["low"], ["low", "low"])


def test_spearman_and_kendall_match_scipy() -> None:
    x = [1.0, 2.0, 3.0, 4.0, 5.0, None, 7.0]
    y = [2.0, 1.0, 4.0, 3.0, 6.0, 5.0, float("nan")]
    xs, ys = [1, 2, 3, 4, 5], [2, 1, 4, 3, 6]
    rho, tau = spearman(x, y), kendall(x, y)
    ref_rho, ref_tau = sps.spearmanr(xs, ys), sps.kendalltau(xs, ys)
    assert rho == TestResult(pytest.approx(ref_rho.statistic), pytest.approx(ref_rho.pvalue), 5)
    assert tau == TestResult(pytest.approx(ref_tau.statistic), pytest.approx(ref_tau.pvalue), 5)


def test_correlation_constant_or_too_short_is_none() -> None:
    assert spearman([1, 2, 3, 4], [2, 2, 2, 2]) is None
    assert kendall([5, 5, 5], [1, 2, 3]) is None
    assert spearman([1, 2], [2, 1]) is None
    assert kendall([None, None, None], [1, 2, 3]) is None


def test_earth_movers_distance() -> None:
    assert earth_movers_distance([0, 1], [1, 2, None]) == pytest.approx(1.0)
    a, b = [0.1, 0.5, 0.9, 0.9], [0.2, 0.2, 0.8]
    assert earth_movers_distance(a, b) == pytest.approx(sps.wasserstein_distance(a, b))
    assert earth_movers_distance([None], [1.0]) is None


def test_per_option_precision_recall_matches_sklearn() -> None:
    pred = ["A", "B", "B", "C", "A", "A", None]
    gold = ["A", "B", "C", "C", "B", "A", "C"]
    got = per_option_precision_recall(pred, gold)
    p, r, _, s = skm.precision_recall_fscore_support(gold[:6], pred[:6], labels=["A", "B", "C"])
    assert list(got) == ["A", "B", "C"]
    for i, lab in enumerate("ABC"):
        assert got[lab].precision == pytest.approx(p[i])
        assert got[lab].recall == pytest.approx(r[i])
        assert got[lab].support == s[i]


def test_per_option_undefined_precision_and_recall_are_none() -> None:
    got = per_option_precision_recall(["A", "A"], ["A", "A"], labels=["A", "B"])
    assert got["B"].to_dict() == {"precision": None, "recall": None, "support": 0}
    assert per_option_precision_recall([None], ["A"]) == {}
    assert per_option_precision_recall([None], ["A"], labels=["A"])["A"].support == 0


def test_mean_bias() -> None:
    assert mean_bias([3, 4, None, 5], [2, 2, 2, 5]) == pytest.approx(1.0)
    assert mean_bias([None], [1]) is None


def test_krippendorff_alpha_hand_computed_nominal() -> None:
    # Coincidences: o_aa=2, o_ab=o_ba=1, o_bb=4; n_a=3, n_b=5, n=8.
    # D_o = 2/8, D_e = 2*3*5/(8*7) -> alpha = 1 - (1/4)/(30/56) = 16/30
    assert krippendorff_alpha([["a", "a", "b", "b"], ["a", "b", "b", "b"]]) == pytest.approx(16 / 30)


def test_krippendorff_alpha_reference_example_with_missing() -> None:
    # Krippendorff's (2011) example: nominal 0.691, interval 0.811.
    n = None
    data = [
        [n, n, n, n, n, 3, 4, 1, 2, 1, 1, 3, 3, n, 3],
        [1, n, 2, 1, 3, 3, 4, 3, n, n, n, n, n, n, n],
        [n, n, 2, 1, 3, 4, 4, n, 2, 1, 1, 3, 3, n, 4],
    ]
    assert krippendorff_alpha(data, "nominal") == pytest.approx(0.691, abs=1e-3)
    assert krippendorff_alpha(np.array(data, dtype=float), "interval") == pytest.approx(0.811, abs=1e-3)
    as_words = [[n if v is n else "abcd"[v - 1] for v in row] for row in data]
    assert krippendorff_alpha(as_words, "ordinal", order=list("abcd")) == pytest.approx(
        krippendorff_alpha(data, "ordinal")
    )


def test_krippendorff_alpha_degenerate() -> None:
    assert krippendorff_alpha([["a", "a"], ["a", "a"]]) is None  # one value only
    assert krippendorff_alpha([["a", None], [None, "b"]]) is None  # nothing pairable
    assert krippendorff_alpha([[None, None], [None, None]]) is None
    with pytest.raises(ValueError, match="two judges"):
        krippendorff_alpha([["a", "b"]])
    with pytest.raises(ValueError, match="different lengths"):
        krippendorff_alpha([["a", "b"], ["a"]])
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha([[1, 2], [1, 2]], level="ratio")  # type: ignore[arg-type]


def test_agreement_summary() -> None:
    pred = ["low", "high", "mid", None, "high", "low"]
    gold = ["low", "mid", "mid", "mid", "high", None]
    s = agreement_summary(pred, gold, order=ORDER)
    assert (s.n, s.n_excluded) == (4, 2)
    assert s.exact == pytest.approx(0.75)
    assert s.adjacent == pytest.approx(1.0)
    assert s.kappa == pytest.approx(cohen_kappa(pred, gold))
    assert s.qwk == pytest.approx(quadratic_weighted_kappa(pred, gold, ORDER))
    nominal = agreement_summary(pred, gold)
    assert nominal.adjacent is None and nominal.qwk is None
    json.dumps(s.to_dict())


def test_all_abstained() -> None:
    pred = [None, None, None]
    gold = ["MET", "UNMET", "MET"]
    assert agreement_summary(pred, gold, order=["UNMET", "MET"]) == AgreementSummary(
        n=0, n_excluded=3, exact=None, adjacent=None, kappa=None, qwk=None
    )
    assert exact_accuracy(pred, gold) is None
    assert cohen_kappa(pred, gold) is None


@pytest.mark.parametrize(
    "call",
    [
        lambda: exact_accuracy([], []),
        lambda: cohen_kappa([], ["a"]),
        lambda: agreement_summary([], []),
        lambda: spearman([], []),
    ],
)
def test_empty_input_raises_naming_argument(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=r"(pred|x) is empty"):
        call()


def test_mismatched_lengths_raise_naming_both() -> None:
    with pytest.raises(ValueError, match="pred and gold have different lengths"):
        exact_accuracy(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="judge_scores and human_scores"):
        mean_bias([1, 2], [1])
    with pytest.raises(ValueError, match="a and b have different lengths"):
        wilcoxon_signed_rank([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="values and clusters"):
        bootstrap_ci([1, 2, 3], clusters=[1, 2])


def test_import_is_lazy() -> None:
    code = "import sys, rubric_reward.stats; print(sorted(m for m in ('scipy','sklearn','krippendorff') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- comparisons -------------------------------------------------------------


def test_bootstrap_ci_matches_scipy() -> None:
    x = np.random.default_rng(0).normal(size=30)
    got = bootstrap_ci(x, n_resamples=500, seed=3)
    ref = sps.bootstrap((x,), np.mean, n_resamples=500, method="percentile", **rng_kwargs(sps.bootstrap, 3))
    assert got.estimate == pytest.approx(x.mean())
    assert (got.low, got.high) == (pytest.approx(ref.confidence_interval.low), pytest.approx(ref.confidence_interval.high))
    assert got.low < got.estimate < got.high and got.n == 30


def test_bootstrap_ci_degenerate() -> None:
    assert bootstrap_ci([2.0, 2.0, 2.0], method="BCa", n_resamples=50) == Interval(2.0, 2.0, 2.0, 0.95, 3)
    assert bootstrap_ci([2.0, None], n_resamples=50) == Interval(2.0, None, None, 0.95, 1)
    assert bootstrap_ci([None, None], n_resamples=50) == Interval(None, None, None, 0.95, 0)
    assert bootstrap_ci([1.0, 3.0], clusters=["s", "s"], n_resamples=50).low is None
    with pytest.raises(ValueError, match="values is empty"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1, 2], confidence=95)
    with pytest.raises(ValueError, match="BCa"):
        bootstrap_ci([1, 2], clusters=[1, 2], method="BCa")


def _clustered(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    effects = rng.normal(size=20)
    values = np.repeat(effects, 10) + rng.normal(scale=0.01, size=200)
    return values, np.repeat(np.arange(20), 10)


def test_cluster_bootstrap_is_reproducible_and_wider_for_correlated_clusters() -> None:
    values, clusters = _clustered()
    a = bootstrap_ci(values, clusters=clusters, n_resamples=1000, seed=7)
    b = bootstrap_ci(values, clusters=clusters, n_resamples=1000, seed=7)
    c = bootstrap_ci(values, clusters=clusters, n_resamples=1000, seed=8)
    naive = bootstrap_ci(values, n_resamples=1000, seed=7)
    assert a == b and a != c
    assert a.estimate == pytest.approx(values.mean())
    # 10 near-identical values per cluster: effective n is 20, not 200 (~sqrt(10) wider).
    assert (a.high - a.low) > 2 * (naive.high - naive.low)


def test_cluster_bootstrap_fast_mean_path_matches_generic_path() -> None:
    values, clusters = _clustered(1)
    ids = [f"student-{c}" for c in clusters]
    fast = bootstrap_ci(values, np.mean, clusters=ids, n_resamples=300, seed=2)
    slow = bootstrap_ci(values, lambda v: float(np.mean(v)), clusters=ids, n_resamples=300, seed=2)
    assert (fast.low, fast.high) == (pytest.approx(slow.low), pytest.approx(slow.high))
    basic = bootstrap_ci(values, clusters=ids, n_resamples=300, seed=2, method="basic")
    assert basic.low == pytest.approx(2 * fast.estimate - fast.high)


def test_paired_bootstrap_ci() -> None:
    a = [0.9, 0.8, 0.7, None, 0.6, 0.9]
    b = [0.5, 0.6, 0.7, 0.1, 0.4, 0.5]
    got = paired_bootstrap_ci(a, b, n_resamples=300)
    assert got.estimate == pytest.approx(np.mean([0.4, 0.2, 0.0, 0.2, 0.4]))
    assert got.n == 5 and got.low <= got.estimate <= got.high
    clustered = paired_bootstrap_ci(a, b, clusters=[1, 1, 2, 2, 3, 3], n_resamples=300)
    assert clustered.n == 5
    json.dumps(got.to_dict())


def test_paired_permutation_test() -> None:
    # Exact: 2**4 sign flips; the observed mean difference is the most extreme
    # in each direction, so the two-sided p-value is 2/16.
    res = paired_permutation_test([2, 3, 4, 5], [1, 1, 1, 1])
    assert res == TestResult(2.5, pytest.approx(0.125), 4)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=25), rng.normal(size=25)
    ref = sps.permutation_test(
        (a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=999, **rng_kwargs(sps.permutation_test, 5),
    )
    got = paired_permutation_test(a, b, n_resamples=999, seed=5)
    assert got.pvalue == pytest.approx(ref.pvalue) and got.statistic == pytest.approx(ref.statistic)
    assert paired_permutation_test([1, 2], [1, 2]) == TestResult(0.0, 1.0, 2)
    assert paired_permutation_test([None], [1]) is None


def test_wilcoxon_signed_rank() -> None:
    a, b = [1.2, 3.4, 2.2, 5.0, 0.1, 4.4, 2.0], [1.0, 3.0, 2.5, 4.0, 0.0, 4.0, 1.1]
    # 3.4 - 3.0 and 4.4 - 4.0 are both 0.4 exactly (not in floats): a tie, so scipy's auto permutes
    ref = sps.wilcoxon([2, 4, -3, 10, 1, 4, 9])
    got = wilcoxon_signed_rank(a, b)
    assert (got.statistic, got.pvalue, got.n) == (pytest.approx(ref.statistic), pytest.approx(ref.pvalue), 7)
    assert got.method == "permutation" and got.zeros == 0 and got.tied_ranks
    same = wilcoxon_signed_rank([1, 2, 3], [1, 2, 3])
    assert (same.statistic, same.pvalue, same.n, same.method, same.zeros) == (0.0, 1.0, 3, "none", 3)
    assert wilcoxon_signed_rank([None], [None]) is None


def test_exact_differences_make_equal_fraction_differences_ties() -> None:
    # 5/7 - 3/7 and 3/7 - 1/7 are both 2/7, but not in floating point
    assert 5 / 7 - 3 / 7 != 3 / 7 - 1 / 7
    d = exact_differences([5 / 7, 3 / 7, 0.1 + 0.2, None], [3 / 7, 1 / 7, 0.3, 0.5])
    assert d[0] == d[1] == pytest.approx(2 / 7) and d[2] == 0.0 and np.isnan(d[3])
    # scores within 1e-9 are a tie (a judge's float noise), a larger gap is not
    assert exact_differences([0.6130000004], [0.613])[0] == 0.0
    assert exact_differences([0.613 + 1e-6], [0.613])[0] == pytest.approx(1e-6)


def test_wilcoxon_on_fraction_scores_sees_ties_like_scipy_on_integers() -> None:
    # AdvancedIF-style k/7 scores, n = 81: the test must equal scipy on the exact (integer) differences,
    # where ties share ranks and the variance is tie-corrected; float differences break those ties.
    rng = np.random.default_rng(3)
    base = rng.integers(0, 8, 81)
    best = np.clip(base + rng.integers(-2, 4, 81), 0, 7)
    got = wilcoxon_signed_rank([k / 7 for k in best], [k / 7 for k in base])
    ref = sps.wilcoxon(best - base)  # integers: exact ties
    assert got.pvalue == pytest.approx(ref.pvalue, rel=1e-12) and got.statistic == pytest.approx(ref.statistic)
    floats = sps.wilcoxon(np.subtract([k / 7 for k in best], [k / 7 for k in base])).pvalue
    assert floats != pytest.approx(ref.pvalue, rel=1e-3)  # what the float differences gave
    assert (got.method, got.tied_ranks, got.zeros, got.n) == ("normal", True, int(np.sum(best == base)), 81)
    assert "normal approximation with tie correction" in got.describe()


def test_wilcoxon_variant_follows_scipy_auto() -> None:
    # zeros or ties with n <= 13: scipy's auto runs the exact permutation distribution
    a, b = [0.5, 0.75, 1.0, 0.25, 0.5, 1.0], [0.25, 0.5, 0.5, 0.25, 0.0, 0.75]
    got = wilcoxon_signed_rank(a, b)
    ref = sps.wilcoxon(np.subtract(a, b))
    assert got.method == "permutation" and got.zeros == 1 and got.tied_ranks
    assert got.pvalue == pytest.approx(ref.pvalue)
    # no zeros, no ties, n <= 50: exact
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=30), rng.normal(size=30)
    got = wilcoxon_signed_rank(x, y)
    assert got.method == "exact" and got.pvalue == pytest.approx(sps.wilcoxon(x - y).pvalue)
    # ties with 13 < n <= 50: the normal approximation, as scipy's auto does
    xs = [1.0, 0.5] * 10
    ys = [0.5, 0.0] * 9 + [1.0, 0.5]
    got = wilcoxon_signed_rank(xs, ys)
    assert got.method == "normal" and got.pvalue == pytest.approx(sps.wilcoxon(np.subtract(xs, ys)).pvalue)


def test_mcnemar_exact_hand_computed() -> None:
    # b=1, c=6: p = 2 * P(X <= 1 | n=7, 1/2) = 2 * 8/128 = 0.125
    a_ok = [True] * 3 + [True] + [False] * 6 + [False] * 2 + [None]
    b_ok = [True] * 3 + [False] + [True] * 6 + [False] * 2 + [True]
    res = mcnemar_exact(a_ok, b_ok)
    assert (res.b, res.c, res.n) == (1, 6, 12)
    assert res.pvalue == pytest.approx(0.125)
    assert mcnemar_exact([1, 0], [1, 0]).pvalue == 1.0
    with pytest.raises(ValueError, match="a_correct must contain only 0/1"):
        mcnemar_exact([2], [1])


def test_cohens_d() -> None:
    assert cohens_d([1, 2, 3], [2, 3, 4]) == pytest.approx(-1.0)  # pooled SD 1
    a, b = [5.0, 6.0, 9.0, None], [1.0, 2.0, 3.0, 4.0]
    sp = np.sqrt((2 * np.var([5, 6, 9], ddof=1) + 3 * np.var([1, 2, 3, 4], ddof=1)) / 5)
    assert cohens_d(a, b) == pytest.approx((20 / 3 - 2.5) / sp)
    d = np.array([1.0, 2.0, 4.0])  # paired: d_z = mean / sd(ddof=1)
    assert cohens_d(d + 1, np.ones(3), paired=True) == pytest.approx(d.mean() / d.std(ddof=1))
    assert cohens_d([1, 1], [1, 1]) is None
    assert cohens_d([1, 2], [2, 3], paired=True) is None  # constant differences
    assert cohens_d([1], [2]) is None


def test_holm_adjust_hand_computed() -> None:
    # sorted 0.01, 0.03, 0.04 -> x3, x2, x1 = 0.03, 0.06, 0.04 -> running max 0.03, 0.06, 0.06
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match="pvalues is empty"):
        holm_adjust([])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm_adjust([1.5])
