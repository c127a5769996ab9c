"""IFEval: generate greedy responses (base model, and base + LoRA adapter) or read them, score, compare.

Score existing responses ({"key" or "prompt", "response"} JSONL rows):

    python eval/ifeval.py --responses responses.jsonl --out-dir runs/ifeval
    python eval/ifeval.py --responses trained.jsonl --baseline-responses base.jsonl --out-dir runs/ifeval

Generate, then score (transformers on CPU/GPU, vLLM in-process, or an OpenAI-compatible endpoint):

    python eval/ifeval.py --model Qwen/Qwen3-0.6B --adapter runs/grpo/checkpoint-100 --out-dir runs/ifeval
    python eval/ifeval.py --model my-model --backend openai --base-url http://127.0.0.1:8000/v1 --out-dir D

One system writes its files into DIR: eval_results_strict.jsonl and eval_results_loose.jsonl (the
reference evaluator's rows), summary.json, summary.md, responses.jsonl. Two systems (an adapter or
--baseline-responses) write DIR/base/ and DIR/trained/ plus DIR/comparison.{json,md,png}.
--config FILE.yaml sets any flag (keys are the flag names, with - or _); the command line wins.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

try:
    import rubric_reward  # noqa: F401  (installed, or on PYTHONPATH)
except ImportError:  # run from a checkout without installation
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="eval/ifeval.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="YAML file whose keys set the flags below (command line wins)")
    p.add_argument("--out-dir", help="output folder (required)")
    p.add_argument("--data", help="IFEval prompts: a JSONL path or 'google/IFEval' (default: the packaged 541)")
    p.add_argument("--limit", type=int, help="use only the first N prompts")
    g = p.add_argument_group("score existing responses")
    g.add_argument("--responses", help="JSONL of {key|prompt, response} rows: the system evaluated ('trained')")
    g.add_argument("--baseline-responses", help="JSONL of the baseline's responses, compared with --responses")
    g.add_argument("--allow-missing", action="store_true",
                   help="score only the prompts that have a response instead of failing")
    g = p.add_argument_group("generate responses")
    g.add_argument("--model", help="base model: hub id or local folder")
    g.add_argument("--adapter", help="LoRA adapter folder (openai backend: the name it is served under)")
    g.add_argument("--merge-adapter", action=argparse.BooleanOptionalAction, default=True,
                   help="merge the adapter into the weights before generating (transformers; default, as the GRPO "
                        "recipe's monitor and report do: no LoRA cost per token); --no-merge-adapter keeps it apart")
    g.add_argument("--backend", choices=("transformers", "vllm", "openai"), default="transformers")
    g.add_argument("--base-url", help="OpenAI-compatible endpoint for --backend openai, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the endpoint's key, if any (default OPENAI_API_KEY)")
    g.add_argument("--max-new-tokens", type=int, default=1024)
    g.add_argument("--batch-size", type=int, default=20,
                   help="generation batch / concurrent requests (default 20, the GRPO recipe's eval_batch_size)")
    g.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("scoring and statistics")
    g.add_argument("--keep-think", action="store_true",
                   help="score responses as given; by default a leading <think>...</think> block is removed")
    g.add_argument("--bootstrap-resamples", type=int, default=10_000)
    g.add_argument("--confidence", type=float, default=0.95)
    g.add_argument("--alpha", type=float, default=0.05, help="significance level marked in tables and chart")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse flags, with defaults from ``--config`` when given."""
    parser = build_parser()
    first, _ = parser.parse_known_args(argv)
    if first.config:
        parser.set_defaults(**_load_config(parser, first.config))
    args = parser.parse_args(argv)
    if not args.out_dir:
        parser.error("--out-dir is required (on the command line or in --config)")
    if bool(args.responses) == bool(args.model):
        parser.error("give either --responses (score existing responses) or --model (generate), not both")
    if args.baseline_responses and not args.responses:
        parser.error("--baseline-responses needs --responses")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be positive")
    return args


def check_paths(args: argparse.Namespace) -> None:
    """Before any model is loaded: a typo in the adapter path must not cost a minute of loading."""
    if args.adapter and args.backend != "openai" and not Path(args.adapter).is_dir():
        build_parser().error(f"--adapter {args.adapter}: no such folder (a LoRA adapter saved with save_pretrained)")


def _load_config(parser: argparse.ArgumentParser, path: str) -> dict[str, Any]:
    import yaml

    file = Path(path)
    if not file.is_file():
        parser.error(f"--config: no file at {file}")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        parser.error(f"--config {file}: invalid YAML: {exc}")
    if not isinstance(data, dict):
        parser.error(f"--config {file}: expected a mapping of flag names to values")
    known = {a.dest for a in parser._actions if a.dest not in ("help", "config")}
    out = {}
    for key, value in data.items():
        dest = str(key).replace("-", "_")
        if dest not in known:
            parser.error(f"--config {file}: unknown key {key!r}; known keys: {sorted(known)}")
        out[dest] = value
    return out


# ------------------------------------------------------------------------------------------ steps


def _select(rows: list[Any], limit: int | None) -> list[Any]:
    return rows[:limit] if limit else rows


def _pairs_from_file(rows: list[Any], all_rows: list[Any], path: str, allow_missing: bool) -> list[tuple[Any, str]]:
    """Match a responses file against all prompts, then keep the selected ones."""
    from rubric_reward.evaluation.ifeval_prompts import match_responses

    if not Path(path).is_file():
        raise FileNotFoundError(f"no responses file at {path}")
    try:
        matched = dict((row.key, (row, text)) for row, text in match_responses(all_rows, path, allow_missing=True))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}" if str(path) not in str(exc) else str(exc)) from None
    missing = [row.key for row in rows if row.key not in matched]
    if missing and not allow_missing:
        raise ValueError(f"{path}: {len(missing)} of {len(rows)} prompts have no response, e.g. keys "
                         f"{missing[:5]} (use --allow-missing to score only the others)")
    pairs = [matched[row.key] for row in rows if row.key in matched]
    if not pairs:
        raise ValueError(f"{path}: no response matches the selected prompts")
    return pairs


def _generate(rows: list[Any], args: argparse.Namespace, adapter: str | None) -> list[tuple[Any, str]]:
    from rubric_reward.evaluation.rollouts import generate_responses

    texts = generate_responses(
        [row.prompt for row in rows], model=args.model, adapter=adapter, backend=args.backend,
        base_url=args.base_url, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, seed=args.seed,
        progress=not args.no_progress, keep_think=True, merge_adapter=args.merge_adapter,
        api_key=os.environ.get(args.api_key_env) if args.backend == "openai" else None,
    )
    return list(zip(rows, texts, strict=True))


def _score(name: str, pairs: list[tuple[Any, str]], out_dir: Path, args: argparse.Namespace,
           source: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Strip think blocks, write responses.jsonl, score, write the system's files."""
    from rubric_reward.evaluation.ifeval_report import evaluate_system, write_system
    from rubric_reward.evaluation.rollouts import strip_think

    out_dir.mkdir(parents=True, exist_ok=True)
    scored, stripped = [], 0
    with (out_dir / "responses.jsonl").open("w", encoding="utf-8") as handle:
        for row, raw in pairs:
            text = raw if args.keep_think else strip_think(raw)
            record = {"key": row.key, "prompt": row.prompt, "response": text}
            if text != raw:
                stripped += 1
                record["raw_response"] = raw
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            scored.append((row, text))
    meta = {"source": source, "think_blocks_stripped": stripped, "keep_think": bool(args.keep_think)}
    system = evaluate_system(name, scored, meta=meta, progress=not args.no_progress)
    summary = write_system(out_dir, system)
    return system, summary


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Do the work for parsed ``args``; return what was written (summaries and comparison)."""
    from rubric_reward.evaluation.ifeval_prompts import load_ifeval
    from rubric_reward.evaluation.ifeval_report import overall_table, summary_table, write_comparison

    all_rows = load_ifeval(args.data)
    rows = _select(all_rows, args.limit)
    out = Path(args.out_dir)
    if args.responses:
        trained = _pairs_from_file(rows, all_rows, args.responses, args.allow_missing)
        if not args.baseline_responses:
            systems = [(Path(args.responses).stem, trained, {"responses": str(args.responses)})]
        else:
            base = _pairs_from_file(rows, all_rows, args.baseline_responses, args.allow_missing)
            common = {row.key for row, _ in base} & {row.key for row, _ in trained}  # differs only if allowed
            systems = [("base", [p for p in base if p[0].key in common], {"responses": str(args.baseline_responses)}),
                       ("trained", [p for p in trained if p[0].key in common], {"responses": str(args.responses)})]
            if not common:
                raise ValueError("the two responses files have no prompt in common")
    else:
        gen = {"model": args.model, "backend": args.backend, "max_new_tokens": args.max_new_tokens,
               "seed": args.seed, "decoding": "greedy"}
        systems = [("base", _generate(rows, args, None), {**gen, "adapter": None})]
        if args.adapter:
            systems.append(("trained", _generate(rows, args, args.adapter),
                            {**gen, "adapter": args.adapter, "merged": bool(args.merge_adapter)}))

    if len(systems) == 1:
        name, pairs, source = systems[0]
        _, summary = _score(name, pairs, out, args, source)
        print(f"IFEval ({summary['num_prompts']} prompts, {summary['num_instructions']} instructions)")
        print(summary_table(summary))
        print(f"wrote {out}")
        return {"summary": summary}

    scored = {name: _score(name, pairs, out / name, args, source) for name, pairs, source in systems}
    base, trained = scored["base"][0], scored["trained"][0]
    comparison = write_comparison(out, base, trained, n_resamples=args.bootstrap_resamples,
                                  confidence=args.confidence, seed=args.seed, alpha=args.alpha)
    for name in ("base", "trained"):
        summary = scored[name][1]
        print(f"IFEval {name} ({summary['num_prompts']} prompts, {summary['num_instructions']} instructions)")
        print(summary_table(summary) + "\n")
    print("base vs trained (delta = trained - base, points)")
    print(overall_table(comparison, confidence=args.confidence))
    print(f"wrote {out}")
    return {"summaries": {k: v[1] for k, v in scored.items()}, "comparison": comparison}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_paths(args)
    try:
        run(args)
    except (ValueError, FileNotFoundError, ImportError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
