"""The GRPO recipe's seed tables: one seed's result, the pooled result over seeds, ``seeds_summary.{md,json}``.

A seed sweep (``benchmarks/main_job_seeds.py``) runs the recipe once per seed. :func:`seed_result` recomputes one
seed's row from its ``report_completions.jsonl`` with the settings its ``summary.json`` recorded
(:mod:`.summary`'s numbers, no number read from the summary's text); :func:`pool_seed_results` pools the rows
(a Student t-interval over the seeds' mean differences); :func:`write_seeds_summary` writes
``seeds_summary.json`` and ``seeds_summary.md`` (:func:`seeds_markdown`) in the sweep's folder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...evaluation import ci_text, jsonable
from ...evaluation import pvalue as _p
from .summary import (REPORT_FILE, SummarySettings, ci_bounds, environment_line, judge_comparison, judge_tables,
                      read_report_rows, read_summary, regressions, report_judges, signed)

__all__ = ["SEEDS_FILE", "pool_seed_results", "seed_result", "seeds_markdown", "write_seeds_summary"]

SEEDS_FILE = "seeds_summary"


def seed_result(run_dir: str | Path) -> dict[str, Any]:
    """One seed's row of a seed sweep, recomputed from its ``report_completions.jsonl`` (the training judge, with
    the statistics' settings and the environment its ``summary.json`` recorded; no number is read from the
    summary's text): the report split's difference with its interval and Wilcoxon p, better/worse/tied, perfect
    counts, the worst instruction type, what got significantly worse (:func:`~.summary.regressions`) and the
    reward-hacking flags."""
    out = Path(run_dir)
    rows = read_report_rows(out / REPORT_FILE)
    previous = read_summary(out)
    settings = SummarySettings.of(previous)
    metric = previous.get("metric", "score")
    judge = report_judges(rows)[0]
    c = judge_comparison(rows, judge, metric, settings)
    tables = judge_tables(rows, judge, metric, settings)
    strata = tables["report_by_type"]
    found = regressions(tables, settings)
    scored = [s for s in strata if (s["difference"] or {}).get("estimate") is not None]
    worst = min(scored, key=lambda s: s["difference"]["estimate"], default=None)
    env = previous.get("environment") or (previous.get("meta") or {}).get("environment") or {}
    ids = [str(r.get("id")) for r in rows]
    recorded_seed = (previous.get("settings") or {}).get("seed")  # None, not the default, when none was recorded
    return {"run_dir": str(out), "seed": env.get("seed", recorded_seed), "judge": judge, "metric": metric,
            "n": c["n"], "pairs": c["pairs"], "base_mean": c["base"]["mean"], "best_mean": c["best"]["mean"],
            "difference": c["difference"], "pvalue": (c["wilcoxon"] or {}).get("pvalue"),
            "improved": c["improved"], "worse": c["worse"], "tied": c["tied"],
            "perfect": {"base": c["base"].get("perfect"), "best": c["best"].get("perfect")},
            "worst_type": None if worst is None else {"benchmark": worst["benchmark"],
                                                      "difference": worst["difference"]["estimate"],
                                                      "pvalue_holm": worst["pvalue_holm"]},
            "by_type": {s["benchmark"]: (s["difference"] or {}).get("estimate") for s in strata},
            "regressions": [s["benchmark"] for s in found["types"]] + [f"criterion {x['criterion']}"
                                                                       for x in found["criteria"]],
            "hacking_flags": tables["hacking"]["flags"], "best_step": (previous.get("best") or {}).get("step"),
            "environment": env, "report_ids_sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest(),
            "settings": settings.numbers()}


def pool_seed_results(results: Sequence[Mapping[str, Any]], *, confidence: float = 0.95,
                      significant_p: float | None = None) -> dict[str, Any]:
    """The pooled row of a seed sweep (:func:`~.comparison.pool_seeds` over the seeds' mean differences), the
    number of seeds significant on their own (Wilcoxon p below ``significant_p``, 0.01, and the interval above
    0), every seed on the same report prompts or not, and per instruction type the mean of the seeds'
    differences."""
    from .comparison import SIGNIFICANT_P, pool_seeds

    cut = SIGNIFICANT_P if significant_p is None else significant_p
    pooled = pool_seeds([(r.get("difference") or {}).get("estimate") for r in results], confidence=confidence)
    significant = [r["seed"] for r in results if r.get("pvalue") is not None and r["pvalue"] < cut
                   and (r.get("difference") or {}).get("low") is not None and r["difference"]["low"] > 0]
    types: dict[str, list[float]] = {}
    for r in results:
        for name, value in (r.get("by_type") or {}).items():
            if value is not None:
                types.setdefault(name, []).append(value)
    by_type = {name: {"mean": sum(v) / len(v), "seeds": len(v), "min": min(v), "max": max(v)}
               for name, v in sorted(types.items())}
    return {**pooled, "seeds": [r["seed"] for r in results], "significant_p": cut,
            "significant_seeds": significant, "significant": len(significant),
            "worse_seeds": [r["seed"] for r in results if (r.get("difference") or {}).get("high") is not None
                            and r["difference"]["high"] < 0],
            "same_report_prompts": len({r.get("report_ids_sha256") for r in results}) <= 1,
            "by_type": by_type,
            "worst_type": min(by_type, key=lambda k: by_type[k]["mean"]) if by_type else None,
            "seeds_with_regressions": [r["seed"] for r in results if r.get("regressions")],
            "seeds_with_hacking_flags": [r["seed"] for r in results if r.get("hacking_flags")]}


def _mb(kib: Any) -> str:
    return "n/a" if not isinstance(kib, int | float) else f"{kib / 1024 / 1024:.2f} GB"


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "n/a"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s" if seconds >= 60 else f"{seconds:.0f} s"


def _peak_kib(r: Mapping[str, Any]) -> Any:
    """A seed's peak RSS: the sum over its processes, or the largest process where the sum was not sampled."""
    return r.get("peak_tree_rss_kib") or r.get("peak_rss_kib")


def _peak(r: Mapping[str, Any]) -> str:
    return _mb(_peak_kib(r)) + (" (largest)" if not r.get("peak_tree_rss_kib") and r.get("peak_rss_kib") else "")


def _opening(pooled: Mapping[str, Any]) -> str:
    """The seeds summary's first paragraph: the pooled gain, how many seeds are significant, cautions."""
    level = SummarySettings(confidence=pooled["confidence"]).level
    ci = pooled.get("ci") or {}
    worst = pooled.get("worst_type")
    text = (f"Over {pooled['n']} seeds ({', '.join(str(s) for s in pooled['seeds'])}) the report-split gain "
            f"(best - base, mean over seeds) is {signed(pooled['mean'])} ({level}% t-interval over seed means "
            f"{ci_bounds(ci) if ci else '[n/a]'}, t-test p = {_p(pooled['pvalue'])}; seed means from "
            f"{signed(pooled['min'])} to {signed(pooled['max'])}); {pooled['significant']} of {pooled['n']} "
            f"seeds are significant on their own (Wilcoxon p < {pooled['significant_p']:g} with the interval above "
            f"0)" + (f"; {len(pooled['worse_seeds'])} got significantly worse" if pooled["worse_seeds"] else "")
            + (f"; worst type over seeds: {worst} ({signed(pooled['by_type'][worst]['mean'])})" if worst else "")
            + ".")
    if not pooled["same_report_prompts"]:
        text += " Caution: the seeds were not reported on the same prompts."
    if pooled["seeds_with_hacking_flags"]:
        text += (" Reward-hacking indicators fired for seed(s) "
                 + ", ".join(str(s) for s in pooled["seeds_with_hacking_flags"]) + ".")
    return text


def _table_rows(pooled: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row per seed, then the pooled row."""
    rows = []
    for r in results:
        env = r.get("environment") or {}
        worst_r = r.get("worst_type") or {}
        rows.append([str(r["seed"]), ci_text(r["difference"], signed=True), _p(r["pvalue"]),
                     f"{r['improved']}/{r['worse']}/{r['tied']}",
                     f"{r['perfect']['base']}/{r['n']} -> {r['perfect']['best']}/{r['n']}",
                     (f"{worst_r['benchmark']} {signed(worst_r['difference'])}" if worst_r else "n/a"),
                     ", ".join(r["regressions"]) or "none", "; ".join(r["hacking_flags"]) or "none",
                     "final" if r.get("best_step") is None else str(r["best_step"]), _duration(r.get("wall_s")),
                     _peak(r), str(env.get("torch_threads", "n/a"))])
    ci = pooled.get("ci") or {}
    rows.append(["pooled", ci_text(ci, signed=True) if ci else "n/a", _p(pooled["pvalue"]),
                 (f"{sum(r['improved'] for r in results)}/{sum(r['worse'] for r in results)}/"
                  f"{sum(r['tied'] for r in results)}"), "", pooled.get("worst_type") or "n/a", "", "",
                 "", _duration(None if any(r.get("wall_s") is None for r in results)
                               else sum(r["wall_s"] for r in results)),
                 _mb(max((k for k in map(_peak_kib, results) if k), default=None)), ""])
    return rows


def seeds_markdown(data: Mapping[str, Any]) -> str:
    """``seeds_summary.md`` from ``seeds_summary.json``'s content (:func:`write_seeds_summary`)."""
    from ... import evaluation as B

    pooled, results = data["pooled"], data["seeds"]
    envs = {environment_line({k: v for k, v in (r.get("environment") or {}).items() if k != "seed"})
            for r in results if r.get("environment")}
    blocks = [B.Heading(1, "Seed sweep: summary"), B.Para(_opening(pooled)),
              B.Para(f"Recipe: `{data.get('command', 'n/a')}`; runs in {data.get('root', 'n/a')}/seed_S."),
              B.Table(["seed", "difference", "Wilcoxon p", "better/worse/tied", "perfect", "worst type",
                       "worse (Holm)", "hacking flags", "best step", "wall", "peak RSS", "threads"],
                      _table_rows(pooled, results)),
              B.Para("Every number is recomputed from each seed's `report_completions.jsonl` with the settings its "
                     "summary.json recorded (training judge; difference = best - base over prompts both scored, "
                     "identical completions tied; paired bootstrap interval; Wilcoxon signed-rank). Pooled: the "
                     "mean of the seed means with a Student t-interval over them (n - 1 degrees of freedom) and a "
                     "one-sample t-test of mean 0: the seeds are the replicates, the report prompts the same for "
                     "all, so it speaks for the recipe's seed-to-seed variation on these prompts. Wall: the seed's "
                     "whole run; peak RSS: the sum over the run's processes (the side process included), sampled "
                     "every second, or where not sampled the largest process (os.wait4, marked 'largest'); "
                     "pooled = total and maximum. 'worse (Holm)': "
                     "instruction types and criteria significantly worse after Holm.")]
    if pooled["by_type"]:
        blocks += [B.Heading(2, "Per instruction type, over seeds"),
                   B.Table(["type", "mean difference", "min", "max", "seeds"],
                           [[k, signed(v["mean"]), signed(v["min"]), signed(v["max"]), str(v["seeds"])]
                            for k, v in pooled["by_type"].items()])]
    if envs:
        blocks += [B.Heading(2, "Environment"), B.Para(" ".join(sorted(envs))
                                                       + ("" if len(envs) == 1 else " (differs between seeds)"))]
    return B.render_markdown(blocks)


def write_seeds_summary(root: str | Path, results: Sequence[Mapping[str, Any]], *, command: str | None = None,
                        confidence: float | None = None) -> Path:
    """Write ``seeds_summary.json`` and ``seeds_summary.md`` in ``root`` (the sweep's folder): the per-seed
    rows (:func:`seed_result`, plus ``wall_s`` / ``peak_rss_kib`` when measured) and the pooled result
    (:func:`pool_seed_results`, at ``confidence``, by default the first seed's recorded one); return the
    Markdown path."""
    from ...io.journal import write_atomic

    out = Path(root)
    out.mkdir(parents=True, exist_ok=True)
    results = [dict(r) for r in results]
    if confidence is None:
        confidence = next((SummarySettings.of(r).confidence for r in results if r.get("settings")), 0.95)
    data = {"root": str(out), "command": command, "seeds": results,
            "pooled": pool_seed_results(results, confidence=confidence)}
    write_atomic(out / f"{SEEDS_FILE}.json", json.dumps(jsonable(data), indent=2, ensure_ascii=False,
                                                        allow_nan=False) + "\n")
    write_atomic(out / f"{SEEDS_FILE}.md", seeds_markdown(data))
    return out / f"{SEEDS_FILE}.md"
