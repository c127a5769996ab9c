"""The GRPO recipe's report stage: generate and score completions of the base model and the best checkpoint.

After training, :func:`run_report_stage` generates greedy completions of the base model and of the best
checkpoint on the held-out report split (never used for picking the checkpoint), scores them with the training
judge (and the optional second judge), writes them to ``report_completions.jsonl``, runs IFEval transfer
(:func:`ifeval_transfer`) and hands it all to :func:`~.summary.write_summary` (``summary.md`` +
``summary.json`` in ``output_dir``). Generation is shared with the side process (:mod:`.side_process`), which
generates on the core training leaves idle: the base model's completions, a best checkpoint's completions while
training goes on, the last batches of the rest.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .arguments import RecipeArguments
from .builders import build_monitor_reward, build_second_reward, generation_kwargs, has_second_judge

__all__ = ["criterion_outcomes", "ifeval_transfer", "run_environment", "run_report_stage"]


def criterion_outcomes(record: Any) -> dict[str, dict[str, Any]]:
    """Per criterion of a reward record's rubric: ``{"kind": "check" | "judged", "passed": bool | None}``.

    Passed as :func:`rubric_reward.rewards.records.failed_criteria` reads it (the best value reached; a penalty
    when its flaw is absent; an abstention or a failed verdict is not passed). A record without a result or a
    rubric gives ``{}``; an unscored one (judging failed) gives ``passed`` None (unknown) for every criterion.
    A degenerate completion stopped by the guard has every criterion at its worst, so it passes none."""
    from ...rewards.records import failed_criteria

    rubric, result = getattr(record, "rubric", None), getattr(record, "result", None)
    if rubric is None or result is None:
        return {}
    unscored = getattr(record, "reward", None) is None
    failed = set(failed_criteria(result, rubric))
    return {c.name: {"kind": "judged" if c.is_judged else "check", "passed": None if unscored else c.name not in failed}
            for c in rubric.criteria}


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or None


def run_environment(*, seed: int | None, dtype: str | None, bf16: bool = False,
                    eval_dtype: str | None = None) -> dict[str, Any]:
    """What a run's numbers depend on besides its arguments, for comparing runs: ``seed``, ``torch_threads``,
    the policy's ``dtype``, ``bf16_autocast`` (TrainingArguments ``bf16``), whether oneDNN has bfloat16 kernels
    on this CPU (``bf16_kernels_available``: the local judge's own test, ``resolve_dtype("auto", ...)``) and
    whether the run used them (``bf16_kernels_used``: bfloat16 weights or autocast where they exist), the
    ``eval_dtype`` its monitor and report generated in (resolved), the
    ``cpu`` model (/proc/cpuinfo), ``device``, and the ``versions`` of torch, transformers, trl and peft."""
    from importlib import metadata

    import torch

    from ...judges.transformers_backend import resolve_dtype

    device = "cuda" if torch.cuda.is_available() else "cpu"
    available = resolve_dtype("auto", device) == "bfloat16"
    dtype = str(dtype) if dtype not in (None, "auto") else ("auto" if dtype == "auto" else "float32")
    versions = {}
    for name in ("torch", "transformers", "trl", "peft"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    eval_dtype = None if eval_dtype is None else resolve_dtype(eval_dtype, device)
    return {"seed": seed, "torch_threads": torch.get_num_threads(), "dtype": dtype, "bf16_autocast": bool(bf16),
            "eval_dtype": eval_dtype,
            "bf16_kernels_available": available,
            "bf16_kernels_used": available and (bool(bf16) or "bfloat16" in (dtype, eval_dtype)),
            "cpu": _cpu_model(), "device": device, "versions": versions}


def _score_split(reward: Any, rows: Sequence[Mapping[str, Any]], completions: list[str]) -> list[Any]:
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    return reward.score_batch([r["prompt"] for r in rows], completions, **columns)


def _taken(side: Any, job: str, model: str, prompts: list[Any], kwargs: dict[str, Any], adapter: str | None,
           what: str) -> list[str] | None:
    """The texts of the side process's job ``job`` when it generated this very job (``what`` says so on the
    console), else None."""
    import torch

    taken = side.take(job, model, prompts, kwargs, adapter, threads=torch.get_num_threads())
    if taken is None:
        return None
    print(f"[report] {what} generated beside training ({taken[1]:.0f} s)", flush=True)
    return taken[0]


def _generate(recipe: RecipeArguments, model: str, prompts: list[Any], adapter: str | None,
              max_new_tokens: int | None = None, keep_think: bool = False, *, side: Any = None,
              job: str | None = None) -> list[str]:
    """Greedy completions: job ``job`` of the side process when it generated this very job, else generated here."""
    from ...evaluation.rollouts import generate_responses

    kwargs = generation_kwargs(recipe, max_new_tokens)
    if side is not None and job is not None and not keep_think:
        taken = _taken(side, job, model, prompts, kwargs, adapter, f"{job}: {len(prompts)} completions")
        if taken is not None:
            return taken
    return generate_responses(prompts, model=model, adapter=adapter, keep_think=keep_think, **kwargs)


def side_batches(n_prompts: int, batch_size: int, queued_after: int = 0) -> int:
    """How many of ``n_prompts``' last batches the side process generates while this process generates the rest,
    when ``queued_after`` more prompts wait for the side process after them: the two finish about together."""
    batches = -(-n_prompts // batch_size)
    return max(0, (batches - -(-queued_after // batch_size)) // 2)


def _generate_shared(recipe: RecipeArguments, model: str, prompts: list[Any], adapter: str, side: Any, job: str,
                     then: tuple[str, list[Any], dict[str, Any]] | None = None,
                     max_new_tokens: int | None = None) -> list[str]:
    """Greedy completions of ``prompts``: the last batches as job ``job`` of the side process (``then`` queued
    after it), the others here, at the same time. Cut at a batch boundary of the batching order, so the batches
    and texts are those of one call; without a side process, or for a side job that failed, generated here."""
    from ...evaluation.rollouts import greedy_batch_order

    share = 0
    if side is not None and side.alive and recipe.generation_backend == "transformers":
        share = side_batches(len(prompts), recipe.eval_batch_size, len(then[1]) if then else 0)
    cut = len(prompts) - share * recipe.eval_batch_size
    cut += (-cut) % recipe.eval_batch_size  # the last batch may be short: keep the full ones here
    order = greedy_batch_order(prompts, model=model, adapter=adapter) if cut < len(prompts) else None
    tail = [] if order is None else [prompts[i] for i in order[cut:]]
    if tail:
        side.submit(job, model, tail, generation_kwargs(recipe, max_new_tokens), adapter=adapter)
    if then is not None and side is not None:
        side.submit(then[0], model, *then[1:], adapter=adapter)
    if not tail:
        return _generate(recipe, model, prompts, adapter, max_new_tokens)
    texts = _generate(recipe, model, [prompts[i] for i in order[:cut]], adapter, max_new_tokens)
    texts += _generate(recipe, model, tail, adapter, max_new_tokens, side=side, job=job)
    out = [""] * len(prompts)
    for i, text in zip(order, texts, strict=True):
        out[i] = text
    return out


AHEAD_PREFIX = "report-step-"


def best_report_job(step: int) -> str:
    """The side-process job of checkpoint ``step``'s report completions, queued while training goes on when the
    checkpoint became the best so far (so the report of a best that is not the last checkpoint is ready)."""
    return f"{AHEAD_PREFIX}{step:05d}"


def cancel_other_bests(side: Any, keep: str | None = None) -> None:
    """Cancel the side process's report-ahead jobs but ``keep``: the report is wanted for one checkpoint only."""
    for name in side.submitted(AHEAD_PREFIX):
        if name != keep:
            side.cancel(name)


def _generated_ahead(recipe: RecipeArguments, model: str, prompts: list[Any], best_info: Mapping[str, Any],
                     side: Any) -> list[str] | None:
    """The best checkpoint's report completions if the side process generated them from that very checkpoint's
    weights while training went on (waiting for it if it is still at them), else None."""
    step, checkpoint = best_info.get("step"), best_info.get("checkpoint")
    if side is None:
        return None
    cancel_other_bests(side, None if step is None else best_report_job(int(step)))  # the side is wanted here
    if step is None or not checkpoint:
        return None
    return _taken(side, best_report_job(int(step)), model, prompts, generation_kwargs(recipe), str(checkpoint),
                  f"best (step {step}): {len(prompts)} report completions")


def _ifeval_max_new_tokens(recipe: RecipeArguments) -> int:
    return recipe.ifeval_max_new_tokens or recipe.eval_max_new_tokens


def _ifeval_job(recipe: RecipeArguments) -> tuple[list[Any], dict[str, Any]]:
    """The report's IFEval prompts and their generation arguments."""
    return ([r.prompt for r in ifeval_rows(recipe, recipe.ifeval_seed)],
            generation_kwargs(recipe, _ifeval_max_new_tokens(recipe)))


def base_jobs(recipe: RecipeArguments, model: str, splits: Any) -> dict[str, tuple[list[Any], dict[str, Any]]]:
    """The base model's generations the report will make (name -> prompts, ``generate_responses`` arguments):
    what :mod:`.side_process` can generate beside training."""
    jobs = {"report": ([r["prompt"] for r in splits.report], generation_kwargs(recipe))}
    if recipe.ifeval:
        jobs["ifeval"] = _ifeval_job(recipe)
    return {name: job for name, job in jobs.items() if job[0]}


def run_report_stage(recipe: RecipeArguments, training: Any, model: Any, splits: Any, *,
                     train_seconds: float | None = None, model_ref: str | None = None, side: Any = None) -> Path:
    """Base vs best on the report split (training judge, optional second judge), IFEval; write the summary.
    ``side``: a :class:`~.side_process.SideGenerator`; it has the base model's completions, and the best
    checkpoint's report completions when it became the best while training went on; else it generates their last
    batches while the others are generated here, then the best checkpoint's IFEval completions (or, when the report
    was ready, the last batches of those)."""
    from ...io.journal import write_atomic
    from .comparison import PERFECT
    from .monitor import BEST_DIR, BEST_FILE, checkpoints_looked_at, read_records, score_values, token_lengths
    from .summary import REPORT_FILE, report_row, write_summary

    out = Path(training.output_dir)
    records = read_records(out / "monitor.jsonl")
    best_dir = out / BEST_DIR
    if (best_dir / BEST_FILE).is_file():
        best_info = json.loads((best_dir / BEST_FILE).read_text())
        adapter = str(best_dir)
    else:  # no monitor: the final weights are "best"
        best_info = {"step": None, "checkpoint": str(out), "note": "no monitor: final weights"}
        adapter = str(out)
    rows = list(splits.report)
    prompts = [r["prompt"] for r in rows]
    base_model = model.model_name_or_path
    judge_reward = build_monitor_reward(recipe)
    metric = judge_reward.config.reward
    print(f"[report] base vs best (step {best_info.get('step')}) on {len(rows)} report prompts", flush=True)
    then = ("ifeval-trained", *_ifeval_job(recipe)) if recipe.ifeval else None
    texts = {"base": _generate(recipe, base_model, prompts, None, side=side, job="report")}
    ahead = _generated_ahead(recipe, base_model, prompts, best_info, side)
    if ahead is None:
        texts["best"] = _generate_shared(recipe, base_model, prompts, adapter, side, "report-best", then)
    else:  # the IFEval completions are shared out below, as the report's would have been
        texts["best"] = ahead
    judges = {"judge": judge_reward}
    if has_second_judge(recipe):
        judges["second_judge"] = build_second_reward(recipe)
    scores: dict[str, dict[str, list[float | None]]] = {}
    perfect: dict[str, dict[str, list[bool | None]]] = {}
    outcomes: dict[str, dict[str, list[dict[str, dict[str, Any]]]]] = {}
    for name, reward in judges.items():
        results = {system: _score_split(reward, rows, texts[system]) for system in texts}
        scores[name] = {system: score_values(res, reward.config.reward) for system, res in results.items()}
        perfect[name] = {system: [None if v is None else v >= PERFECT for v in score_values(res, "score")]
                         for system, res in results.items()}
        outcomes[name] = {system: [criterion_outcomes(rec) for rec in res] for system, res in results.items()}
        reward.close()
    tokens = {system: token_lengths(base_model, texts[system]) for system in texts}

    def criteria(i: int) -> dict[str, dict[str, dict[str, Any]]]:
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for j, per in outcomes.items():
            names = list(dict.fromkeys([*per["base"][i], *per["best"][i]]))
            out[j] = {c: {"kind": (per["base"][i].get(c) or per["best"][i].get(c))["kind"],
                          **{s: (per[s][i].get(c) or {}).get("passed") for s in texts}} for c in names}
        return out

    report_rows = [report_row(row, {s: texts[s][i] for s in texts}, {s: tokens[s][i] for s in texts},
                              {j: {s: scores[j][s][i] for s in texts} for j in scores},
                              {j: {s: perfect[j][s][i] for s in texts} for j in perfect}, criteria(i))
                   for i, row in enumerate(rows)]
    write_atomic(out / REPORT_FILE, "".join(
        json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in report_rows))
    ifeval = None
    if recipe.ifeval:
        ifeval = ifeval_transfer(recipe, base_model, adapter, out / "ifeval", seed=recipe.ifeval_seed, side=side)
    return write_summary(
        out, monitor=records, best=best_info, report_rows=report_rows, metric=metric,
        looked_at=checkpoints_looked_at(records), ifeval=ifeval,
        splits={"train": len(splits.train), "selection": len(splits.selection), "report": len(rows)},
        n_resamples=recipe.bootstrap_resamples, confidence=recipe.confidence, seed=training.seed,
        meta={"model": model_ref or base_model, "dataset": recipe.dataset_name, "train_seconds": train_seconds,
              "recipe": asdict(recipe), "max_steps": training.max_steps,
              "environment": run_environment(seed=training.seed, dtype=getattr(model, "dtype", None),
                                             bf16=bool(getattr(training, "bf16", False)),
                                             eval_dtype=recipe.eval_dtype)},
    )


def ifeval_rows(recipe: RecipeArguments, seed: int = 0) -> list[Any]:
    """The IFEval prompts of the report: those with a wanted instruction type, a seeded subset of ``ifeval_limit``."""
    from ...evaluation import load_ifeval

    rows = load_ifeval()
    if recipe.ifeval_types:
        wanted = set(recipe.ifeval_types)
        rows = [r for r in rows if wanted & set(r.instruction_id_list)]
    if recipe.ifeval_limit and recipe.ifeval_limit < len(rows):
        rows = sorted(random.Random(seed).sample(rows, recipe.ifeval_limit), key=lambda r: r.key)
    return rows


def ifeval_transfer(recipe: RecipeArguments, model: str, adapter: str, out_dir: Path, *, seed: int = 0,
                    side: Any = None) -> dict:
    """IFEval base vs trained (``eval/ifeval.py``'s machinery) on all prompts or a seeded subset."""
    from ...evaluation import evaluate_system, write_comparison, write_system

    rows = ifeval_rows(recipe, seed)
    print(f"[report] IFEval transfer on {len(rows)} prompts", flush=True)
    max_new = _ifeval_max_new_tokens(recipe)
    systems = {}
    prompts = [r.prompt for r in rows]
    for name, ad, job in (("base", None, "ifeval"), ("trained", adapter, "ifeval-trained")):
        if ad is not None and side is not None and job not in side.keys:  # not queued after the report
            texts = _generate_shared(recipe, model, prompts, ad, side, f"{job}-tail", max_new_tokens=max_new)
        else:
            texts = _generate(recipe, model, prompts, ad, max_new, side=side, job=job)
        systems[name] = evaluate_system(name, list(zip(rows, texts, strict=True)),
                                        meta={"model": model, "adapter": ad, "max_new_tokens": max_new})
        write_system(out_dir / name, systems[name])
    write_comparison(out_dir, systems["base"], systems["trained"], n_resamples=recipe.bootstrap_resamples,
                     confidence=recipe.confidence, seed=seed)
    comparison = json.loads((out_dir / "comparison.json").read_text(encoding="utf-8"))
    return {"dir": str(out_dir), "num_prompts": len(rows), "seed": seed, "types_wanted": recipe.ifeval_types,
            "comparison": comparison}
