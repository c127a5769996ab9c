"""What the GRPO recipe prints while it trains: one short line per step; the full metrics go to the logs.

* :func:`quiet_libraries` (called before TrlParser builds the configs) filters the warnings the libraries raise
  about each other (TRL 1.16's ``gradient_checkpointing`` default and peft's ``is_gradient_checkpointing`` call
  meet transformers 5.2x's renames: ``FutureWarning`` s meant for those libraries' authors) and turns off
  transformers' per-load "Loading weights" bars (the monitor loads the policy at every checkpoint).
* :class:`StepLog` replaces transformers' progress bar / metrics printer: each logged step is one line
  (``[grpo] step 3/30: reward 0.412, spread 0.180, flat groups 25%, judge 48 calls, unscored 0%, 12.3 s``, and
  the peak GPU memory on a GPU); the whole metrics dict goes to ``<output_dir>/train_log.jsonl`` (and, as
  before, to ``report_to`` and ``trainer_state.json``).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

__all__ = ["LOG_FILE", "StepLog", "quiet_libraries", "step_line", "use_step_log"]

LOG_FILE = "train_log.jsonl"
_LIBRARY_WARNINGS = (r"`(is_)?gradient_checkpointing(_kwargs|_enable|_disable)?` is deprecated",)


def quiet_libraries() -> None:
    """Silence the library-to-library deprecation warnings and transformers' weight-loading bars."""
    for message in _LIBRARY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=FutureWarning)
    from transformers.utils import logging

    logging.disable_progress_bar()


def _number(logs: dict[str, Any], key: str) -> float | None:
    value = logs.get(key)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def step_line(logs: dict[str, Any], step: int, max_steps: int, reward_name: str = "rubric") -> str | None:
    """The console line for one ``on_log`` call (None for records that are not training steps)."""
    if "train_runtime" in logs:
        return f"[grpo] trained {step} steps in {float(logs['train_runtime']):.1f} s"
    reward = _number(logs, "reward")
    if reward is None and _number(logs, "loss") is None:
        return None  # monitor/... records: the monitor prints its own line
    parts = [f"reward {reward:.3f}" if reward is not None else "reward n/a"]
    for key, label, fmt in (("reward_std", "spread", "{:.3f}"), ("frac_reward_zero_std", "flat groups", "{:.0%}"),
                            (f"{reward_name}/judge_calls", "judge", "{:.0f} calls"),
                            (f"{reward_name}/unscored_frac", "unscored", "{:.0%}")):
        value = _number(logs, key)
        if value is not None:
            parts.append(f"{label} {fmt.format(value)}")
    seconds = _number(logs, "step_time")
    if seconds is not None:
        parts.append(f"{seconds:.1f} s")
    peak = _number(logs, "peak_gpu_memory_gb")
    if peak is not None:
        parts.append(f"peak GPU {peak:.1f} GB")
    return f"[grpo] step {step}/{max_steps}: " + ", ".join(parts)


def _peak_gpu_gb() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


class StepLog(TrainerCallback):
    """One console line per logged step; every metrics dict appended to ``<output_dir>/train_log.jsonl``."""

    def __init__(self, output_dir: str | Path, reward_name: str = "rubric") -> None:
        self.path = Path(output_dir) / LOG_FILE
        self.reward_name = reward_name

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        record = {"step": state.global_step, **logs}
        peak = _peak_gpu_gb()
        if peak is not None:
            record["peak_gpu_memory_gb"] = peak
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, default=str) + "\n")
        line = step_line(record, state.global_step, state.max_steps, self.reward_name)
        if line:
            print(line, flush=True)


def use_step_log(trainer: Any, output_dir: str | Path, reward_name: str = "rubric") -> StepLog:
    """Put :class:`StepLog` in place of ``trainer``'s progress bar and metrics printer."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    log = StepLog(output_dir, reward_name)
    trainer.add_callback(log)
    return log
