"""The ``rubric-reward`` parser: one subcommand group per module, and one error boundary for all."""

from __future__ import annotations

import argparse
import sys

__all__ = ["build_parser", "main", "run_command"]


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    from . import evaluation, generation, qualify, redteam, score, serve

    parser = argparse.ArgumentParser(
        prog="rubric-reward", description="Turn rubrics into rewards.",
        epilog="exit status: 0 ok; 1 some items unscored/failed or files invalid; 2 usage, config or data "
               "error; 3 eval stopped at the cost cap; 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (score, evaluation, serve, generation, redteam, qualify):
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..util.threads import prepare_environment

    prepare_environment()  # before torch loads: local models (generator, judge, DPO) share 2 cores politely
    args = build_parser().parse_args(argv)
    return run_command(args)


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command: usage, configuration and data errors become one line and exit 2."""
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, RuntimeError) as exc:  # never a traceback for bad input
        text = str(exc) if not isinstance(exc, OSError) or not exc.filename else f"{exc.filename}: {exc.strerror}"
        print(f"error: {text}", file=sys.stderr)
        return 2
