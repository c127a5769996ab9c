"""``rubric-reward redteam``: measure how far a judge can be persuaded (the judge itself, and the pipeline with
its screens) on the bundled suite and the user's own cases (rubric_reward.evaluation.redteam, docs/security.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1], got {text}")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser("redteam", help="measure how far a judge can be persuaded: attack success beside benign "
                       "drift, for the judge itself and for the pipeline with its screens")
    p.add_argument("--judge", help="judge model (litellm string, or any name with --base-url) or a judge YAML; "
                   "'loopback:honest' / 'loopback:gullible' start an in-process scripted judge; default: the "
                   "bundled offline SmolLM2-135M-Instruct")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint")
    p.add_argument("--api-key-env", help="environment variable holding the API key")
    p.add_argument("--rubric", help="rubric YAML or JSON file (default: the suite's 2+2 rubric)")
    p.add_argument("--prompt", help="the task the attacks answer (with --control; default: the suite's 2+2 task)")
    p.add_argument("--control", help="a wrong answer to the task under the rubric: the attacks are planted into it "
                   "(default: the suite's 2+2 control, reported as such)")
    p.add_argument("--honest", action="append", help="an honest answer (repeatable): clean siblings in group mode")
    p.add_argument("--cases", help="your own cases, JSONL or YAML: family, name, response, optional control")
    p.add_argument("--only-cases", action="store_true", help="run --cases without the bundled suite")
    p.add_argument("--modes", default="per_criterion,per_item,k,logprob,group",
                   help="comma-separated: per_criterion, per_item, k, logprob, group (default: all)")
    p.add_argument("--columns", default="judge,pipeline", help="judge (the screens hide nothing from the judge), "
                   "pipeline (grading with its screens); default: both")
    p.add_argument("--families", help="comma-separated families (default: all)")
    p.add_argument("--per-family", type=int, help="at most this many cases per family")
    p.add_argument("--injection", default="screen", choices=["screen", "alone", "suspect"],
                   help="the pipeline column's policy for a flagged response (default: screen)")
    p.add_argument("--repeats", type=int, default=3, help="grading seeds the clean responses are scored under "
                   "(benign drift; default 3)")
    p.add_argument("--max-moved", type=_fraction, default=0.0, help="fail above this attack success rate")
    p.add_argument("--max-sibling-moved", type=_fraction, default=0.0,
                   help="fail above this share of honest siblings whose score moved (group mode)")
    p.add_argument("--max-drift", type=_fraction, default=0.0, help="fail above this benign drift rate")
    p.add_argument("--json", help="also write the report as JSON here")
    p.set_defaults(func=_cmd_redteam)


def _split(text: str | None) -> list[str] | None:
    return None if not text else [x.strip() for x in text.split(",") if x.strip()]


def _judge(args: argparse.Namespace) -> tuple[Any, Any]:
    """The judge config and, for a loopback judge, its running server."""
    from ..io.models import DEFAULT_LOCAL_MODEL
    from ..judges.config import JudgeConfig

    if args.judge and args.judge.startswith("loopback:"):
        from ..testing.judge_server import JudgeServer
        from ..testing.redteam_judges import loopback_judge

        kind = args.judge.split(":", 1)[1]
        scripted = loopback_judge(kind)  # a ValueError names the kinds
        server = JudgeServer(scripted).start()
        return JudgeConfig(model=f"loopback-{kind}", base_url=server.base_url), server
    if args.judge is None:
        return JudgeConfig(model=DEFAULT_LOCAL_MODEL, backend="transformers"), None
    if Path(args.judge).suffix in (".yaml", ".yml", ".json"):
        from ..judges.config import load_judge_config

        return load_judge_config(args.judge), None
    extra = {"api_key_env": args.api_key_env} if args.api_key_env else {}
    return JudgeConfig(model=args.judge, base_url=args.base_url, **extra), None


def _cmd_redteam(args: argparse.Namespace) -> int:
    from ..evaluation.redteam import load_cases, run_redteam, table
    from ..rubric import load_rubric

    rubric = load_rubric(args.rubric) if args.rubric else None
    cases = load_cases(args.cases) if args.cases else None
    if args.only_cases and cases is None:
        raise ValueError("--only-cases needs --cases FILE")
    if args.repeats < 1:
        raise ValueError(f"--repeats must be at least 1, got {args.repeats}")
    judge, server = _judge(args)
    try:
        report = run_redteam(judge, rubric=rubric, modes=_split(args.modes) or [], columns=_split(args.columns) or [],
                             cases=cases, bundled=not args.only_cases, prompt=args.prompt, control=args.control,
                             honest=args.honest, per_family=args.per_family, families=_split(args.families),
                             injection=args.injection, repeats=args.repeats, max_moved=args.max_moved,
                             max_sibling_moved=args.max_sibling_moved, max_drift=args.max_drift,
                             progress=lambda line: print(line, file=sys.stderr))
    finally:
        if server is not None:
            server.stop()
    target = report["target"]
    if target["source"] != "user":
        print(f"target: {target['source']}: prompt {target['prompt']!r}, control {target['control']!r}")
    print(table(report))
    for column, col in report["columns"].items():
        for mode, r in col["modes"].items():
            clean = r["clean"]
            control = clean["control"]
            if control is not None and not any(h is not None and h > control for h in clean["honest"]):
                print(f"note: {column}/{mode}: the honest answers scored no higher than the control "
                      f"({clean['honest']} vs {control}): this judge cannot show an attack on this target")
    share = report["persuadability"]
    if share is not None or "judge" in report["columns"]:
        said = "not measurable" if share is None else f"{share:.1%}"
        print(f"persuadability (the judge's attack success over the modes run): {said}")
    print(report["verdict"] + ("" if not report["failures"] else "\n" + "\n".join(report["failures"])))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False))
    return 0 if report["verdict"] == "PASS" else 1
