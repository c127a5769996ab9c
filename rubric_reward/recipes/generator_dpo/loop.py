"""The generator-training loop: candidates -> meta-judge -> pairs -> DPO -> merged model -> next generator,
and after every iteration a held-out evaluation of base vs current generator.

``rubric-reward dpo-loop --config configs/dpo/X.yaml --iterations 2``. The YAML is read and checked once
(:mod:`.loop_config`). Iteration ``i`` samples candidate rubrics with the current generator (the base
model for ``i = 1``, ``iter_{i-1}/merged`` after that), builds preference pairs with the meta-judge
(:func:`~rubric_reward.generation.preferences.build_preferences`), trains a new LoRA on the current
generator with DPO, merges it into that generator, which becomes the next one (the paper's recipe), and,
with a ``heldout:`` section, compares that generator with the base one on held-out labelled pairs
(:mod:`.heldout`).

Layout of ``out_dir``::

    loop.json             the config fingerprint (a resumed run must match it) and the stages done
    config.yaml           the config file as used
    prompts.jsonl         the training prompts (ids and prompts only; an evaluation checks it for leaks)
    cache.sqlite          the reply cache shared by generator and meta-judge calls
    heldout.json          the latest held-out comparison (base vs the last finished iteration)
    summary.md            the held-out table, one row per iteration, and per instruction type
    spread.json           the outcome meta-judge's spread on a probe and the criteria it scores with (.spread)
    heldout/base/         the base generator's held-out rubrics and outcomes (computed once)
    iter_1/
      preferences/        candidates.jsonl, transcripts.jsonl (the meta-judge's judgements),
                          prompts.jsonl (per-prompt status), dataset/ (the DPO pairs), manifest.json
      adapter/            the LoRA adapter, dpo_summary.json, train.log, checkpoints of an unfinished run
      merged/             the merged model: the next iteration's generator
      heldout/            this generator's held-out rubrics and outcomes, heldout.json
      preferences.done.json, adapter.done.json, merged.done.json, heldout.done.json   completion markers

Resuming: a stage is finished when its marker exists; markers are written atomically, after the
stage's output is complete, so a crash at any point leaves a stage either finished or not. Finished
stages are never redone. An unfinished ``preferences`` stage resumes from its journals (finished
prompts are kept, recorded candidates and judgements reused); an unfinished ``adapter`` stage
resumes from its last DPO checkpoint (when the config saves checkpoints); ``merged`` is rewritten
(it appears atomically); ``heldout`` reuses its rubric journals and the reply cache.
"""

from __future__ import annotations

import copy
import gc
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...io.journal import write_atomic
from .loop_config import LAUNCHERS, LoopConfig, load_loop_config, seed_argv

__all__ = ["LAUNCHERS", "STAGES", "LoopConfig", "LoopError", "LoopSummary", "iteration_generators", "load_loop_config",
           "run_loop"]

log = logging.getLogger(__name__)

STAGES = ("preferences", "adapter", "merged", "heldout")


class LoopError(RuntimeError):
    """A stage could not finish; the message names the iteration, the stage and where to look."""


@dataclass(frozen=True)
class LoopSummary:
    """What ``run_loop`` did: the final generator, per iteration the stage summaries, the held-out table."""

    out_dir: Path
    generator: str
    iterations: list[dict[str, Any]]
    resumed_stages: int
    heldout_table: str | None = None
    spread: dict[str, Any] | None = None


Hook = Callable[[int, str, str], None]  # (iteration, stage, "start" | "done")


def run_loop(config: LoopConfig, *, generator_factory: Callable[[str, int], Any] | None = None,
             hook: Hook | None = None) -> LoopSummary:
    """Run (or resume) ``config.iterations`` iterations; see the module docstring.

    ``generator_factory(model, iteration)`` returns the generator spec for sampling candidates with
    ``model`` (default: a JudgeConfig on ``generator_backend``); the held-out rubrics use the same spec
    at the held-out temperature. ``hook(iteration, stage, event)`` is called at every stage boundary
    (progress reporting, tests that crash on purpose).
    """
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = _open_state(out, config)
    prompts_file = _write_prompts(out, config)
    factory = generator_factory or _default_factory(config)
    hook = hook or (lambda i, s, e: None)
    cache = str(out / "cache.sqlite") if config.cache else None
    generator = str(config.generator)
    done_before = 0
    report: list[dict[str, Any]] = []
    stages = STAGES if config.heldout is not None else STAGES[:-1]
    spread = _outcome_criteria(config, out, prompts_file, cache)
    for i in range(1, config.iterations + 1):
        it = out / f"iter_{i}"
        it.mkdir(exist_ok=True)
        record: dict[str, Any] = {"iteration": i, "generator": generator}
        merged = str((it / "merged").resolve())
        for stage in stages:
            marker = it / f"{stage}.done.json"
            if marker.is_file():
                record[stage] = json.loads(marker.read_text())
                done_before += 1
                continue
            hook(i, stage, "start")
            started = time.perf_counter()
            if stage == "preferences":
                info = _stage_preferences(config, it, prompts_file, factory(generator, i), cache, spread)
            elif stage == "adapter":
                info = _stage_adapter(config, it, generator)
            elif stage == "merged":
                info = _stage_merge(config, it, generator)
            else:
                info = _stage_heldout(config, out, it, factory, merged, i, cache)
            info = {"stage": stage, "iteration": i, "generator": generator,
                    "seconds": round(time.perf_counter() - started, 2), "finished_at": _now(), **info}
            write_atomic(marker, json.dumps(info, indent=2, default=str) + "\n")
            _release_memory()  # a stage's models and batches go before the next stage loads its own
            record[stage] = info
            state["done"].append(f"iter_{i}/{stage}")
            write_atomic(out / "loop.json", json.dumps(state, indent=2, default=str) + "\n")
            hook(i, stage, "done")
        report.append(record)
        generator = merged
    table = _write_summary(out, report, spread) if config.heldout is not None else None
    return LoopSummary(out, generator, report, done_before, table, spread)


def _outcome_criteria(config: LoopConfig, out: Path, prompts_file: Path, cache: str | None) -> dict[str, Any]:
    """Which criteria the outcome meta-judge scores with (:mod:`.spread`), decided once per loop folder and
    said on the console."""
    from ...generation.prompt_rows import load_prompts
    from .spread import decide_outcome_criteria, spread_line

    decision = decide_outcome_criteria(config, out, load_prompts(prompts_file), cache)
    if config.meta.mode == "outcome":
        print(f"[dpo-loop] {spread_line(decision)}", file=sys.stderr, flush=True)
    return decision


def _release_memory() -> None:
    """Collect garbage, then hand freed heap back to the OS (glibc keeps freed memory of the worker threads'
    arenas mapped, so without the trim a finished stage's batches stay in the peak RSS of the next)."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _open_state(out: Path, config: LoopConfig) -> dict[str, Any]:
    path = out / "loop.json"
    fp = config.fingerprint()
    if path.is_file():
        state = json.loads(path.read_text())
        if state.get("fingerprint") != fp:
            raise LoopError(f"{out}: this folder holds a loop run with a different configuration (fingerprint "
                            f"{state.get('fingerprint')} != {fp}); use another out_dir, or restore the config")
        return state
    state = {"fingerprint": fp, "started_at": _now(), "config": config.to_dict(), "done": []}
    if config.config_path:
        shutil.copyfile(config.config_path, out / "config.yaml")
    write_atomic(path, json.dumps(state, indent=2, default=str) + "\n")
    return state


def _write_prompts(out: Path, config: LoopConfig) -> Path:
    from .labelled_pairs import load_rows

    if config.prompts == "offline":
        from ...data import load_offline_prompts

        rows: list[dict[str, Any]] = [{"id": p.id, "prompt": p.prompt} for p in load_offline_prompts()]
    else:
        rows = [{"id": r.id, "prompt": r.prompt, **({"labels": list(r.labels)} if r.labels else {})}
                for r in load_rows(config.prompts)]
    if config.limit is not None:
        rows = rows[: config.limit]
    path = out / "prompts.jsonl"
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if path.is_file():
        if path.read_text(encoding="utf-8") != text:
            raise LoopError(f"{path}: the training prompts changed since this loop started; use another out_dir")
    else:
        write_atomic(path, text)
    return path


def _default_factory(config: LoopConfig) -> Callable[[str, int], Any]:
    return config.generator_judge  # checked once when the config was built


def _stage_preferences(config: LoopConfig, it: Path, prompts: Path, generator: Any, cache: str | None,
                       spread: dict[str, Any] | None = None) -> dict:
    from ...generation.preferences import build_preferences
    from ...judges.cache import SQLiteCache

    criteria = (spread or {}).get("criteria", "all")
    reply_cache = SQLiteCache(cache) if cache else None
    meta_judge: Any = config.meta_judge
    if criteria == "checks":  # the outcome meta-judge on each candidate's check criteria only (.spread)
        from .spread import ChecksOnlyMetaJudge

        meta_judge = ChecksOnlyMetaJudge(config.meta_judge, config=config.meta, cache=reply_cache)
    try:
        summary = build_preferences(prompts, it / "preferences", generator=generator, meta_judge=meta_judge,
                                    config=config.preferences, generation=config.generation, meta=config.meta,
                                    cache=reply_cache, progress=config.progress)
    finally:
        if meta_judge is not config.meta_judge:
            meta_judge.close()
        if reply_cache is not None:
            reply_cache.close()
    info = {"n_prompts": summary.n_prompts, "n_pairs": summary.n_pairs, "n_skipped": summary.n_skipped,
            "n_failed": summary.n_failed, "cost": summary.cost, "dataset": str(summary.dataset_path),
            "outcome_criteria": criteria}
    if summary.n_pairs < config.min_pairs:
        raise LoopError(f"{it.name}/preferences: {summary.n_pairs} preference pair(s) from {summary.n_prompts} "
                        f"prompts ({summary.n_skipped} skipped, {summary.n_failed} failed; min_pairs is "
                        f"{config.min_pairs}); see {it / 'preferences' / 'prompts.jsonl'}. Rerun to retry the "
                        "failed prompts, or change the generator or meta-judge")
    if summary.n_failed:
        log.warning("%s/preferences: %d prompt(s) failed and are left out (see prompts.jsonl)", it.name,
                    summary.n_failed)
    return info


def _stage_adapter(config: LoopConfig, it: Path, generator: str) -> dict:
    from .dpo import ADAPTER_FILES

    adapter = it / "adapter"
    adapter.mkdir(exist_ok=True)
    dataset = str(it / "preferences" / "dataset")
    if config.train_launcher == "in_process":
        _train_in_process(config, generator, dataset, adapter)
    else:
        _train_subprocess(config, it, generator, dataset, adapter)
    missing = [f for f in ADAPTER_FILES if not (adapter / f).is_file()]
    if missing:
        raise LoopError(f"{it.name}/adapter: training finished without {', '.join(missing)} in {adapter}")
    summary_file = adapter / "dpo_summary.json"
    return {"adapter": str(adapter), **(json.loads(summary_file.read_text()) if summary_file.is_file() else {})}


def _train_in_process(config: LoopConfig, generator: str, dataset: str, adapter: Path) -> None:
    """DPO on the typed arguments parsed when the config was loaded (copies, with this iteration's paths)."""
    from dataclasses import replace

    from .dpo import train

    if config.dpo_args is None:
        raise LoopError("the in-process DPO stage needs the parsed DPO settings (load the config with "
                        "load_loop_config)")
    script, training, model = (copy.deepcopy(a) for a in config.dpo_args)
    script = replace(script, dataset_path=dataset)
    training.output_dir = str(adapter)
    model.model_name_or_path = generator
    train(script, training, model)


def _train_subprocess(config: LoopConfig, it: Path, generator: str, dataset: str, adapter: Path) -> None:
    """DPO in a child process (``python`` or ``accelerate launch``): it reads the same, already checked, file."""
    if not config.config_path:
        raise LoopError("the DPO stage needs the config file (load the config with load_loop_config)")
    argv = ["--config", config.config_path, "--model_name_or_path", generator, "--dataset_path", dataset,
            "--output_dir", str(adapter), *seed_argv(config.seed)]
    cmd = [sys.executable, "-m", "rubric_reward.recipes.generator_dpo.dpo", *argv]
    if config.train_launcher == "accelerate":
        # the launcher of this interpreter's environment, whether or not its bin/ is on PATH
        cmd = [sys.executable, "-m", "accelerate.commands.launch", *config.accelerate_args,
               "-m", "rubric_reward.recipes.generator_dpo.dpo", *argv]
    logfile = adapter / "train.log"
    log.warning("%s: training the adapter: %s (log: %s)", it.name, " ".join(cmd), logfile)
    with open(logfile, "a", encoding="utf-8") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env={**os.environ}).returncode
    if rc != 0:
        tail = logfile.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
        raise LoopError(f"{it.name}/adapter: DPO training exited with status {rc}; see {logfile}:\n"
                        + "\n".join(tail))


def _stage_merge(config: LoopConfig, it: Path, generator: str) -> dict:
    from .dpo import merge_adapter

    merged = merge_adapter(generator, it / "adapter", it / "merged", dtype=config.merge_dtype)
    return {"merged": str(merged.resolve()), "base": generator}


def _stage_heldout(config: LoopConfig, out: Path, it: Path, factory: Callable[[str, int], Any], merged: str,
                   iteration: int, cache: str | None) -> dict:
    from .heldout import compare_on_heldout

    result = compare_on_heldout(config, base=factory(str(config.generator), 1), trained=factory(merged, iteration + 1),
                                base_dir=out / "heldout" / "base", trained_dir=it / "heldout", cache=cache)
    text = json.dumps(result, indent=2, default=str) + "\n"
    write_atomic(it / "heldout.json", text)
    write_atomic(out / "heldout.json", text)
    return {"heldout": str(it / "heldout.json"), "base_agreement": result["base"]["agreement"],
            "trained_agreement": result["trained"]["agreement"], "difference": result["difference"],
            "pvalue": result["pvalue"]}


def _write_summary(out: Path, report: list[dict[str, Any]], spread: dict[str, Any] | None = None) -> str:
    from .heldout import render_heldout_table
    from .spread import spread_line

    rows = [json.loads(Path(r["heldout"]["heldout"]).read_text()) for r in report if "heldout" in r]
    table = render_heldout_table(rows)
    if spread is not None and spread.get("mode") == "outcome":
        table += f"\nPreferences: {spread_line(spread)}.\n"
    write_atomic(out / "summary.md", table)
    return table


def iteration_generators(out_dir: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, judge spec)]`` of a loop folder: the base generator, then each iteration's merged model,
    each on the loop's ``generator_backend`` in generate mode (a hub id must not fall through to litellm)."""
    out = Path(out_dir)
    state_file = out / "loop.json"
    if not state_file.is_file():
        raise FileNotFoundError(f"{out}: not a dpo-loop folder (no loop.json)")
    config = json.loads(state_file.read_text())["config"]
    gen = config.get("generation") or {}
    engine_args = dict(config.get("generator_engine_args") or {})

    def spec(model: str) -> dict[str, Any]:
        out = {"model": model, "backend": config.get("generator_backend", "transformers"),
               "verdict_mode": "generate", "max_tokens": int(gen.get("max_tokens", 1024))}
        return {**out, "engine_args": engine_args} if engine_args else out

    models = [("base", spec(str(config["generator"])))]
    i = 1
    while (out / f"iter_{i}" / "merged.done.json").is_file():
        models.append((f"iter_{i}", spec(str((out / f"iter_{i}" / "merged").resolve()))))
        i += 1
    return models
