"""Scoring commands: ``rubric-reward validate RUBRIC...`` and ``rubric-reward score``.

Exit status: 0 success; 1 some items unscored (``score`` without ``--allow-failures``) or some files
invalid (``validate``); 2 a usage, configuration or data error (one line naming the file, entry and field).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["add_judge_options", "judge_spec", "register"]


def _cmd_validate(args: argparse.Namespace) -> int:
    from ..rubric import RubricError, load_rubric

    status = 0
    for path in args.rubric:
        try:
            rubric = load_rubric(path)
        except (RubricError, OSError) as exc:  # report every file, then fail
            print(f"error: {exc}", file=sys.stderr)
            status = 1
            continue
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(Counter(c.kind.value for c in rubric.criteria).items()))
        penalties = _count(sum(1 for c in rubric.criteria if c.weight < 0), "penalty", "penalties")
        print(f"ok: {path}: rubric {rubric.name!r}, {_count(len(rubric), 'criterion', 'criteria')} ({kinds}; "
              f"{penalties}), positive weight {rubric.positive_weight:g}")
    return status


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    from ..io.rows import DataError, numbered_jsonl_rows

    rows = []
    for n, row in numbered_jsonl_rows(path):
        if "response" not in row:
            raise DataError(f"{path}: line {n}: each row needs a 'response' field")
        if not isinstance(row["response"], str | list):
            raise DataError(f"{path}: line {n}: field 'response' must be a string or assistant messages, "
                            f"got {type(row['response']).__name__}")
        rows.append(dict(row))
    if not rows:
        raise DataError(f"{path}: no rows")
    return rows


def add_judge_options(p: argparse.ArgumentParser) -> None:
    """The judge options of every command that judges (``score``, ``qualify``): read by :func:`judge_spec`."""
    p.add_argument("--judge", help="judge model (litellm string, or any name with --base-url) or a judge YAML; "
                   "default: the bundled offline SmolLM2-135M-Instruct")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (vllm serve)")
    p.add_argument("--api-key-env", help="environment variable holding the API key")
    p.add_argument("--mode", default="per_criterion", help="per_criterion, per_item, k criteria per call, or group "
                   "(the responses to one prompt together)")


def judge_spec(args: argparse.Namespace) -> Any:
    """The judge the options of :func:`add_judge_options` name: a JudgeConfig, or a judge YAML path."""
    from ..judges.config import JudgeConfig
    from ..io.models import DEFAULT_LOCAL_MODEL

    if args.judge is None:
        return JudgeConfig(model=DEFAULT_LOCAL_MODEL, backend="transformers")
    if Path(args.judge).suffix in (".yaml", ".yml", ".json"):
        return args.judge
    extra = {"api_key_env": args.api_key_env} if args.api_key_env else {}
    return JudgeConfig(model=args.judge, base_url=args.base_url, mode=args.mode, **extra)


def _cmd_score(args: argparse.Namespace) -> int:
    from ..util.progress import Progress
    from ..rubric import load_rubric
    from ..scorer import Scorer

    rubric = load_rubric(args.rubric)  # a RubricError is one line and exit 2 (main.run_command)
    rows = _read_jsonl(Path(args.input))
    judge = judge_spec(args) if rubric.judged else None
    from .notes import bundled_model_note

    note = bundled_model_note(judge) if judge is not None else None
    if note:
        print(note, file=sys.stderr)
    scoring = {"abstention": args.abstention, "all_or_nothing": args.all_or_nothing}
    scorer = Scorer(rubric, judge, scoring=scoring, grading={"seed": args.seed, "injection": args.injection})
    items = [
        {"response": r["response"], "prompt": r.get("prompt", r.get("conversation")), "id": r.get("id", i),
         "group": r.get("group")}
        for i, r in enumerate(rows)
    ]
    # one unit per response: a screened response or a batch copy makes no judge call and still counts
    with Progress("scoring", len(items), enabled=not args.quiet, cost=True, failures=True) as bar:

        def on_result(_: int, result: Any) -> None:
            bar.advance(cost=result.cost, failed=result.score is None)

        async def run() -> list[Any]:
            try:
                return await scorer.ascore_batch(items, on_result=on_result)
            finally:
                await scorer.aclose()

        results = asyncio.run(run())

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for item, result in zip(items, results, strict=True):
            f.write(json.dumps({"id": item["id"], **result.to_dict()}, ensure_ascii=False) + "\n")
    _print_summary(rubric, results)
    print(f"wrote {out}", file=sys.stderr)
    scored = sum(1 for r in results if r.score is not None)
    unscored = len(results) - scored
    if unscored and not args.allow_failures:
        print(f"{unscored} of {len(results)} items unscored (see 'error' in {out}); exit 1 "
              "(--allow-failures exits 0)", file=sys.stderr)
        return 1
    return 0


def _print_summary(rubric: Any, results: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    scored = [r.score for r in results if r.score is not None]
    screened = Counter(r.metadata["screened"] for r in results if r.metadata.get("screened"))
    failures = Counter(v.error.kind.value for r in results for v in r.verdicts if v.error is not None)
    table = Table(title=f"rubric {rubric.name!r} on {len(results)} responses")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("scored", f"{len(scored)} / {len(results)}")
    table.add_row("mean score", f"{sum(scored) / len(scored):.3f}" if scored else "n/a")
    table.add_row("judge calls", str(sum(len(r.calls) for r in results)))
    table.add_row("cost ($)", f"{sum(r.cost for r in results):.4f}")
    flagged = [r for r in results if r.metadata.get("flagged")]
    table.add_row("flagged before judging", f"{len(flagged)} / {len(results)}")
    suspect = sum(1 for r in flagged if r.metadata.get("suspect"))
    if suspect:
        table.add_row("flagged, judged alone, suspect", str(suspect))
    for why, n in sorted(screened.items()):
        kind = "flagged" if any(r.metadata.get("flagged") == why for r in flagged) else "degenerate"
        table.add_row(f"screened, not judged: {why} ({kind}; "
                      f"{'judged criteria at their worst' if kind == 'flagged' else 'minimum score'})", str(n))
    for kind, n in sorted(failures.items()):
        table.add_row(f"failed verdicts: {kind}", str(n))
    Console().print(table)
    Console().print(_criterion_table(rubric, results))


def _criterion_table(rubric: Any, results: list[Any]) -> Any:
    """Per criterion: mean value, verdict counts by label, abstentions and failures (nothing hidden). Screened
    responses are not judged: their forced worst labels count in no column (the summary counts them)."""
    from rich.table import Table

    judged = [r for r in results if not r.metadata.get("screened")]
    left_out = len(results) - len(judged)
    table = Table(title="per criterion" + (f" ({_count(left_out, 'screened response', 'screened responses')} "
                                           "left out)" if left_out else ""))
    for name, justify in (("criterion", "left"), ("weight", "right"), ("mean", "right"), ("verdicts", "left"),
                          ("abstained", "right"), ("failed", "right")):
        table.add_column(name, justify=justify)
    for c in rubric.criteria:
        verdicts = [r.verdict(c.name) for r in judged]
        values = [v.value for v in verdicts if v.error is None and v.value is not None]
        labels = Counter(v.label for v in verdicts if v.error is None and not v.abstained and v.label is not None)
        order = [lab for lab in c.labels if lab in labels] + sorted(set(labels) - set(c.labels))
        table.add_row(
            c.name, f"{c.weight:g}", f"{sum(values) / len(values):.2f}" if values else "n/a",
            ", ".join(f"{lab} {labels[lab]}" for lab in order) or "-",
            str(sum(1 for v in verdicts if v.error is None and v.abstained)),
            str(sum(1 for v in verdicts if v.error is not None)),
        )
    return table


def register(sub: Any) -> None:
    """Register ``validate`` and ``score`` on an argparse subparsers object."""
    p = sub.add_parser("validate", help="check rubric files and summarise them")
    p.add_argument("rubric", nargs="+", help="rubric YAML or JSON file(s)")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("score", help="score a JSONL of responses against one rubric")
    p.add_argument("--rubric", required=True, help="rubric YAML or JSON file")
    p.add_argument("--input", required=True, help="JSONL with 'response' and optional 'prompt'/'conversation', 'id'")
    p.add_argument("--out", required=True, help="where to write results JSONL")
    add_judge_options(p)
    p.add_argument("--abstention", default="skip", choices=["skip", "zero", "partial", "fail"],
                   help="how CANNOT_ASSESS / N/A verdicts count: skip (default) drops them, zero counts 0, "
                   "partial gives partial credit, fail takes the worst case")
    p.add_argument("--all-or-nothing", action="store_true", help="1 only when every criterion is satisfied")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the option-order shuffle (and of sampling judges); default 0")
    p.add_argument("--allow-failures", action="store_true",
                   help="exit 0 even when some items are unscored (default: exit 1)")
    p.add_argument("--injection", default="screen", choices=["screen", "alone", "suspect"],
                   help="a response flagged before judging (docs/security.md): screen (default: judged criteria "
                   "at their worst, no judge call), alone (judged alone) or suspect (judged alone, marked)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_score)
