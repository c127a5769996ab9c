"""Command line for evaluation runs: ``rubric-reward eval --config run.yaml`` and ``report RUN_DIR``.

``add_eval_commands(subparsers)`` registers both on the main ``rubric-reward`` parser; this module
also runs on its own (``python -m rubric_reward.cli_eval eval --config run.yaml``).

Exit status of ``eval``: 0 every item judged, 1 some items failed (rerun to retry them), 3 stopped
at the cost cap (rerun, with a higher ``--max-cost`` if needed, to continue), 2 a configuration or
data error.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

__all__ = ["add_eval_commands", "main"]

EXIT = {"complete": 0, "incomplete": 1, "interrupted": 1, "stopped_by_budget": 3}


def _cmd_eval(args: argparse.Namespace) -> int:
    from .runner import EvalConfig, run_eval

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
    summary = run_eval(config)
    o = (summary.metrics or {}).get("overall") or {}
    acc = o.get("exact")
    print(
        f"{summary.status}: {summary.n_ok}/{summary.n_items} items ok, {summary.n_failed} failed, "
        f"{summary.n_missing} not judged; judged now {summary.n_graded} (resumed {summary.n_resumed}); "
        f"spent ${summary.spent:.4f} (cache hits {summary.cache_hits}, saved ${summary.cache_saved:.4f}); "
        f"exact accuracy {'n/a' if acc is None else f'{acc:.3f}'}; results in {summary.out_dir}",
        file=sys.stderr,
    )
    return EXIT.get(summary.status, 1)


def _cmd_report(args: argparse.Namespace) -> int:
    from .report import rebuild_report

    paths = rebuild_report(args.run_dir)
    print(f"wrote {paths['markdown']}, {paths['html']} and {paths['metrics']}", file=sys.stderr)
    return 0


def add_eval_commands(subparsers: Any) -> None:
    """Register ``eval`` and ``report`` on an argparse subparsers object."""
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rubric-reward", description="Evaluation runs and reports.")
    add_eval_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
