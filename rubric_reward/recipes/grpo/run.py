"""The GRPO run: train with TRL's ``GRPOTrainer`` (LoRA when ``use_peft``), monitor checkpoints, then report.

:func:`run`

1. loads the prompts and makes the seeded train / selection / report split (:func:`~.builders.build_splits`);
2. builds the reward (:func:`~.builders.build_reward`: a :class:`~rubric_reward.rl.RubricReward` from
   ``reward_config`` with ``judge`` / ``judge_base_url`` / ``rubric`` overriding it);
3. builds the checkpoint monitor (:func:`~.builders.build_monitor`, on the selection split);
4. with a ``qualify:`` section, qualifies the judge on the base model's completions first (:mod:`.gate`: the
   judge card; ``on_fail: stop`` ends the run before training);
5. trains, resuming with ``resume_from_checkpoint`` (``true``/``last``: the newest *complete* checkpoint,
   :mod:`.checkpoints`; one already at ``max_steps`` is not trained further: the run finishes from it);
6. runs the report stage (:func:`~.report_stage.run_report_stage`): generates and scores the base and best
   checkpoint's completions on the held-out report split, then writes ``summary.md`` + ``summary.json`` (with the
   judge card).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from .arguments import RecipeArguments
from .builders import build_dataset, build_monitor, build_reward, build_splits, reward_funcs, train_rows
from .checkpoints import STATE_FILE, resume_checkpoint, trained_steps
from .ranks import is_main_process, say
from .report_stage import run_report_stage

__all__ = ["run"]


class _TrainerLog:
    """Sends monitor metrics through the trainer's loggers without GRPOTrainer's metric averaging."""

    def __init__(self) -> None:
        self.trainer: Any = None

    def __call__(self, metrics: dict[str, float]) -> None:
        if self.trainer is not None:
            from transformers import Trainer

            # Trainer.log clears control.should_log; called from a step-end hook that would cancel the step's own
            # log (its metrics merged into the next step's), so the flag is put back
            should_log = self.trainer.control.should_log
            Trainer.log(self.trainer, dict(metrics))
            self.trainer.control.should_log = should_log


def _has_accelerator() -> bool:
    import torch

    accelerator = getattr(torch, "accelerator", None)
    return accelerator.is_available() if accelerator is not None else torch.cuda.is_available()


def resolve_policy_dtype(model: Any, training: Any) -> str | None:
    """Turn ``dtype: auto`` into the dtype this device computes fast and return it: bfloat16 on a GPU or on a
    CPU whose oneDNN has bfloat16 kernels (AVX-512 or AMX), float32 elsewhere (the rule the local judge and the
    generator use for ``engine_args: {dtype: auto}``). Any other value is kept."""
    if model.dtype != "auto":
        return model.dtype
    from ...judges.transformers_backend import resolve_dtype

    device = "cuda" if _has_accelerator() and not training.use_cpu else "cpu"
    model.dtype = resolve_dtype("auto", device)
    say(f"[grpo] dtype auto: {model.dtype} on this {'GPU' if device == 'cuda' else 'CPU'}")
    return model.dtype


def _print_where(training: Any, monitor: bool, extra: str = "") -> None:
    if not is_main_process():
        return
    out = Path(training.output_dir).resolve()
    parts = ["checkpoints"] if training.save_strategy != "no" else []
    parts += ["monitor.jsonl, monitor.png, best/"] if monitor else []
    parts += ["train_log.jsonl"] + ([extra] if extra else [])
    print(f"[grpo] output: {out} ({', '.join(parts)})", flush=True)


def _finish_without_training(trainer: Any, checkpoint: str, monitor: Any, training: Any) -> None:
    """The state a run that trained to ``checkpoint`` ends in: its weights loaded, and the monitor caught up
    (a checkpoint saved but not yet scored when the run was killed is scored now), as ``train`` would."""
    from transformers.trainer_callback import TrainerState

    trainer._load_from_checkpoint(checkpoint)
    if monitor is not None:
        state = TrainerState.load_from_json(str(Path(checkpoint) / STATE_FILE))
        state.is_world_process_zero = trainer.is_world_process_zero()
        monitor.on_train_begin(training, state, trainer.control)
        monitor.on_train_end(training, state, trainer.control)


def _start_side(recipe: RecipeArguments, training: Any, model: Any, splits: Any, threads: int) -> Any:
    """The side process generating the monitor's and the report's completions beside training
    (:mod:`.side_process`), when wanted; the base model's report completions are queued at once."""
    from ...util.threads import available_cpus
    from . import side_process

    if not ((recipe.final_report or recipe.monitor) and is_main_process()):
        return None
    on_cpu = bool(training.use_cpu) or not _has_accelerator()
    if not side_process.wanted(recipe.side_generation, backend=recipe.generation_backend, on_cpu=on_cpu,
                               world_size=int(os.environ.get("WORLD_SIZE", "1") or 1), threads=threads,
                               cpus=available_cpus()):
        return None
    from ...io.models import resolve_model
    from .report_stage import base_jobs

    side = side_process.SideGenerator.start(training.output_dir, threads)
    say(f"[grpo] side process (pid {side.process.pid}, nice 10): generates the monitor's and the report's "
        "greedy completions on the CPU training leaves idle")
    if recipe.final_report:
        policy = resolve_model(model.model_name_or_path)  # the path the report generates with
        for name, (prompts, kwargs) in base_jobs(recipe, policy, splits).items():
            side.submit(name, policy, prompts, kwargs)
    return side


def _report_ahead(recipe: RecipeArguments, model: Any, splits: Any, side: Any) -> Any:
    """The monitor's ``on_best``: queue a new best checkpoint's report completions in the side process (a job that
    gives way to the monitor's, and replaces the previous best's), so that the report of a best that is not the
    last checkpoint finds them generated."""
    from ...io.models import resolve_model
    from .report_stage import base_jobs, best_report_job, cancel_other_bests

    policy = resolve_model(model.model_name_or_path)  # the path the report generates with
    job = base_jobs(recipe, policy, splits).get("report")
    if job is None:
        return None
    prompts, kwargs = job

    def queue(step: int, checkpoint: Path) -> None:
        cancel_other_bests(side)  # an earlier best's report is no longer the one wanted
        side.submit(best_report_job(step), policy, prompts, kwargs, checkpoint, yields=True)

    return queue


def _qualify_gate(recipe: RecipeArguments, training: Any, model: Any, splits: Any) -> dict[str, Any] | None:
    """The judge gate (:mod:`.gate`) before training; its stop is the recipe's one-line exit 2."""
    from .check import ConfigError
    from .gate import GateStop, qualify_gate

    try:
        return qualify_gate(recipe, training, model, splits)
    except GateStop as exc:
        raise ConfigError(str(exc)) from None


def run(recipe: RecipeArguments, training: Any, model: Any, *, splits: Any = None) -> Path | None:
    """Train, monitor and report (see the module docstring); return the summary path (main process).
    ``splits``: the data as :func:`load_splits` loaded it (loaded here when None)."""
    from trl import GRPOTrainer, get_peft_config

    from ...util.threads import available_cpus, set_torch_threads
    from .shaping import build_shaping

    started = time.monotonic()
    threads = set_torch_threads(recipe.torch_threads)
    source = ("torch_threads" if recipe.torch_threads is not None
              else "OMP_NUM_THREADS, which accelerate launch sets" if os.environ.get("OMP_NUM_THREADS")
              else "CPUs / local processes")
    say(f"[grpo] torch threads: {threads} of {available_cpus()} CPUs (from {source}), OMP_WAIT_POLICY="
         f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}")
    splits = build_splits(recipe, splits)
    if is_main_process():
        splits.write_manifest(Path(training.output_dir) / "splits.json")
    card = _qualify_gate(recipe, training, model, splits)
    side = _start_side(recipe, training, model, splits, threads)
    reward = build_reward(recipe).bind(training)
    shaping = build_shaping(recipe.shaping_rewards, training.max_completion_length, training.reward_weights,
                            per_criterion=recipe.per_criterion_rewards)
    rows = train_rows(recipe, training, splits)
    funcs = reward_funcs(recipe, training, reward, rows, shaping)
    callbacks = []
    monitor = None
    log = _TrainerLog()
    if recipe.monitor:
        monitor = build_monitor(recipe, training, model, splits.selection, reward)
        monitor.log, monitor.side = log, side
        if side is not None and recipe.final_report:
            monitor.on_best = _report_ahead(recipe, model, splits, side)
        callbacks.append(monitor)
    if training.dataloader_pin_memory and not _has_accelerator():
        training.dataloader_pin_memory = False  # pinned memory needs an accelerator; torch warns at every epoch
    resolve_policy_dtype(model, training)
    model_kwargs = dict(training.model_init_kwargs or {})
    if model.dtype and "dtype" not in model_kwargs:
        model_kwargs["dtype"] = model.dtype
    training.model_init_kwargs = model_kwargs or None
    from ...io.models import resolve_model

    model_ref = model.model_name_or_path  # as the user named it, for the summary
    policy = resolve_model(model_ref)
    model.model_name_or_path = policy
    trainer = GRPOTrainer(model=policy, reward_funcs=funcs, args=training, train_dataset=build_dataset(rows),
                          peft_config=get_peft_config(model),
                          callbacks=callbacks)
    if training.use_vllm:
        from .vllm_sync import repack_colocated_sync

        repack_colocated_sync(trainer)
    log.trainer = trainer
    from .console import use_step_log

    use_step_log(trainer, training.output_dir, reward.config.metric_prefix)
    _print_where(training, recipe.monitor)
    resume, notes = resume_checkpoint(training.resume_from_checkpoint, training.output_dir)
    for note in notes:
        say(f"[grpo] {note}")
    done = trained_steps(resume) if resume is not None else 0
    if resume is not None and 0 < training.max_steps <= done:
        # GRPOTrainer would train one step past max_steps before it looks (and save and monitor that step too)
        say(f"[grpo] {Path(resume).name} is at step {done} of max_steps {training.max_steps}: nothing left to "
            "train; finishing")
        _finish_without_training(trainer, resume, monitor, training)
    else:
        trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(training.output_dir)
    train_seconds = time.monotonic() - started
    is_main = trainer.accelerator.is_main_process
    reward.close()
    log.trainer = None
    del trainer
    import gc

    from ...util.cpu_memory import release_freed_memory

    gc.collect()
    release_freed_memory()  # training's kept heap goes back before the report loads its models
    summary = None
    if recipe.final_report and is_main:
        summary = run_report_stage(recipe, training, model, splits, train_seconds=train_seconds,
                                   model_ref=model_ref, side=side)
    if side is not None:
        side.close()
    if summary is not None and card is not None:
        from .gate import add_card_to_summary

        add_card_to_summary(summary, card, training.output_dir)
    if summary is None:
        _print_where(training, recipe.monitor)
        return summary
    from .console import final_lines

    _print_where(training, recipe.monitor, "summary.md")
    for line in final_lines(summary):  # the result last: opening sentence, regressions, cautions, files
        print(line, flush=True)
    return summary
