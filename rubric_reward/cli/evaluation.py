"""Command line for evaluation runs: ``rubric-reward eval --config run.yaml``, ``report RUN_DIR`` and
``compare BASELINE RUN...``.

``register(subparsers)`` adds them to the ``rubric-reward`` parser.

Exit status of ``eval``: 0 every item judged, 1 some items failed (rerun to retry them), 3 stopped
at the cost cap (rerun, with a higher ``--max-cost`` if needed, to continue), 2 a configuration or
data error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

__all__ = ["comparison_table", "register"]

EXIT = {"complete": 0, "incomplete": 1, "interrupted": 1, "stopped_by_budget": 3}


def _cmd_eval(args: argparse.Namespace) -> int:
    from ..evaluation import EvalConfig, run_eval

    config = EvalConfig.from_yaml(args.config)
    overrides: dict[str, Any] = {}
    if args.max_cost is not None:
        overrides["max_cost"] = args.max_cost
    if args.out_dir is not None:
        overrides["out_dir"] = args.out_dir
    if args.quiet:
        overrides["progress"] = False
    if args.no_report:
        overrides["report"] = False
    if overrides:
        config = replace(config, **overrides)
    from .notes import bundled_model_note

    note = bundled_model_note(list(config.judges), role="eval")
    if note:
        print(note, file=sys.stderr)
    try:
        summary = run_eval(config)
    except KeyboardInterrupt:
        print("interrupted; results so far are saved: rerun the same command to continue", file=sys.stderr)
        return 130
    o = (summary.metrics or {}).get("overall") or {}
    acc = o.get("exact")
    print(
        f"{summary.status}: {summary.n_ok}/{summary.n_items} items ok, {summary.n_failed} failed, "
        f"{summary.n_missing} not judged; judged now {summary.n_graded} (resumed {summary.n_resumed}); "
        f"spent ${summary.spent:.4f} (cache hits {summary.cache_hits}, saved ${summary.cache_saved:.4f}); "
        f"exact accuracy {'n/a' if acc is None else f'{acc:.3f}'}; results in {summary.out_dir}",
        file=sys.stderr,
    )
    for kind, f in summary.failures.items():  # why items failed, as 'score' shows it
        print(f"failed verdicts: {kind} {f['count']} (e.g. {f['example'][:300]})", file=sys.stderr)
    if "connection" in summary.failures:
        urls = sorted({u for j in config.judges for u in j.base_urls} or {j.model for j in config.judges})
        print(f"the judge could not be reached ({', '.join(urls)}): start it, or fix the config's judges",
              file=sys.stderr)
    if summary.failures:
        print("rerun the same command to retry the failed items; 'error' in results.jsonl has every message",
              file=sys.stderr)
    return EXIT.get(summary.status, 1)


def _cmd_report(args: argparse.Namespace) -> int:
    from ..evaluation import rebuild_report

    paths = rebuild_report(args.run_dir)
    print(f"wrote {paths['markdown']}, {paths['html']} and {paths['metrics']}", file=sys.stderr)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    import json

    from ..evaluation import compare_many, compare_runs

    if args.json:
        if len(args.runs) == 1:
            result = compare_runs(args.runs[0], args.baseline, by=args.by)
        else:
            result = compare_many(args.baseline, {r: r for r in args.runs}, by=args.by)
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    print(comparison_table(compare_many(args.baseline, {r: r for r in args.runs}, by=args.by)))
    return 0


def comparison_table(result: Mapping[str, Any]) -> str:
    """``compare_many``'s result as a markdown table, one row per compared run, and a line on what it means."""
    from ..evaluation import ci_text, fmt, markdown_table, pvalue

    def p(test: Mapping[str, Any] | None, holm: float | None) -> str:
        return "n/a" if test is None else pvalue(test["pvalue"]) + ("" if holm is None else f" ({pvalue(holm)})")

    rows = []
    for name, c in result["comparisons"].items():
        s, acc = c["scores"], c["accuracy"] or {}
        rows.append([
            name, f"{c['n_shared']}" + (f" (+{c['only_a']} only here)" if c["only_a"] else ""),
            f"{fmt(s['mean_a'])} vs {fmt(s['mean_b'])}", ci_text(s["difference"], signed=True),
            p(s["permutation"], s.get("permutation_pvalue_holm")), p(s["wilcoxon"], s.get("wilcoxon_pvalue_holm")),
            fmt(s["cohens_d"], 2), ci_text(acc.get("difference"), signed=True), p(acc.get("mcnemar"), None),
        ])
    header = ["run", "items paired", "mean score (run vs baseline)", "difference [95% CI]", "permutation p (Holm)",
              "Wilcoxon p (Holm)", "Cohen's d", "label accuracy difference [95% CI]", "McNemar p"]
    only_base = {c["only_b"] for c in result["comparisons"].values()} - {0}
    note = (f"Baseline: {result['baseline']}. Statistics are run - baseline on the items both judged, paired by "
            f"{next(iter(result['comparisons'].values()))['paired_by']}; paired bootstrap intervals (groups resampled "
            "when items are nested); Holm-adjusted across the runs compared. Label accuracy: agreement with the "
            "human labels, per item x criterion decision.")
    if only_base:
        note += f" Items only in the baseline: {', '.join(map(str, sorted(only_base)))}."
    return markdown_table(header, rows) + "\n\n" + note + "\n--json prints every statistic."


def register(subparsers: Any) -> None:
    """Register ``eval``, ``report`` and ``compare`` on an argparse subparsers object."""
    p = subparsers.add_parser("eval", help="judge a dataset against human labels (resumable) and report agreement")
    p.add_argument("--config", required=True, help="eval config YAML (see configs/eval/example.yaml)")
    p.add_argument("--max-cost", type=float, help="stop cleanly before this invocation's new spend would pass this")
    p.add_argument("--out-dir", help="run folder (overrides out_dir in the config)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-report", action="store_true", help="skip report.md/report.html and plots")
    p.set_defaults(func=_cmd_eval)

    p = subparsers.add_parser("report", help="rebuild metrics.json and the report of a run folder")
    p.add_argument("run_dir", help="a folder written by 'rubric-reward eval'")
    p.set_defaults(func=_cmd_report)

    p = subparsers.add_parser("compare", help="compare runs on the same items (paired tests; Holm across runs)")
    p.add_argument("baseline", help="the reference run folder")
    p.add_argument("runs", nargs="+", help="run folder(s) compared with the baseline (statistics: run - baseline)")
    p.add_argument("--by", default="id", choices=["id", "row"], help="how items are paired (default: id)")
    p.add_argument("--json", action="store_true", help="print every statistic as JSON instead of the table")
    p.set_defaults(func=_cmd_compare)
