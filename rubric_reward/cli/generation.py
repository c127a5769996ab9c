"""Command line for rubric generation: ``rubric-reward generate`` (and, registered by their owners,
the generator-training commands).

``register(subparsers)`` adds the commands to the ``rubric-reward`` parser. Exit status of
``generate``: 0 every rubric generated, 1 some failed (they are recorded; rerun to ask again for them),
2 a configuration or data error, 130 interrupted (finished rows are kept; rerun to continue).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register", "register_training"]


def _generator_spec(args: argparse.Namespace) -> Any:
    from ..generation import default_generator
    from ..judges.config import JudgeConfig

    if args.generator is None:
        return default_generator()
    if Path(args.generator).suffix in (".yaml", ".yml", ".json"):
        return args.generator
    extra = {"api_key_env": args.api_key_env} if args.api_key_env else {}
    cfg = JudgeConfig(model=args.generator, base_url=args.base_url, max_tokens=args.max_tokens or 1024, **extra)
    if cfg.resolved_backend() in ("transformers", "vllm"):
        from dataclasses import replace

        cfg = replace(cfg, verdict_mode="generate")
    return cfg


def _format(args: argparse.Namespace, generator: Any) -> str:
    """``--format``, or by default the list format for a local generator (no constrained decoding: a small
    local model follows a worked example of a list, not a JSON schema) and JSON otherwise."""
    if args.format != "auto":
        return args.format
    from ..judges.config import JudgeConfig

    cfg = generator if isinstance(generator, JudgeConfig) else None
    return "list" if cfg is not None and cfg.resolved_backend() == "transformers" else "json"


def _cmd_generate(args: argparse.Namespace) -> int:
    from ..generation import GenerationConfig, generate_rubrics

    generator = _generator_spec(args)
    form = _format(args, generator)
    from .notes import bundled_model_note

    note = bundled_model_note(generator, role="generator")
    if note:
        print(note, file=sys.stderr)
    config = GenerationConfig(level=args.level, min_criteria=args.min_criteria, max_criteria=args.max_criteria,
                              dataset_sample=args.sample, seed=args.seed,
                              max_tokens=args.max_tokens or (256 if form == "list" else 1024),
                              concurrency=args.concurrency, format=form, checks=args.checks,
                              ground_checks=args.ground_checks, keep_complete_lines=args.keep_complete_lines)
    cache: Any = None if args.no_cache else (args.cache or "auto")
    try:
        summary = generate_rubrics(args.input, args.out, generator=generator, config=config,
                                   base_url=args.base_url, cache=cache, temperature=args.temperature,
                                   progress=not args.quiet)
    except KeyboardInterrupt:
        print("interrupted; finished rubrics are saved: rerun the same command to continue", file=sys.stderr)
        return 130
    for line in summary.failures[:10]:
        print(f"failed: {line}", file=sys.stderr)
    if len(summary.failures) > 10:
        print(f"... and {len(summary.failures) - 10} more failures (see the 'error' field in {summary.out})",
              file=sys.stderr)
    print(f"{summary.ok}/{summary.n} rubrics ok, {summary.failed} failed (recorded), {summary.resumed} kept from "
          f"an earlier run; spent ${summary.cost:.4f}; wrote {summary.out}", file=sys.stderr)
    return 0 if summary.failed == 0 else 1


def register(subparsers: Any) -> None:
    """Register ``generate`` on an argparse subparsers object."""
    p = subparsers.add_parser("generate", help="write rubrics for prompts with a generator model (resumable)")
    p.add_argument("--input", required=True,
                   help="JSONL of prompts: 'prompt' (or 'conversation'/'messages'), optional 'id'")
    p.add_argument("--out", required=True, help="output JSONL (one rubric per prompt, or one for --level dataset)")
    p.add_argument("--level", default="instance", choices=["instance", "dataset"],
                   help="one rubric per prompt (instance, default) or one for the whole dataset")
    p.add_argument("--generator", help="model (litellm string, or any name with --base-url, or a local path) or a "
                   "judge YAML; default: the bundled offline SmolLM2-135M-Instruct")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--api-key-env", help="environment variable holding the API key")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: the generator's; 0.7 for the "
                   "bundled model, 0 otherwise)")
    p.add_argument("--min-criteria", type=int, default=3, help="fewest criteria a rubric may have (default 3)")
    p.add_argument("--max-criteria", type=int, default=10, help="most criteria a rubric may have (default 10)")
    p.add_argument("--format", default="auto", choices=["auto", "json", "list"],
                   help="ask for the JSON schema or a numbered list after a worked example (default auto: list for a "
                   "local transformers generator such as the bundled one, json otherwise)")
    p.add_argument("--checks", action="store_true",
                   help="offer programmatic checks ([check] lines / a 'check' field) for checkable instructions")
    p.add_argument("--ground-checks", action="store_true",
                   help="take each check's settings from the task (counts, listed words, quoted phrase) and drop a "
                   "check the task gives no value for")
    p.add_argument("--keep-complete-lines", action="store_true",
                   help="list format: read an answer cut off at --max-tokens from its complete lines instead of "
                   "asking again")
    p.add_argument("--sample", type=int, default=16, help="dataset level: prompts shown to the generator")
    p.add_argument("--seed", type=int, default=0, help="dataset level: seed of the prompt sample")
    p.add_argument("--max-tokens", type=int, help="generation budget per rubric (default 1024; 256 in the list format)")
    p.add_argument("--concurrency", type=int, default=8, help="prompts in flight")
    p.add_argument("--cache", help="reply cache file (default: cache.sqlite beside --out; share the judges' one)")
    p.add_argument("--no-cache", action="store_true", help="do not cache replies")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_generate)
    register_training(subparsers)


# ---------------------------------------------------------------------------- generator training and evaluation
def _cmd_dpo_loop(args: argparse.Namespace) -> int:
    from ..recipes.generator_dpo.loop import LoopError, load_loop_config, run_loop

    config = load_loop_config(args.config, iterations=args.iterations, out_dir=args.out_dir,
                              generator=args.generator, prompts=args.prompts, limit=args.limit,
                              train_launcher=args.train_launcher, seed=args.seed,
                              progress=False if args.quiet else None)
    try:
        summary = run_loop(config, hook=None if args.quiet else _stage_printer)
    except LoopError as exc:
        print(f"error: {exc}\nfinished stages are kept: rerun the same command to continue", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; finished stages are kept: rerun the same command to continue", file=sys.stderr)
        return 130
    for it in summary.iterations:
        prefs = it.get("preferences", {})
        adapter = it.get("adapter", {})
        print(f"iter_{it['iteration']}: {prefs.get('n_pairs')} pairs from {prefs.get('n_prompts')} prompts "
              f"({prefs.get('n_skipped')} skipped, {prefs.get('n_failed')} failed); DPO {adapter.get('global_step')} "
              f"steps, loss {adapter.get('train_loss')}", file=sys.stderr)
    if summary.heldout_table:
        print(summary.heldout_table)
        print(f"wrote {summary.out_dir / 'heldout.json'} and {summary.out_dir / 'summary.md'}", file=sys.stderr)
    print(f"done ({summary.resumed_stages} stages kept from earlier runs); the trained generator: {summary.generator}",
          file=sys.stderr)
    return 0


def _stage_printer(iteration: int, stage: str, event: str) -> None:
    print(f"[dpo-loop] iter_{iteration}/{stage}: {'started' if event == 'start' else 'done'}", file=sys.stderr)


def _cmd_eval_generator(args: argparse.Namespace) -> int:
    from ..recipes.generator_dpo.evaluate import EvalGeneratorConfig, evaluate_generators, write_train_prompts

    config = EvalGeneratorConfig.from_yaml(args.config, out_dir=args.out_dir, loop_dir=args.loop_dir,
                                           progress=False if args.quiet else None)
    if args.write_train_prompts:
        n = write_train_prompts(config, args.write_train_prompts)
        print(f"wrote {n} training prompts (the train side of the split) to {args.write_train_prompts}",
              file=sys.stderr)
        return 0
    try:
        summary = evaluate_generators(config)
    except KeyboardInterrupt:
        print("interrupted; generated rubrics and judge replies are kept: rerun to continue", file=sys.stderr)
        return 130
    print((Path(config.out_dir) / "table.md").read_text(encoding="utf-8"))
    if summary.get("warning"):
        print(f"warning: {summary['warning']}", file=sys.stderr)
    files = summary["files"]
    print(f"wrote {files['table']}, {files['results']}" + (f" and {files['plot']}" if files["plot"] else ""),
          file=sys.stderr)
    return 0


def register_training(subparsers: Any) -> None:
    """Register ``dpo-loop`` and ``eval-generator`` on an argparse subparsers object."""
    p = subparsers.add_parser("dpo-loop", help="train a rubric generator: candidates -> meta-judge -> DPO, "
                              "iterated (resumable)")
    p.add_argument("--config", required=True, help="DPO config YAML with a 'loop:' section (configs/dpo/*.yaml)")
    p.add_argument("--iterations", type=int, help="how many iterations in all (default: the config's)")
    p.add_argument("--out-dir", help="run folder (default: the config's loop.out_dir)")
    p.add_argument("--generator", help="base generator model (overrides loop.generator)")
    p.add_argument("--prompts", help="training prompts JSONL (overrides loop.prompts)")
    p.add_argument("--limit", type=int, help="use the first N prompts")
    p.add_argument("--train-launcher", choices=["python", "accelerate", "in_process"],
                   help="how DPO training runs (default: the config's loop.train_launcher)")
    p.add_argument("--seed", type=int, help="the run's seed: replaces preferences.seed and the DPO seed (replicates "
                                            "of one config; use another --out-dir per seed)")
    p.add_argument("--quiet", action="store_true", help="no progress bars or stage lines")
    p.set_defaults(func=_cmd_dpo_loop)

    p = subparsers.add_parser("eval-generator", help="compare rubric generators on held-out prompts against human "
                              "judgments (MT-Bench pairwise, HelpSteer2 pointwise)")
    p.add_argument("--config", required=True, help="evaluation YAML (see configs/dpo/eval_generator.yaml)")
    p.add_argument("--out-dir", help="output folder (default: the config's out_dir)")
    p.add_argument("--loop-dir", help="a dpo-loop folder: adds its base generator and every finished iteration")
    p.add_argument("--write-train-prompts", metavar="FILE",
                   help="only write the train side of the split as a prompts JSONL for dpo-loop, then stop")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_eval_generator)

