"""The card's figures, from the judgings: arithmetic only (numpy, and :mod:`rubric_reward.stats` for kappa and the
bootstrap intervals). No judge is called here.

Per criterion (pooled over the rows whose rubric has it):

* consistency: the variance of the verdict's value over the K judgings, pooled over responses, with Autorubric's
  band; and ``variance_same_order``, taken only among judgings that showed the options in the same order (for a
  position-biased criterion, whose order effect is not to be counted as noise too);
* position: the ``lean`` toward the option shown first, on the same response (how much more often an option is
  chosen when shown first than when shown later; every judging reshuffles the options), with a bootstrap interval
  over prompts; the share of votes that took the first-shown option; and the flip rate under order alone
  (disagreement between two judgings that showed different orders, less disagreement between two that showed
  the same);
* failures and abstentions, as shares of the verdicts;
* agreement with the gold labels: accuracy and Cohen's kappa of the consensus verdict (the label most judgings
  gave: agreement measures bias, consistency measures noise), with bootstrap intervals over prompts, and the
  accuracy of one judging.

Per rubric, the reward as GRPO sees it: test-retest reliability (ICC(1) of the reward over the judgings), the
share of the within-group reward variance that is the judge's noise (responses judged again, against the spread
of a group's responses), the expected share of flat groups, and what 1,000 rewards cost.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...results import ScoreResult
from ...rubric import Criterion
from .config import QualifyConfig, band
from .judging import Judgings, Shown

__all__ = ["Verdicts", "agreement", "consistency", "cost", "failures", "pooled_agreement", "position",
           "reliability", "verdicts_of"]

_EPS = 1e-9


@dataclass
class Verdicts:
    """One criterion's verdicts: per row judged (``rows``), per judging, its label (None: failed), value (None:
    failed or abstained) and the votes' shown orders."""

    criterion: Criterion
    rows: list[int] = field(default_factory=list)
    labels: list[list[str | None]] = field(default_factory=list)
    values: list[list[float | None]] = field(default_factory=list)
    shown: list[list[Shown]] = field(default_factory=list)
    failed: int = 0
    abstained: int = 0
    screened: int = 0

    @property
    def total(self) -> int:
        return sum(len(x) for x in self.labels)


def verdicts_of(j: Judgings, name: str) -> Verdicts | None:
    """The verdicts on criterion ``name`` (None when no row's rubric judges it). A response a guard screened in a
    judging was not judged there; it counts in ``screened``."""
    out: Verdicts | None = None
    for i, row in enumerate(j.rows):
        try:
            c = row.rubric[name]
        except KeyError:
            continue
        if not c.is_judged:
            continue
        out = out or Verdicts(c)
        labels, values, shown = [], [], []
        for k in range(j.repeats):
            result = j.results[k][i]
            if result.metadata.get("screened"):
                out.screened += 1
                continue
            v = result.verdict(name)
            labels.append(None if v.error is not None else v.label)
            values.append(None if v.error is not None or v.abstained else v.value)
            shown.append(j.shown[k][i].get(name, ()))
            out.failed += v.error is not None
            out.abstained += v.error is None and v.abstained
        if labels:
            out.rows.append(i)
            out.labels.append(labels)
            out.values.append(values)
            out.shown.append(shown)
    return out


def _interval(values: Sequence[float], statistic: Callable[..., Any], clusters: Sequence[Any] | None,
              config: QualifyConfig) -> dict[str, float | None]:
    from ...stats import bootstrap_ci

    iv = bootstrap_ci(values, statistic, n_resamples=config.bootstrap_resamples, confidence=config.confidence,
                      seed=config.seed, clusters=clusters)
    return {"estimate": iv.estimate, "low": iv.low, "high": iv.high}


def failures(v: Verdicts) -> dict[str, Any]:
    total = v.total
    ok = total - v.failed
    return {"verdicts": total, "failure_rate": v.failed / total if total else None,
            "abstention_rate": v.abstained / ok if ok else None, "screened": v.screened}


def consistency(v: Verdicts) -> dict[str, Any]:
    """The variance of the verdict values over the judgings (pooled over responses), and among the judgings that
    showed the same option order."""
    ss_within = df_within = ss_all = df_all = 0.0
    for values, shown in zip(v.values, v.shown, strict=True):
        strata: dict[Any, list[float]] = {}
        kept = [(x, s) for x, s in zip(values, shown, strict=True) if x is not None]
        for x, s in kept:
            key = tuple(o for _, o in s) if s and all(o is not None for _, o in s) else None
            strata.setdefault(key, []).append(x)
        xs = [x for x, _ in kept]
        if len(xs) > 1:
            ss_all += float(np.sum((np.array(xs) - np.mean(xs)) ** 2))
            df_all += len(xs) - 1
        for members in strata.values():
            if len(members) > 1:
                ss_within += float(np.sum((np.array(members) - np.mean(members)) ** 2))
                df_within += len(members) - 1
    variance = ss_all / df_all if df_all else None
    return {"variance": variance, "variance_same_order": ss_within / df_within if df_within else None,
            "band": band(variance)}


def position(v: Verdicts, j: Judgings, config: QualifyConfig) -> dict[str, Any]:
    """The lean toward the option shown first, on the same response: for each response and option, how much more
    often that option is chosen when shown first than when shown later, averaged (1: the judge takes whatever is
    shown first; 0 for any judge whose verdict does not depend on the order), with an interval over prompts; the
    share of votes that took the first-shown option; and the order flip rate."""
    options = [o.label for o in v.criterion.options]
    leans, clusters = [], []
    votes = firsts = 0
    for row, shown in zip(v.rows, v.shown, strict=True):
        seen = [(label, order) for s in shown for label, order in s if order is not None and label in options]
        votes += len(seen)
        firsts += sum(label == order[0] for label, order in seen)
        per_option = []
        for x in options:
            first = [label == x for label, order in seen if order[0] == x]
            later = [label == x for label, order in seen if order[0] != x]
            if first and later:
                per_option.append(float(np.mean(first)) - float(np.mean(later)))
        if per_option:
            leans.append(float(np.mean(per_option)))
            clusters.append(j.rows[row].group)
    out: dict[str, Any] = {"votes": votes, "first_shown_rate": firsts / votes if votes else None,
                           "expected_first_rate": 1.0 / len(options), "responses": len(leans)}
    out["lean"] = _interval(leans, np.mean, clusters, config) if leans else None
    out["flip_rate"] = _flip_rate(v)
    return out


def _flip_rate(v: Verdicts) -> float | None:
    """P(two judgings disagree | their orders differ) - P(they disagree | same order), over pairs of judgings."""
    counts = {True: [0, 0], False: [0, 0]}  # same order -> [disagreements, pairs]
    for labels, shown in zip(v.labels, v.shown, strict=True):
        keyed = [(lab, tuple(o for _, o in s)) for lab, s in zip(labels, shown, strict=True)
                 if lab is not None and s and all(o is not None for _, o in s)]
        for a in range(len(keyed)):
            for b in range(a + 1, len(keyed)):
                same = keyed[a][1] == keyed[b][1]
                counts[same][0] += keyed[a][0] != keyed[b][0]
                counts[same][1] += 1
    if not counts[True][1] or not counts[False][1]:
        return None
    return counts[False][0] / counts[False][1] - counts[True][0] / counts[True][1]


def _consensus(labels: Sequence[str | None]) -> str | None:
    """The label most judgings gave (None: every judging failed, or a tie at the top)."""
    tally = Counter(lab for lab in labels if lab is not None).most_common(2)
    if not tally or (len(tally) > 1 and tally[0][1] == tally[1][1]):
        return None
    return tally[0][0]


def _kappa_codes(p: np.ndarray, g: np.ndarray, n_labels: int) -> float:
    """Cohen's kappa of integer-coded labels (the formula of :func:`rubric_reward.stats.cohen_kappa`, in numpy: the
    bootstrap evaluates it a thousand times); where it is undefined (both raters used one label), 1 when they
    agree, else 0."""
    cm = np.bincount(p * n_labels + g, minlength=n_labels * n_labels).reshape(n_labels, n_labels) / len(p)
    po = float(np.trace(cm))
    pe = float(cm.sum(axis=1) @ cm.sum(axis=0))
    if pe >= 1.0 - _EPS:
        return 1.0 if po >= 1.0 - _EPS else 0.0
    return (po - pe) / (1.0 - pe)


def _pairs(v: Verdicts, j: Judgings) -> tuple[list[str], list[str], list[str], list[float], int]:
    """(consensus, gold, group) per row with a gold label and a consensus; per-judging correctness; no-consensus."""
    pred, gold, groups, single = [], [], [], []
    no_consensus = 0
    for row, labels in zip(v.rows, v.labels, strict=True):
        want = j.rows[row].gold.get(v.criterion.name)
        if want is None:
            continue
        single.extend(float(lab == want) for lab in labels if lab is not None)
        got = _consensus(labels)
        if got is None:
            no_consensus += 1
            continue
        pred.append(got)
        gold.append(want)
        groups.append(j.rows[row].group)
    return pred, gold, groups, single, no_consensus


def agreement(v: Verdicts, j: Judgings, config: QualifyConfig) -> dict[str, Any] | None:
    """Accuracy and kappa of the consensus verdict against the gold labels, with intervals (None: no gold)."""
    pred, gold, groups, single, no_consensus = _pairs(v, j)
    if not pred:
        return None if not no_consensus else {"n": 0, "no_consensus": no_consensus}
    return _agreement(pred, gold, groups, list(v.criterion.labels), config) | {
        "accuracy_single": float(np.mean(single)) if single else None, "no_consensus": no_consensus}


def _agreement(pred: list[str], gold: list[str], groups: list[str], labels: list[str],
               config: QualifyConfig) -> dict[str, Any]:
    from ...stats import cohen_kappa, exact_accuracy

    code = {lab: n for n, lab in enumerate(dict.fromkeys([*labels, *pred, *gold]))}
    p, g = np.array([code[x] for x in pred]), np.array([code[x] for x in gold])
    index = np.arange(len(pred), dtype=float)

    def acc(idx: Any) -> float:
        take = np.asarray(idx, dtype=int)
        return float(np.mean(p[take] == g[take]))

    def kappa(idx: Any) -> float:
        take = np.asarray(idx, dtype=int)
        return _kappa_codes(p[take], g[take], len(code))

    defined = cohen_kappa(pred, gold, labels=labels) is not None
    wrong = [x for x, y in zip(pred, gold, strict=True) if x != y]
    false_met = sum(x == "MET" for x in wrong) / len(wrong) if wrong and "MET" in labels else None
    return {"n": len(pred), "accuracy": exact_accuracy(pred, gold), "false_met_share": false_met,
            "accuracy_ci": _interval(index, acc, groups, config),
            "kappa": cohen_kappa(pred, gold, labels=labels) if defined else None,
            "kappa_ci": _interval(index, kappa, groups, config) if defined else None}


def pooled_agreement(tables: Sequence[tuple[Verdicts, Criterion]], j: Judgings,
                     config: QualifyConfig) -> dict[str, Any] | None:
    """Agreement pooled over several criteria (the positive-weight ones, or the negative-weight ones): every
    (response, criterion) pair with a gold label and a consensus, as one table of labels."""
    pred, gold, groups = [], [], []
    labels: list[str] = []
    for v, c in tables:
        p, g, gr, _, _ = _pairs(v, j)
        pred += p
        gold += g
        groups += gr
        labels += [x for x in c.labels if x not in labels]
    if not pred:
        return None
    return _agreement(pred, gold, groups, labels, config)


# ---------------------------------------------------------------------------- the reward


def _reward_matrix(j: Judgings, rescore: Callable[[int, ScoreResult], float | None] | None
                   ) -> tuple[np.ndarray, list[str]]:
    """Rewards as a (rows x judgings) array (NaN: unscored), and each row's group."""
    out = np.full((len(j.rows), j.repeats), np.nan)
    for k in range(j.repeats):
        for i, result in enumerate(j.results[k]):
            value = rescore(i, result) if rescore is not None else result.score
            if value is not None and math.isfinite(value):
                out[i, k] = value
    return out, [r.group for r in j.rows]


def _icc(m: np.ndarray) -> float | None:
    """ICC(1) of a complete (responses x judgings) matrix: the share of the reward's variance between responses."""
    n, k = m.shape
    if n < 2 or k < 2:
        return None
    means = m.mean(axis=1)
    msb = k * float(np.sum((means - m.mean()) ** 2)) / (n - 1)
    msw = float(np.sum((m - means[:, None]) ** 2)) / (n * (k - 1))
    if msw <= _EPS:
        return 1.0  # every judging of every response agrees
    return (msb - msw) / (msb + (k - 1) * msw)


def _group_sums(m: np.ndarray, groups: Sequence[str]) -> np.ndarray:
    """Per group of at least two fully judged responses: (noise SS, noise df, total SS, total df)."""
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        if not np.isnan(m[i]).any():
            members.setdefault(g, []).append(i)
    rows = []
    k = m.shape[1]
    for idx in members.values():
        if len(idx) < 2:
            continue
        block = m[idx]
        noise = float(np.sum((block - block.mean(axis=1, keepdims=True)) ** 2))
        total = float(np.sum((block - block.mean()) ** 2))
        rows.append((noise, len(idx) * (k - 1), total, len(idx) * k - 1))
    return np.array(rows, dtype=float).reshape(-1, 4)


def _noise_share(sums: np.ndarray) -> float | None:
    """The noise variance over the within-group variance, pooled over groups; at most 1 (an estimate past 1 is
    sampling error around "all of it")."""
    if not len(sums) or sums[:, 2].sum() <= _EPS:
        return None
    return min(1.0, float((sums[:, 0].sum() / sums[:, 1].sum()) / (sums[:, 2].sum() / sums[:, 3].sum())))


def _flat_share(m: np.ndarray, groups: Sequence[str]) -> float | None:
    """The expected share of groups whose rewards do not differ in one judging (GRPO learns nothing there)."""
    shares = []
    for k in range(m.shape[1]):
        by: dict[str, list[float]] = {}
        for i, g in enumerate(groups):
            if not np.isnan(m[i, k]):
                by.setdefault(g, []).append(float(m[i, k]))
        sized = [x for x in by.values() if len(x) > 1]
        if sized:
            shares.append(sum(max(x) - min(x) <= _EPS for x in sized) / len(sized))
    return float(np.mean(shares)) if shares else None


def reliability(j: Judgings, config: QualifyConfig,
                rescore: Callable[[int, ScoreResult], float | None] | None = None) -> dict[str, Any]:
    """The reward's reliability for GRPO (see the module docstring); ``rescore(i, result)`` re-reads a result
    (the qualified rubric's score of the same verdicts), default its score."""
    m, groups = _reward_matrix(j, rescore)
    complete = ~np.isnan(m).any(axis=1)
    full, full_groups = m[complete], [g for g, ok in zip(groups, complete, strict=True) if ok]
    out: dict[str, Any] = {"responses": len(j.rows), "unscored_rate": float(np.isnan(m).mean()),
                           "mean_reward": float(np.nanmean(m)) if (~np.isnan(m)).any() else None}
    icc = _icc(full)
    out["test_retest"] = None if icc is None else _interval(
        np.arange(len(full), dtype=float), lambda idx: _icc(full[np.asarray(idx, dtype=int)]),
        full_groups, config) | {"estimate": icc}
    sums = _group_sums(m, groups)
    share = _noise_share(sums)
    out["groups"] = len(sums)
    out["noise_share"] = None if share is None else _interval(
        np.arange(len(sums), dtype=float), lambda idx: _noise_share(sums[np.asarray(idx, dtype=int)]) or 0.0,
        None, config) | {"estimate": share}
    out["flat_groups"] = _flat_share(m, groups)
    return out


def cost(j: Judgings) -> dict[str, Any]:
    """Judge calls, tokens, cost and latency per 1,000 rewards (one reward: one response judged once)."""
    calls = tokens = spend = 0.0
    latencies: list[float] = []
    for per_row in j.results:
        for result in per_row:
            for call in result.calls:
                if call.cached:
                    continue
                calls += call.share
                tokens += call.usage.total_tokens * call.share
                spend += call.cost
                latencies.append(call.latency_s)
    rewards = len(j.rows) * j.repeats
    per = 1000.0 / rewards
    return {"rewards": rewards, "calls_per_1000": calls * per, "tokens_per_1000": tokens * per,
            "cost_per_1000": spend * per, "seconds_per_1000": j.seconds * per,
            "latency_p50_s": float(np.quantile(latencies, 0.5)) if latencies else None,
            "latency_p95_s": float(np.quantile(latencies, 0.95)) if latencies else None}
