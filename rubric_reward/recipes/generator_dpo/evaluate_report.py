"""Statistics and outputs of ``eval-generator``: agreement and Spearman with bootstrap intervals, McNemar
against the reference generator, the markdown table and the plot."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...evaluation import ci_text, fmt, interval_dict

__all__ = ["mcnemar_vs_reference", "pairwise_stats", "plot", "pointwise_stats", "render_table"]


def pairwise_stats(rows: list[dict[str, Any]], config: Any) -> dict[str, Any]:
    import numpy as np

    from ...stats import bootstrap_ci

    decided = [r for r in rows if r.get("correct") is not None]
    out: dict[str, Any] = {"n": len(rows), "decided": len(decided),
                           "no_rubric": sum(1 for r in rows if r.get("no_rubric")),
                           "failed": sum(1 for r in rows if r.get("correct") is None and not r.get("no_rubric")),
                           "accuracy": None, "ci": None}
    if decided:
        correct = np.array([float(r["correct"]) for r in decided])
        iv = bootstrap_ci(correct, np.mean, n_resamples=config.n_resamples, confidence=config.confidence,
                          seed=config.seed, clusters=[r["prompt_id"] for r in decided])
        out.update(accuracy=float(correct.mean()), ci=interval_dict(iv))
    return out


def pointwise_stats(rows: list[dict[str, Any]], config: Any) -> dict[str, Any]:
    import numpy as np

    from ...stats import bootstrap_ci, spearman

    scored = [r for r in rows if r.get("score") is not None]
    out: dict[str, Any] = {"n": len(rows), "scored": len(scored),
                           "no_rubric": sum(1 for r in rows if r.get("no_rubric")),
                           "failed": sum(1 for r in rows if r.get("score") is None and not r.get("no_rubric")),
                           "spearman": None, "pvalue": None, "ci": None}
    if len(scored) < 3:
        return out
    judge = np.array([r["score"] for r in scored], dtype=float)
    human = np.array([r["human"] for r in scored], dtype=float)
    rho = spearman(judge, human)
    if rho is None:  # constant scores: no ranking to compare
        return out
    out.update(spearman=rho.statistic, pvalue=rho.pvalue)

    def stat(idx: Any) -> float:
        i = idx.astype(int)
        r = spearman(judge[i], human[i])
        return float("nan") if r is None else r.statistic

    iv = bootstrap_ci(np.arange(len(scored), dtype=float), stat, n_resamples=config.n_resamples,
                      confidence=config.confidence, seed=config.seed, clusters=[r["prompt_id"] for r in scored])
    out["ci"] = interval_dict(iv)
    return out


def mcnemar_vs_reference(results: dict[str, dict[str, Any]], reference: str) -> dict[str, Any]:
    from ...stats import holm_adjust, mcnemar_exact

    ref = {r["id"]: r.get("correct") for r in results[reference]["pairwise_rows"]}
    tests: dict[str, Any] = {}
    for name, res in results.items():
        if name == reference:
            continue
        mine = {r["id"]: r.get("correct") for r in res["pairwise_rows"]}
        ids = sorted(set(ref) & set(mine))
        a = [None if mine[i] is None else float(mine[i]) for i in ids]
        b = [None if ref[i] is None else float(ref[i]) for i in ids]
        if not ids or all(x is None for x in a) or all(x is None for x in b):
            continue
        tests[name] = mcnemar_exact(a, b).to_dict()
    if tests:
        for name, p in zip(tests, holm_adjust([t["pvalue"] for t in tests.values()]), strict=True):
            tests[name]["pvalue_holm"] = p
    return tests




def render_table(summary: Mapping[str, Any]) -> str:
    """The markdown table of ``results.json``."""
    conf = int(round(100 * summary["confidence"]))
    ref = summary["reference"]
    lines = [
        "# Rubric generators on held-out prompts", "",
        f"Judge: `{summary['judge']}`. Split seed {summary['split']['seed']}, test fraction "
        f"{summary['split']['test_fraction']}. Pairwise: agreement with the human majority on MT-Bench "
        f"(human ties dropped, order randomised with seed {summary['seed']}); pointwise: Spearman with HelpSteer2 "
        f"(mean of helpfulness, correctness, coherence). {conf}% bootstrap intervals over prompts; McNemar "
        f"(exact, Holm-adjusted) against `{ref}`.", "",
        "| generator | rubrics ok | pairwise agreement | CI | decided / rows | McNemar p vs ref | "
        "pointwise Spearman | CI | scored / rows | test prompts seen in training |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, g in summary["generators"].items():
        pw, pt = g.get("pairwise"), g.get("pointwise")
        mc = summary["mcnemar"].get(name)
        lines.append(
            f"| {name} | {g['rubrics_ok']}/{g['rubrics_total']} | "
            f"{fmt(pw and pw['accuracy'])} | {ci_text(pw and pw['ci'], estimate=False)} | "
            f"{pw['decided'] if pw else 0} / {pw['n'] if pw else 0} | "
            f"{'ref' if name == ref else fmt(mc and mc.get('pvalue_holm'), 4)} | "
            f"{fmt(pt and pt['spearman'])} | {ci_text(pt and pt['ci'], estimate=False)} | "
            f"{pt['scored'] if pt else 0} / {pt['n'] if pt else 0} | "
            f"{'n/a' if g['leaked'] is None else g['leaked']} |")
    leaked = {n: g["leaked"] for n, g in summary["generators"].items() if g["leaked"]}
    if leaked:
        lines += ["", "**Warning:** test prompts appear in the training prompts of "
                  + ", ".join(f"`{n}` ({k})" for n, k in leaked.items()) + ": those rows are not held out."]
    dropped = summary.get("dropped") or {}
    if dropped:
        lines += ["", "MT-Bench rows dropped: " + ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())) + "."]
    return "\n".join(lines) + "\n"


def plot(summary: Mapping[str, Any], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # the stats extra is not installed: the table still stands
        return None
    names = list(summary["generators"])
    panels = [("pairwise", "accuracy", "MT-Bench: agreement with humans"),
              ("pointwise", "spearman", "HelpSteer2: Spearman with humans")]
    panels = [p for p in panels if any(summary["generators"][n].get(p[0]) for n in names)]
    fig, axes = plt.subplots(1, len(panels), figsize=(max(4.0, 1.3 * len(names)) * len(panels), 3.6), squeeze=False)
    for ax, (kind, key, title) in zip(axes[0], panels, strict=True):
        vals, lows, highs = [], [], []
        for n in names:
            s = summary["generators"][n].get(kind) or {}
            v = s.get(key)
            ci = s.get("ci") or {}
            vals.append(float("nan") if v is None else v)
            lows.append(0.0 if v is None or ci.get("low") is None else v - ci["low"])
            highs.append(0.0 if v is None or ci.get("high") is None else ci["high"] - v)
        ax.bar(range(len(names)), vals, yerr=[lows, highs], capsize=4, color="#4C72B0")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
        ax.set_title(title, fontsize=10)
        if kind == "pairwise":
            ax.axhline(0.5, color="grey", lw=0.8, ls="--")
            ax.set_ylim(0, 1)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


