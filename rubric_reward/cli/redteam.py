"""``rubric-reward redteam``: the bundled injection / persuasion / forged-structure / master-key suite
run against a judge configuration in every mode (rubric_reward.evaluation.redteam, docs/security.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser("redteam", help="measure how a judge configuration holds against injected, persuasive, "
                       "forged and master-key responses")
    p.add_argument("--judge", help="judge model (litellm string, or any name with --base-url) or a judge YAML; "
                   "'loopback:honest' / 'loopback:gullible' start an in-process test judge; default: the bundled "
                   "offline SmolLM2-135M-Instruct")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint")
    p.add_argument("--api-key-env", help="environment variable holding the API key")
    p.add_argument("--rubric", help="rubric YAML or JSON file (default: the suite's 2+2 rubric)")
    p.add_argument("--modes", default="per_criterion,per_item,k,logprob,group",
                   help="comma-separated: per_criterion, per_item, k, logprob, group (default: all)")
    p.add_argument("--families", help="comma-separated families (default: all)")
    p.add_argument("--per-family", type=int, help="at most this many cases per family")
    p.add_argument("--injection", default="screen", choices=["screen", "alone", "suspect"],
                   help="what the grader does with a flagged response (default: screen)")
    p.add_argument("--max-moved", type=float, default=0.0, help="fail above this fraction of moved scores per family")
    p.add_argument("--max-sibling-moved", type=float, default=0.0,
                   help="fail above this fraction of siblings whose score moved (group mode)")
    p.add_argument("--json", help="also write the report as JSON here")
    p.set_defaults(func=_cmd_redteam)


def _cmd_redteam(args: argparse.Namespace) -> int:
    from ..judges.config import JudgeConfig
    from ..io.models import DEFAULT_LOCAL_MODEL
    from ..evaluation.redteam import gullible_label, gullible_reply, honest_label, run_redteam, table, verdict
    from ..rubric import load_rubric

    rubric = load_rubric(args.rubric) if args.rubric else None
    server = None
    if args.judge and args.judge.startswith("loopback:"):
        from ..testing.judge_server import JudgeServer, ScriptedJudge

        kind = args.judge.split(":", 1)[1]
        if kind not in ("honest", "gullible"):
            raise ValueError("--judge loopback:KIND takes honest or gullible")
        label = gullible_label if kind == "gullible" else honest_label
        server = JudgeServer(ScriptedJudge(default=label, reply=gullible_reply if kind == "gullible" else None)).start()
        judge: Any = JudgeConfig(model=f"loopback-{kind}", base_url=server.base_url)
    elif args.judge is None:
        judge = JudgeConfig(model=DEFAULT_LOCAL_MODEL, backend="transformers")
    elif Path(args.judge).suffix in (".yaml", ".yml", ".json"):
        from ..judges.config import load_judge_config

        judge = load_judge_config(args.judge)
    else:
        extra = {"api_key_env": args.api_key_env} if args.api_key_env else {}
        judge = JudgeConfig(model=args.judge, base_url=args.base_url, **extra)
    try:
        report = run_redteam(judge, rubric=rubric, modes=[m.strip() for m in args.modes.split(",") if m.strip()],
                             per_family=args.per_family, injection=args.injection,
                             families=None if not args.families else [f.strip() for f in args.families.split(",")],
                             progress=lambda line: print(line, file=sys.stderr))
    finally:
        if server is not None:
            server.stop()
    fails = verdict(report, max_moved=args.max_moved, max_sibling_moved=args.max_sibling_moved)
    report["failures"] = fails
    print(table(report))
    print("PASS" if not fails else "FAIL\n" + "\n".join(fails))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0 if not fails else 1
