"""Statistics for comparing scores: confidence intervals, paired tests, effect sizes.

Missing values (``None``/NaN) are dropped (pairwise for paired inputs).
Results that are undefined for the remaining data are ``None``; see ``_common``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ._common import (Interval, LabelSeq, NumSeq, TestResult, _Result, as_labels, as_numeric, check_same_length,
                      exact_differences, paired_numeric, rng_kwargs)

Statistic = Callable[..., Any]
Alternative = Literal["two-sided", "less", "greater"]
BootstrapMethod = Literal["percentile", "basic", "BCa"]


@dataclasses.dataclass(frozen=True)
class McNemarResult(_Result):
    """Exact McNemar test: ``b`` = only A correct, ``c`` = only B correct."""

    b: int
    c: int
    pvalue: float
    n: int


@dataclasses.dataclass(frozen=True)
class WilcoxonResult(TestResult):
    """Wilcoxon signed-rank result, with the variant that computed the p-value.

    ``method``: ``"exact"`` (the exact null distribution: no zeros and no ties, n <= 50), ``"permutation"``
    (all 2**n sign flips: zeros or ties, n <= 13) or ``"normal"`` (normal approximation with the tie
    correction of the variance, no continuity correction). ``zeros``: zero differences (ties between the
    two systems), dropped before ranking (Wilcox's zero handling); ``tied_ranks``: whether non-zero
    |differences| share a rank. ``n`` counts complete pairs, zeros included.
    """

    method: str = "exact"
    zeros: int = 0
    tied_ranks: bool = False

    def describe(self) -> str:
        """The variant in words, e.g. for a report."""
        how = {"exact": "exact null distribution",
               "permutation": f"exact permutation distribution (all 2^{self.n} sign flips)",
               "normal": "normal approximation with tie correction, no continuity correction",
               "none": "no non-zero differences: p = 1 by definition"}[self.method]
        return (f"Wilcoxon signed-rank, two-sided, {how}; {self.zeros} zero difference(s) dropped before "
                f"ranking (Wilcox); {'tied' if self.tied_ranks else 'no tied'} ranks among the rest; "
                "differences taken in exact arithmetic, |difference| <= 1e-9 counted as zero")


def _check_resampling(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def bootstrap_ci(
    values: NumSeq,
    statistic: Statistic = np.mean,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
    clusters: LabelSeq | None = None,
    method: BootstrapMethod = "percentile",
) -> Interval:
    """Bootstrap confidence interval for ``statistic(values)``.

    Without ``clusters`` this is ``scipy.stats.bootstrap``. With ``clusters``
    (one group id per value, e.g. the student a response belongs to) whole
    clusters are resampled with replacement, which keeps within-cluster
    correlation; only ``percentile`` and ``basic`` are supported then.
    ``statistic`` takes a 1-D array (scipy vectorises it if it accepts
    ``axis``); ``np.mean`` has a fast vectorised cluster path.

    Degenerate cases: no values left -> estimate, low, high all ``None``;
    fewer than two values (clusters) -> ``low``/``high`` ``None``; constant
    values -> ``low == high == estimate``. The default seed makes it reproducible.
    """
    _check_resampling(n_resamples, confidence)
    x = as_numeric(values, "values")
    keep = ~np.isnan(x)
    codes: npt.NDArray[np.intp] | None = None
    if clusters is not None:
        if method == "BCa":
            raise ValueError("method='BCa' is not supported with clusters")
        ids = as_labels(clusters, "clusters")
        check_same_length(x, ids, "values", "clusters")
        if any(c is None for c in ids):
            raise ValueError("clusters contains missing ids")
        index: dict[Hashable, int] = {}
        # Codes 0..G-1 over the clusters that still have a value.
        codes = np.array([index.setdefault(c, len(index)) for c, k in zip(ids, keep) if k], dtype=np.intp)
    x = x[keep]
    if x.size == 0:
        return Interval(None, None, None, confidence, 0)
    estimate = float(statistic(x))
    units = x.size if codes is None else int(codes.max()) + 1
    if units < 2:
        return Interval(estimate, None, None, confidence, int(x.size))
    if np.all(x == x[0]):  # every resample is identical; scipy's BCa would give NaN
        return Interval(estimate, estimate, estimate, confidence, int(x.size))

    if codes is None:
        from scipy import stats

        res = stats.bootstrap(
            (x,),
            statistic,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method=method,
            **rng_kwargs(stats.bootstrap, seed),
        )
        low, high = res.confidence_interval
    else:
        dist = _cluster_bootstrap_distribution(x, codes, units, statistic, n_resamples, seed)
        alpha = (1 - confidence) / 2
        q_low, q_high = np.quantile(dist, [alpha, 1 - alpha])
        low, high = (q_low, q_high) if method == "percentile" else (2 * estimate - q_high, 2 * estimate - q_low)
    return Interval(estimate, float(low), float(high), confidence, int(x.size))


def _cluster_bootstrap_distribution(
    x: npt.NDArray[np.float64],
    codes: npt.NDArray[np.intp],
    n_clusters: int,
    statistic: Statistic,
    n_resamples: int,
    seed: int | None,
) -> npt.NDArray[np.float64]:
    rng = np.random.default_rng(seed)
    # How often each cluster is drawn when drawing n_clusters with replacement.
    counts = rng.multinomial(n_clusters, np.full(n_clusters, 1 / n_clusters), size=n_resamples)
    if statistic is np.mean:
        sums = np.bincount(codes, weights=x, minlength=n_clusters)
        sizes = np.bincount(codes, minlength=n_clusters)
        return (counts @ sums) / (counts @ sizes)
    # Generic statistics need the materialised resample.
    return np.array([statistic(np.repeat(x, row[codes])) for row in counts], dtype=float)


def paired_bootstrap_ci(a: NumSeq, b: NumSeq, *, n_resamples: int = 2000, confidence: float = 0.95,
                        seed: int | None = 0, clusters: LabelSeq | None = None,
                        method: BootstrapMethod = "percentile") -> Interval:
    """Bootstrap interval for the mean of ``a - b`` over complete pairs.

    Differences are exact (``exact_differences``: equal scores give exactly 0).
    Pairs are resampled together (optionally by cluster); conventions as in
    ``bootstrap_ci``.
    """
    # NaN in either side makes the difference NaN, which bootstrap_ci drops together with its cluster id.
    return bootstrap_ci(exact_differences(a, b), np.mean, n_resamples=n_resamples, confidence=confidence, seed=seed,
                        clusters=clusters, method=method)


def _mean_difference(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], axis: int) -> Any:
    return np.mean(x - y, axis=axis)


def paired_permutation_test(
    a: NumSeq,
    b: NumSeq,
    *,
    n_resamples: int = 9999,
    seed: int | None = 0,
    alternative: Alternative = "two-sided",
) -> TestResult | None:
    """Paired permutation test on the mean difference ``mean(a - b)``.

    Uses ``scipy.stats.permutation_test`` with ``permutation_type="samples"``
    (swaps within pairs; exact when 2**n <= n_resamples). ``None`` if no
    complete pairs; all-zero differences give statistic 0 and p-value 1.
    """
    x, y = paired_numeric(a, b)
    if x.size == 0:
        return None
    if not np.any(x - y):
        return TestResult(0.0, 1.0, int(x.size))
    from scipy import stats

    res = stats.permutation_test(
        (x, y),
        _mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative=alternative,
        **rng_kwargs(stats.permutation_test, seed),
    )
    return TestResult(float(res.statistic), float(res.pvalue), int(x.size))


def wilcoxon_signed_rank(a: NumSeq, b: NumSeq, *, alternative: Alternative = "two-sided"
                         ) -> WilcoxonResult | None:
    """Wilcoxon signed-rank test on ``a - b``, differences in exact arithmetic.

    Differences come from ``exact_differences`` (equal in exact arithmetic -> equal, so they tie; within
    1e-9 of zero -> a zero). The p-value is ``scipy.stats.wilcoxon`` with zero_method ``wilcox`` and no
    continuity correction, the variant chosen as scipy's ``method="auto"`` chooses it but named in the
    result (:class:`WilcoxonResult`). ``None`` if no complete pairs; all differences zero: statistic 0,
    p-value 1 (scipy would give NaN).
    """
    d = exact_differences(a, b)
    d = d[~np.isnan(d)]
    if d.size == 0:
        return None
    zeros = int(np.sum(d == 0))
    nonzero = np.abs(d[d != 0])
    tied = bool(np.unique(nonzero).size < nonzero.size)
    if zeros == d.size:
        return WilcoxonResult(0.0, 1.0, int(d.size), method="none", zeros=zeros, tied_ranks=False)
    from scipy import stats

    if not (zeros or tied) and d.size <= 50:
        method: Any = "exact"
    elif d.size <= 13:
        method = stats.PermutationMethod()
    else:
        method = "asymptotic"
    res = stats.wilcoxon(d, zero_method="wilcox", correction=False, alternative=alternative, method=method)
    name = method if isinstance(method, str) else "permutation"
    return WilcoxonResult(float(res.statistic), float(res.pvalue), int(d.size),
                          method={"asymptotic": "normal"}.get(name, name), zeros=zeros, tied_ranks=tied)


def mcnemar_exact(a_correct: NumSeq, b_correct: NumSeq) -> McNemarResult:
    """Exact McNemar test for paired binary outcomes (``scipy.stats.binomtest``).

    Two-sided binomial test of b vs c on the discordant pairs; p-value 1.0
    when there are none (including when no complete pairs remain).
    """
    x, y = paired_numeric(a_correct, b_correct, "a_correct", "b_correct")
    for name, arr in (("a_correct", x), ("b_correct", y)):
        if not np.isin(arr, (0.0, 1.0)).all():
            raise ValueError(f"{name} must contain only 0/1 or booleans (None for missing)")
    b = int(np.sum((x == 1) & (y == 0)))
    c = int(np.sum((x == 0) & (y == 1)))
    if b + c == 0:
        return McNemarResult(b, c, 1.0, int(x.size))
    from scipy import stats

    return McNemarResult(b, c, float(stats.binomtest(b, b + c, 0.5).pvalue), int(x.size))


def cohens_d(a: NumSeq, b: NumSeq, paired: bool = False) -> float | None:
    """Cohen's d for ``a - b``.

    Unpaired: mean difference over the pooled sample SD (ddof=1), missing
    values dropped per side. Paired: d_z, mean of differences over their SD,
    missing dropped pairwise. ``None`` when the SD is zero or undefined
    (too few values).
    """
    if paired:
        x, y = paired_numeric(a, b)
        d = x - y
        if d.size < 2:
            return None
        sd = float(np.std(d, ddof=1))
        return float(np.mean(d)) / sd if sd > 0 else None
    x, y = as_numeric(a, "a"), as_numeric(b, "b")
    x, y = x[~np.isnan(x)], y[~np.isnan(y)]
    if x.size < 1 or y.size < 1 or x.size + y.size < 3:
        return None
    pooled_var = ((x.size - 1) * _var(x) + (y.size - 1) * _var(y)) / (x.size + y.size - 2)
    if pooled_var <= 0:
        return None
    return float((np.mean(x) - np.mean(y)) / np.sqrt(pooled_var))


def _var(x: npt.NDArray[np.float64]) -> float:
    return float(np.var(x, ddof=1)) if x.size > 1 else 0.0


def holm_adjust(pvalues: Sequence[float] | npt.NDArray[Any]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order.

    The k-th smallest p-value (k from 0) is multiplied by (m - k), then
    monotonicity is enforced with a running maximum and the result capped at 1.
    """
    p = as_numeric(pvalues, "pvalues")
    if np.isnan(p).any():
        raise ValueError("pvalues contains missing values")
    if ((p < 0) | (p > 1)).any():
        raise ValueError("pvalues must lie in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out.tolist()
