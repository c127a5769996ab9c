"""``rubric-reward qualify``: can this judge carry this rubric as a training reward? The judge card
(:mod:`rubric_reward.evaluation.qualify`, docs/qualify.md).

Exit status: 0 the judge is ``usable``; 1 ``usable_with_changes`` or ``unusable`` (the card says which criteria
and why); 2 a usage, configuration or data error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    from .score import add_judge_options

    p = sub.add_parser("qualify", help="measure a judge on a rubric before training: a judge card per criterion")
    p.add_argument("--rubric", required=True, help="rubric YAML or JSON file")
    p.add_argument("--responses", required=True, help="JSONL of 'prompt' + 'response' (or 'responses', a list; "
                   "'group', 'id', 'labels' optional), several responses per prompt as a GRPO step has them; or a "
                   "policy (a local folder, a hub id, smollm2-135m-instruct) to sample them from, with --prompts")
    p.add_argument("--gold", help="JSONL of gold labels per criterion (the eval format: 'response', 'prompt', "
                   "'labels'), matched to the responses by 'id', else by prompt and response")
    p.add_argument("--repeats", type=int, default=5, help="K: independent judgings of each response (default 5)")
    p.add_argument("--out", default="qualify", help="folder for card.json, card.md, card.png and "
                   "qualified_rubric.yaml (default: ./qualify)")
    add_judge_options(p)
    p.add_argument("--temperature", type=float, default=1.0,
                   help="the judge's temperature for the judgings when its own is 0 (default 1.0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the judgings' option orders and sampling")
    p.add_argument("--no-persuasion", action="store_true",
                   help="skip the per-criterion red-team (about 64 judge calls per criterion)")
    p.add_argument("--abstention", default="zero", choices=["skip", "zero", "partial", "fail"],
                   help="how an abstention counts in the reward (default zero, the reward's default)")
    p.add_argument("--prompts", help="with a policy as --responses: JSONL of 'prompt' rows to sample from")
    p.add_argument("--per-prompt", type=int, default=4, help="with a policy: completions per prompt (default 4)")
    p.add_argument("--policy-temperature", type=float, default=1.0, help="with a policy: sampling temperature")
    p.add_argument("--max-new-tokens", type=int, default=256, help="with a policy: the longest completion")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_qualify)


def _rows(args: argparse.Namespace, rubric: Any) -> list[Any]:
    from ..evaluation.qualify import load_rows, sample_rows
    from ..io.rows import DataError, numbered_jsonl_rows

    source = Path(args.responses)
    if source.is_file():
        if args.prompts:
            raise DataError("--prompts goes with a policy as --responses, not with a responses file")
        return load_rows(source, rubric)
    if not args.prompts:
        raise DataError(f"--responses {args.responses}: no such file; to sample from a policy of that name, give "
                        "--prompts PROMPTS.jsonl")
    prompts = [dict(row) for _, row in numbered_jsonl_rows(Path(args.prompts))]
    if any("prompt" not in row for row in prompts):
        raise DataError(f"{args.prompts}: every row needs a 'prompt'")
    return sample_rows(prompts, rubric, policy=args.responses, per_prompt=args.per_prompt,
                       temperature=args.policy_temperature, max_new_tokens=args.max_new_tokens, seed=args.seed,
                       progress=not args.quiet)


def _cmd_qualify(args: argparse.Namespace) -> int:
    from ..evaluation.qualify import QualifyConfig, match_gold, qualify
    from ..rubric import load_rubric
    from ..util.progress import Progress
    from .score import judge_spec

    rubric = load_rubric(args.rubric)  # a RubricError is one line and exit 2 (main.run_command)
    if not rubric.judged:
        print(f"error: {args.rubric}: rubric {rubric.name!r} has no judged criteria; there is no judge to qualify",
              file=sys.stderr)
        return 2
    config = QualifyConfig(repeats=args.repeats, temperature=args.temperature, seed=args.seed,
                           persuasion=not args.no_persuasion)
    judge = judge_spec(args)
    rows = _rows(args, rubric)
    if args.gold:
        rows, unmatched = match_gold(rows, args.gold, rubric)
        if unmatched:
            print(f"note: {unmatched} gold row(s) match no response", file=sys.stderr)
    with Progress("judging", len(rows) * config.repeats, enabled=not args.quiet, cost=True, failures=True) as bar:
        card = qualify(rows, judge, config=config, scoring=_scoring(args),
                       out_dir=args.out, on_result=lambda _, r: bar.advance(cost=r.cost, failed=r.score is None),
                       say=None if args.quiet else (lambda line: print(line, file=sys.stderr)))
    print(card.line())
    print(f"wrote {Path(args.out) / 'card.md'}", file=sys.stderr)
    return 0 if card.overall == "usable" else 1


def _scoring(args: argparse.Namespace) -> Any:
    from ..arithmetic import ScoringConfig

    return ScoringConfig(abstention=args.abstention)
