"""Base vs trained on the same prompts: the numbers behind a run's summary.

:func:`compare_paired` compares two aligned lists of per-prompt values (the report split); :func:`selection_table`
compares every monitored checkpoint with the base model on the selection split, with the Holm adjustment across
the checkpoints looked at.

The tie rule, everywhere: two identical completions are a tie whatever their scores (a judge's float noise,
such as logprob verdicts differing by 1e-7 between batches, is not an effect), and scores within
``stats.TIE_TOLERANCE`` (1e-9) of each other are a tie. Differences are taken in exact arithmetic
(``stats.exact_differences``) before anything is counted, ranked or resampled.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...evaluation import interval_dict as _interval
from ...io.rows import numbered_jsonl_rows

__all__ = ["PERFECT", "SIGNIFICANT_P", "best_record", "compare_paired", "load_selection_scores", "passed_over",
           "pool_seeds", "score_value", "selection_table", "tie_identical"]

PERFECT = 1.0 - 1e-9


def score_value(x: Any, metric: str = "score") -> float | None:
    """A per-prompt value as float or None (unscored).

    Numbers (None/NaN = unscored) are taken as they are. A ``ScoreResult`` gives its ``metric`` attribute
    (``score``, ``expected_score`` or ``raw_score``; the plain score when that one is missing). A reward record
    (``.result``, ``.reward``, ``.guard``) gives its result's value, or the reward a guard gave it.
    """
    if x is None or isinstance(x, numbers.Real):
        return _finite(x)
    if hasattr(x, "verdicts"):  # ScoreResult
        value = getattr(x, metric, None)
        return _finite(x.score if value is None else value)
    if hasattr(x, "result"):  # RewardRecord
        if x.result is not None:
            return score_value(x.result, metric)
        return _finite(x.reward) if getattr(x, "guard", None) else None
    raise TypeError(f"cannot read a score from a {type(x).__name__}")


def best_record(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The checkpoint to ship: the highest selection mean (the earlier step wins a tie) among the checkpoints
    (step > 0) the reward-hacking watch did not flag; among all of them when the watch flagged every one.

    A flagged checkpoint scored high on the selection split by a behaviour the watch names (completions that
    repeat themselves, copied answers, a collapse in length, ...), so its mean is not evidence of a better
    policy. The monitor's ``best/``, the summary's selection table and the monitor plot all use this rule.
    """
    scored = _scored_checkpoints(records)
    pool = [r for r in scored if not r.get("watch")] or scored
    return dict(max(pool, key=_rank)) if pool else None


def passed_over(records: Sequence[Mapping[str, Any]]) -> list[int]:
    """The flagged checkpoints that :func:`best_record` did not pick although they ranked above its pick."""
    best = best_record(records)
    if best is None:
        return []
    return [int(r["step"]) for r in _scored_checkpoints(records) if r.get("watch") and _rank(r) > _rank(best)]


def _scored_checkpoints(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in records if int(r["step"]) > 0 and r.get("mean") is not None]


def _rank(record: Mapping[str, Any]) -> tuple[float, int]:
    return record["mean"], -int(record["step"])  # the higher mean; the earlier step wins a tie


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def tie_identical(base: Sequence[float | None], best: Sequence[float | None],
                  base_texts: Sequence[str] | None, best_texts: Sequence[str] | None
                  ) -> tuple[list[float | None], int]:
    """``best`` with the base's value wherever both completions are the same text (and both were scored),
    and how many such pairs there were. Without texts, ``best`` is returned unchanged."""
    best = list(best)
    if base_texts is None or best_texts is None:
        return best, 0
    if not len(base_texts) == len(best_texts) == len(best):
        raise ValueError(f"completions and scores differ in length ({len(base_texts)}, {len(best_texts)}, "
                         f"{len(best)})")
    same = 0
    for i, (x, t, u) in enumerate(zip(base, base_texts, best_texts)):
        if t == u and x is not None and best[i] is not None:
            best[i], same = x, same + 1
    return best, same


def compare_paired(base: Sequence[Any], best: Sequence[Any], *, metric: str = "score",
                   base_lengths: Sequence[float | None] | None = None,
                   best_lengths: Sequence[float | None] | None = None,
                   base_texts: Sequence[str] | None = None, best_texts: Sequence[str] | None = None,
                   n_resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Base vs best on the same prompts: aligned lists of numbers (None = unscored), ``ScoreResult`` s or
    reward records (``.result``, ``.reward``, ``.guard``): their ``metric`` value is compared (the plain
    score where that is missing; a guarded record's reward). With ``base_texts``/``best_texts`` (the
    completions), identical completions are ties (:func:`tie_identical`).

    Returns a JSON-able dict: ``n`` prompts, ``pairs`` (both scored), per system ``mean`` with a bootstrap
    interval, ``perfect`` (plain score 1; for numbers, value 1) and ``unscored`` counts and ``mean_length``;
    ``difference`` (best - base: paired bootstrap interval of the mean exact difference over complete pairs),
    ``wilcoxon`` (statistic, pvalue, n, the variant that ran and its description), ``improved``/``worse``/
    ``tied`` pair counts from the exact differences, ``identical`` (pairs with the same completion).
    Undefined values are None.
    """
    from ...stats import bootstrap_ci, exact_differences, paired_bootstrap_ci, wilcoxon_signed_rank

    base, best = list(base), list(best)
    a = [score_value(x, metric) for x in base]
    b = [score_value(x, metric) for x in best]
    if len(a) != len(b):
        raise ValueError(f"base and best score lists differ in length ({len(a)} != {len(b)}): they must hold the "
                         "same prompts in the same order")
    if not a:
        raise ValueError("no scores to compare")
    b, identical = tie_identical(a, b, base_texts, best_texts)

    def system(raw: list[Any], values: list[float | None], lengths: Sequence[float | None] | None
               ) -> dict[str, Any]:
        kept = [v for v in values if v is not None]
        plain = [score_value(x, "score") for x in raw]
        ci = bootstrap_ci(kept, n_resamples=n_resamples, confidence=confidence, seed=seed) if kept else None
        return {"mean": _mean(values), "ci": None if ci is None else _interval(ci),
                "perfect": sum(1 for v in plain if v is not None and v >= PERFECT), "scored": len(kept),
                "unscored": len(values) - len(kept),
                "mean_length": None if lengths is None else _mean([None if x is None else float(x) for x in lengths])}

    diffs = [d for d in exact_differences(b, a).tolist() if not math.isnan(d)]
    out: dict[str, Any] = {"n": len(a), "pairs": len(diffs), "base": system(base, a, base_lengths),
                           "best": system(best, b, best_lengths), "difference": None, "wilcoxon": None,
                           "improved": sum(1 for d in diffs if d > 0), "worse": sum(1 for d in diffs if d < 0),
                           "tied": sum(1 for d in diffs if d == 0), "identical": identical,
                           "confidence": confidence}
    if diffs:
        pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
        xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
        out["difference"] = _interval(paired_bootstrap_ci(ys, xs, n_resamples=n_resamples, confidence=confidence,
                                                          seed=seed))
        test = wilcoxon_signed_rank(ys, xs)
        out["wilcoxon"] = None if test is None else {
            "statistic": test.statistic, "pvalue": test.pvalue, "n": test.n, "method": test.method,
            "zeros": test.zeros, "tied_ranks": test.tied_ranks, "variant": test.describe()}
    return out


def load_selection_scores(run_dir: str | Path, records: Sequence[Mapping[str, Any]]
                          ) -> dict[int, dict[str, tuple[float | None, str | None]]]:
    """Per monitored step, ``{prompt id: (value, completion)}`` read from the record's ``completions`` file
    (relative to ``run_dir``; rows with ``id``, ``value`` and ``completion``). Steps whose file is missing
    are left out."""
    out: dict[int, dict[str, tuple[float | None, str | None]]] = {}
    for rec in records:
        name = rec.get("completions")
        path = Path(run_dir) / name if name else None
        if path is None or not path.is_file():
            continue
        values: dict[str, tuple[float | None, str | None]] = {}
        for n, row in numbered_jsonl_rows(path, torn_ok=True):  # a torn last line after a crash is skipped
            values[str(row.get("id", n - 1))] = (score_value(row.get("value", row.get("score"))),
                                                 row.get("completion"))
        out[int(rec["step"])] = values
    return out


def _paired_pvalue(base: Mapping[str, tuple[float | None, str | None]],
                   mine: Mapping[str, tuple[float | None, str | None]]) -> float | None:
    from ...stats import wilcoxon_signed_rank

    common = [k for k in base if k in mine]
    if not common:
        return None
    a = [base[k][0] for k in common]
    b, _ = tie_identical(a, [mine[k][0] for k in common], [base[k][1] or "" for k in common],
                         [mine[k][1] or "" for k in common])
    test = wilcoxon_signed_rank(b, a)
    return None if test is None else test.pvalue


def selection_table(records: Sequence[Mapping[str, Any]],
                    scores: Mapping[int, Mapping[str, tuple[float | None, str | None]]] | None = None,
                    ) -> dict[str, Any]:
    """Every checkpoint looked at (step > 0) against the base (step 0) on the selection split.

    ``scores``: per step ``{prompt id: (value, completion)}`` (:func:`load_selection_scores`); with them each
    checkpoint gets a paired Wilcoxon p-value against the base (the tie rule applies) and the Holm adjustment
    across all checkpoints looked at. Returns ``{"rows": [...], "looked_at": m, "best_step": s, "base": record
    or None}``.
    """
    from ...stats import holm_adjust

    scores = scores or {}
    base = next((r for r in records if int(r["step"]) == 0), None)
    checkpoints = [r for r in records if int(r["step"]) > 0]
    best = best_record(checkpoints)
    base_scores = scores.get(0)
    rows = []
    for rec in checkpoints:
        step = int(rec["step"])
        mine = scores.get(step)
        pvalue = _paired_pvalue(base_scores, mine) if base_scores and mine else None
        delta = None if rec.get("mean") is None or base is None or base.get("mean") is None \
            else rec["mean"] - base["mean"]
        rows.append({"step": step, "mean": rec.get("mean"), "ci_low": rec.get("ci_low"),
                     "ci_high": rec.get("ci_high"), "delta": delta, "perfect": rec.get("perfect"),
                     "n": rec.get("n"), "unscored": rec.get("unscored"), "mean_length": record_length(rec),
                     "judge_cost": rec.get("judge_cost"), "pvalue": pvalue, "pvalue_holm": None,
                     "best": best is not None and step == int(best["step"]), "flagged": bool(rec.get("watch"))})
    tested = [i for i, r in enumerate(rows) if r["pvalue"] is not None]
    if tested:
        for i, p in zip(tested, holm_adjust([rows[i]["pvalue"] for i in tested])):
            rows[i]["pvalue_holm"] = p
    return {"rows": rows, "looked_at": len(checkpoints), "tested": len(tested),
            "best_step": None if best is None else int(best["step"]), "base": None if base is None else dict(base)}


def record_length(rec: Mapping[str, Any]) -> float | None:
    """A monitor record's mean completion length in tokens (None when it has none)."""
    value = rec.get("mean_length_tokens", rec.get("mean_length"))
    return None if value is None else float(value)


SIGNIFICANT_P = 0.01  # a seed counts as significant with Wilcoxon p below this and its interval above 0


def pool_seeds(estimates: Sequence[float | None], *, confidence: float = 0.95) -> dict[str, Any]:
    """The recipe's gain pooled over seeds: each seed's mean paired difference (best - base on the report
    split) is one replicate of the whole recipe, so the seeds are the units.

    Returns ``n`` (seeds with an estimate), ``mean`` (the mean of the seed means), ``sd`` (their standard
    deviation, ddof 1), the Student t ``ci`` (``estimate``, ``low``, ``high``: mean +- t(1 - (1 - confidence)
    / 2, n - 1) x sd / sqrt(n)), ``pvalue`` (the two-sided one-sample t-test of mean 0), ``min`` and ``max``.
    Undefined values (fewer than two seeds; zero spread gives a zero-width interval and p None) are None.
    The report prompts are the same for every seed, so the interval is about seed-to-seed variation of the
    recipe on these prompts, not about other prompts."""
    kept = [float(x) for x in estimates if x is not None]
    n = len(kept)
    out: dict[str, Any] = {"n": n, "mean": None, "sd": None, "ci": None, "pvalue": None,
                           "min": min(kept) if kept else None, "max": max(kept) if kept else None,
                           "confidence": confidence, "method": "student t over seed means"}
    if not kept:
        return out
    mean = math.fsum(kept) / n
    out["mean"] = mean
    out["ci"] = {"estimate": mean, "low": None, "high": None, "n": n, "confidence": confidence}
    if n < 2:
        return out
    from scipy import stats as sps

    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in kept) / (n - 1))
    half = float(sps.t.ppf(1 - (1 - confidence) / 2, n - 1)) * sd / math.sqrt(n)
    out["sd"] = sd
    out["ci"].update(low=mean - half, high=mean + half)
    if sd > 0:
        out["pvalue"] = float(2 * sps.t.sf(abs(mean) / (sd / math.sqrt(n)), n - 1))
    return out
