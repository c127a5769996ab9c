"""Comparing runs on the same items: two judges, two prompts, or a policy before and after training.

Items are paired by id (or by dataset row). For scores: mean difference with a paired (cluster)
bootstrap interval, a paired permutation test, Wilcoxon signed-rank, paired Cohen's d, and an exact
McNemar test on "all-pass" (score 1). When both runs carry human labels, per-decision correctness is
compared too (exact McNemar: decisions only A got right vs only B got right). ``compare_many``
compares one baseline with several runs (checkpoints) and Holm-adjusts the p-values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import stats
from .run_metrics import RunData, load_run

__all__ = ["compare_many", "compare_runs", "compare_scores"]

_EPS = 1e-9


def _as_run(run: RunData | str | Path) -> RunData:
    return run if isinstance(run, RunData) else load_run(run)


def _index(run: RunData, by: str) -> dict[Any, Mapping[str, Any]]:
    out = {}
    for r in run.records:
        key = r.get(by)
        if key is None:
            raise ValueError(f"a record has no {by!r}; pair runs by 'row' instead (by='row')")
        out[key] = r
    return out


def compare_scores(a: Sequence[float | None], b: Sequence[float | None], *, clusters: Sequence[str] | None = None,
                   n_resamples: int = 2000, permutations: int = 9999, seed: int = 0) -> dict[str, Any]:
    """Paired statistics for ``a - b`` (None entries drop their pair)."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    perm = stats.paired_permutation_test(a, b, n_resamples=permutations, seed=seed) if pairs else None
    wil = stats.wilcoxon_signed_rank(a, b) if pairs else None
    a_pass = [None if x is None else float(x >= 1 - _EPS) for x in a]
    b_pass = [None if y is None else float(y >= 1 - _EPS) for y in b]
    return {
        "n": len(pairs),
        "mean_a": sum(x for x, _ in pairs) / len(pairs) if pairs else None,
        "mean_b": sum(y for _, y in pairs) / len(pairs) if pairs else None,
        "difference": stats.paired_bootstrap_ci(a, b, clusters=clusters, n_resamples=n_resamples,
                                                seed=seed).to_dict() if pairs else None,
        "permutation": None if perm is None else perm.to_dict(),
        "wilcoxon": None if wil is None else wil.to_dict(),
        "cohens_d": stats.cohens_d(a, b, paired=True) if pairs else None,
        "all_pass_mcnemar": stats.mcnemar_exact(a_pass, b_pass).to_dict() if pairs else None,
    }


def _correctness(ra: Mapping[str, Any], rb: Mapping[str, Any]) -> list[tuple[float | None, float | None]]:
    labels = ra.get("labels") or {}
    va = {v["criterion"]: v for v in ra["result"]["verdicts"]}
    vb = {v["criterion"]: v for v in rb["result"]["verdicts"]}

    def ok(v: Mapping[str, Any] | None, human: str) -> float | None:
        return None if v is None or v.get("error") else float(v.get("label") == human)

    return [(ok(va.get(c), h), ok(vb.get(c), h)) for c, h in labels.items()]


def compare_runs(run_a: RunData | str | Path, run_b: RunData | str | Path, *, by: str = "id",
                 n_resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Compare run A with run B on the items they share (statistics are for A - B)."""
    a, b = _as_run(run_a), _as_run(run_b)
    ia, ib = _index(a, by), _index(b, by)
    shared = [k for k in ia if k in ib]
    grouped = any(ia[k].get("group") is not None for k in shared)
    clusters = [str(ia[k].get("group") if ia[k].get("group") is not None else k) for k in shared]
    out: dict[str, Any] = {
        "paired_by": by, "n_shared": len(shared), "only_a": len(ia) - len(shared), "only_b": len(ib) - len(shared),
        "scores": compare_scores([ia[k].get("score") for k in shared], [ib[k].get("score") for k in shared],
                                 clusters=clusters if grouped else None, n_resamples=n_resamples, seed=seed),
        "accuracy": None,
    }
    decisions = [(x, y, cl) for k, cl in zip(shared, clusters, strict=True) for x, y in _correctness(ia[k], ib[k])]
    if decisions:
        xs, ys = [x for x, _, _ in decisions], [y for _, y, _ in decisions]
        cl = [c for *_, c in decisions]  # decisions nest in items (or groups): resample those
        out["accuracy"] = {
            "n_decisions": len(decisions),
            "difference": stats.paired_bootstrap_ci(xs, ys, clusters=cl, n_resamples=n_resamples, seed=seed).to_dict(),
            "mcnemar": stats.mcnemar_exact(xs, ys).to_dict(),
        }
    return out


def compare_many(baseline: RunData | str | Path, others: Mapping[str, RunData | str | Path], *, by: str = "id",
                 n_resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Each run in ``others`` against ``baseline`` (statistics are for other - baseline), with Holm-adjusted
    permutation and Wilcoxon p-values across the comparisons."""
    base = _as_run(baseline)
    results = {name: compare_runs(run, base, by=by, n_resamples=n_resamples, seed=seed)
               for name, run in others.items()}
    for test in ("permutation", "wilcoxon"):
        named = [(n, r["scores"][test]) for n, r in results.items() if r["scores"][test] is not None]
        if named:
            adjusted = stats.holm_adjust([t["pvalue"] for _, t in named])
            for (name, _), p in zip(named, adjusted, strict=True):
                results[name]["scores"][f"{test}_pvalue_holm"] = p
    return {"baseline": str(baseline) if not isinstance(baseline, RunData) else "baseline", "comparisons": results}
