"""Agreement between judge labels and reference (human) labels, or among judges.

Labels are hashable categories ("MET"/"UNMET", option labels, integer scores).
Ordinal statistics take ``order``: the labels from lowest to highest, or a
mapping label -> numeric value (ranked by value). Missing labels (``None`` or
NaN) are dropped pairwise; undefined statistics are ``None`` (see ``_common``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from ._common import LabelSeq, NumSeq, TestResult, _Result, as_labels, as_numeric, check_same_length, paired_numeric

Order: TypeAlias = Sequence[Hashable] | Mapping[Hashable, float]


@dataclasses.dataclass(frozen=True)
class OptionScores(_Result):
    """Per-label precision and recall (``None`` when the denominator is zero)."""

    precision: float | None
    recall: float | None
    support: int  # number of reference items with this label


@dataclasses.dataclass(frozen=True)
class AgreementSummary(_Result):
    """Judge-vs-reference agreement for one criterion.

    ``n`` counts complete pairs, ``n_excluded`` pairs dropped because either
    label was missing. ``adjacent`` and ``qwk`` are ``None`` without an order.
    """

    n: int
    n_excluded: int
    exact: float | None
    adjacent: float | None
    kappa: float | None
    qwk: float | None


def _pairs(pred: LabelSeq, gold: LabelSeq) -> tuple[list[Hashable], list[Hashable], int]:
    p, g = as_labels(pred, "pred"), as_labels(gold, "gold")
    check_same_length(p, g, "pred", "gold")
    kept = [(a, b) for a, b in zip(p, g) if a is not None and b is not None]
    return [a for a, _ in kept], [b for _, b in kept], len(p) - len(kept)


def _ranks(order: Order) -> dict[Hashable, int]:
    if isinstance(order, Mapping):
        values = list(order.values())
        if len(set(values)) != len(values):
            raise ValueError("order maps two labels to the same value")
        keys = sorted(order, key=order.__getitem__)
    else:
        if isinstance(order, (str, bytes)):
            raise TypeError("order must be a sequence of labels, not a single string")
        keys = list(order)
    if not keys:
        raise ValueError("order is empty")
    if len(set(keys)) != len(keys):
        raise ValueError("order contains duplicate labels")
    return {k: i for i, k in enumerate(keys)}


def _encode(labels: list[Hashable], index: Mapping[Hashable, int], name: str, what: str) -> list[int]:
    try:
        return [index[v] for v in labels]
    except KeyError as exc:
        raise ValueError(f"{name} contains label {exc.args[0]!r} that is not in {what}") from None


def _observed(*seqs: Sequence[Hashable]) -> list[Hashable]:
    seen = dict.fromkeys(v for s in seqs for v in s)
    try:
        return sorted(seen)  # type: ignore[type-var]
    except TypeError:  # mixed, unorderable label types: keep first appearance
        return list(seen)


def exact_accuracy(pred: LabelSeq, gold: LabelSeq) -> float | None:
    """Fraction of complete pairs with identical labels; ``None`` if no pairs."""
    p, g, _ = _pairs(pred, gold)
    if not p:
        return None
    return sum(a == b for a, b in zip(p, g)) / len(p)


def adjacent_accuracy(pred: LabelSeq, gold: LabelSeq, order: Order) -> float | None:
    """Fraction of complete pairs whose ranks in ``order`` differ by at most 1."""
    p, g, _ = _pairs(pred, gold)
    ranks = _ranks(order)
    rp, rg = _encode(p, ranks, "pred", "order"), _encode(g, ranks, "gold", "order")
    if not p:
        return None
    return float(np.mean(np.abs(np.subtract(rp, rg)) <= 1))


def cohen_kappa(pred: LabelSeq, gold: LabelSeq, labels: Sequence[Hashable] | None = None) -> float | None:
    """Cohen's kappa (scikit-learn).

    ``None`` when undefined: no complete pairs, or both raters used one and the
    same category (chance agreement is 1, so kappa is 0/0).
    """
    p, g, _ = _pairs(pred, gold)
    if len(set(p) | set(g)) < 2:
        return None
    from sklearn.metrics import cohen_kappa_score

    domain = list(labels) if labels is not None else _observed(g, p)
    index = {lab: i for i, lab in enumerate(domain)}
    # Integer codes keep sklearn away from mixed or unusual label types.
    cp, cg = _encode(p, index, "pred", "labels"), _encode(g, index, "gold", "labels")
    return float(cohen_kappa_score(cg, cp, labels=list(range(len(domain)))))


def quadratic_weighted_kappa(pred: LabelSeq, gold: LabelSeq, order: Order) -> float | None:
    """Quadratic weighted kappa on ranks in ``order`` (scikit-learn).

    Weights use rank distance over the whole ``order``, so unobserved middle
    categories still count. ``None`` when all complete pairs share one rank.
    """
    p, g, _ = _pairs(pred, gold)
    ranks = _ranks(order)
    rp, rg = _encode(p, ranks, "pred", "order"), _encode(g, ranks, "gold", "order")
    if len(set(rp) | set(rg)) < 2:
        return None
    from sklearn.metrics import cohen_kappa_score

    return float(cohen_kappa_score(rg, rp, labels=list(range(len(ranks))), weights="quadratic"))


def _correlation(x: NumSeq, y: NumSeq, method: Literal["spearman", "kendall"]) -> TestResult | None:
    a, b = paired_numeric(x, y, "x", "y")
    # Fewer than 3 pairs gives no usable p-value; constant input has no ranking.
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    from scipy import stats

    res = stats.spearmanr(a, b) if method == "spearman" else stats.kendalltau(a, b)
    return TestResult(float(res.statistic), float(res.pvalue), int(a.size))


def spearman(x: NumSeq, y: NumSeq) -> TestResult | None:
    """Spearman rank correlation (scipy); ``None`` if n < 3 or either side is constant."""
    return _correlation(x, y, "spearman")


def kendall(x: NumSeq, y: NumSeq) -> TestResult | None:
    """Kendall's tau-b (scipy); ``None`` if n < 3 or either side is constant."""
    return _correlation(x, y, "kendall")


def earth_movers_distance(scores_a: NumSeq, scores_b: NumSeq) -> float | None:
    """1-D Wasserstein distance between two score distributions (scipy).

    The samples are not paired and may differ in length; missing values are
    dropped from each side. ``None`` if either side has no values left.
    """
    a, b = as_numeric(scores_a, "scores_a"), as_numeric(scores_b, "scores_b")
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if a.size == 0 or b.size == 0:
        return None
    from scipy import stats

    return float(stats.wasserstein_distance(a, b))


def per_option_precision_recall(
    pred: LabelSeq, gold: LabelSeq, labels: Sequence[Hashable] | None = None
) -> dict[Hashable, OptionScores]:
    """Precision, recall and support per label (scikit-learn).

    ``labels`` defaults to every label seen in either input; labels outside a
    given ``labels`` still count as wrong answers for the listed ones. With no
    complete pairs every listed label gets ``OptionScores(None, None, 0)``.
    """
    p, g, _ = _pairs(pred, gold)
    domain = list(labels) if labels is not None else _observed(g, p)
    if not p:
        return {lab: OptionScores(None, None, 0) for lab in domain}
    from sklearn.metrics import precision_recall_fscore_support

    index = {lab: i for i, lab in enumerate(domain)}
    cp, cg = [index.get(v, -1) for v in p], [index.get(v, -1) for v in g]
    prec, rec, _, sup = precision_recall_fscore_support(
        cg, cp, labels=list(range(len(domain))), average=None, zero_division=np.nan
    )

    def opt(v: float) -> float | None:
        return None if np.isnan(v) else float(v)

    return {lab: OptionScores(opt(prec[i]), opt(rec[i]), int(sup[i])) for i, lab in enumerate(domain)}


def mean_bias(judge_scores: NumSeq, human_scores: NumSeq) -> float | None:
    """Mean of (judge - human) over complete pairs; ``None`` if there are none."""
    j, h = paired_numeric(judge_scores, human_scores, "judge_scores", "human_scores")
    return float(np.mean(j - h)) if j.size else None


def krippendorff_alpha(
    ratings: Sequence[Sequence[Any]] | npt.NDArray[Any],
    level: Literal["nominal", "ordinal", "interval"] = "nominal",
    order: Order | None = None,
) -> float | None:
    """Krippendorff's alpha for a judges x items table (``krippendorff`` package).

    Missing ratings are ``None``/NaN. Nominal accepts any hashable labels;
    ordinal ranks labels by ``order`` (or by numeric value if no order is
    given); interval needs numeric ratings. ``None`` when undefined: no item
    rated by at least two judges, or only one distinct value among those.
    """
    if level not in ("nominal", "ordinal", "interval"):
        raise ValueError(f"level must be 'nominal', 'ordinal' or 'interval', got {level!r}")
    if isinstance(ratings, np.ndarray) and ratings.ndim != 2:
        raise ValueError(f"ratings must be two-dimensional (judges x items), got shape {ratings.shape}")
    raw = ratings.tolist() if isinstance(ratings, np.ndarray) else list(ratings)
    if not raw:
        raise ValueError("ratings is empty")
    if len(raw) < 2:
        raise ValueError(f"ratings needs at least two judges (rows), got {len(raw)}")
    rows = [as_labels(r, f"ratings[{i}]") for i, r in enumerate(raw)]
    if len({len(r) for r in rows}) != 1:
        raise ValueError("ratings rows (judges) have different lengths")

    domain: npt.NDArray[np.float64] | None = None  # package default: observed values
    if level == "interval" or (level == "ordinal" and order is None):
        data = np.vstack([as_numeric(r, "ratings") for r in rows])  # type: ignore[arg-type]
    else:
        if level == "ordinal":
            index = _ranks(order)  # type: ignore[arg-type]
        else:
            index = {v: i for i, v in enumerate(dict.fromkeys(v for r in rows for v in r if v is not None))}
        data = np.full((len(rows), len(rows[0])), np.nan)
        for i, row in enumerate(rows):
            present = [j for j, v in enumerate(row) if v is not None]
            data[i, present] = _encode([row[j] for j in present], index, f"ratings[{i}]", "order")
        domain = np.arange(len(index), dtype=float)

    pairable = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    if np.unique(pairable[~np.isnan(pairable)]).size < 2:
        return None
    import krippendorff

    return float(krippendorff.alpha(reliability_data=data, value_domain=domain, level_of_measurement=level))


def agreement_summary(pred: LabelSeq, gold: LabelSeq, order: Order | None = None) -> AgreementSummary:
    """All agreement statistics for one criterion in one call."""
    p, _, n_excluded = _pairs(pred, gold)
    return AgreementSummary(
        n=len(p),
        n_excluded=n_excluded,
        exact=exact_accuracy(pred, gold),
        adjacent=adjacent_accuracy(pred, gold, order) if order is not None else None,
        kappa=cohen_kappa(pred, gold),
        qwk=quadratic_weighted_kappa(pred, gold, order) if order is not None else None,
    )
