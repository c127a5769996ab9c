"""What the GRPO recipe prints while it trains: one short line per step; the full metrics go to the logs.

* :func:`quiet_libraries` (called before TrlParser builds the configs) filters the warnings the libraries raise
  about each other (TRL 1.16's ``gradient_checkpointing`` default and peft's ``is_gradient_checkpointing`` call
  meet transformers 5.2x's renames: ``FutureWarning`` s meant for those libraries' authors) and turns off
  transformers' per-load "Loading weights" bars (the monitor loads the policy at every checkpoint).
* :class:`StepLog` replaces transformers' progress bar / metrics printer: each logged step is one line
  (``[grpo] step 3/30: reward 0.412, spread 0.180, flat groups 25%, judge 48 calls, unscored 0%, 12.3 s``, and
  the peak GPU memory on a GPU); the whole metrics dict goes to ``<output_dir>/train_log.jsonl`` (and, as
  before, to ``report_to`` and ``trainer_state.json``). The first step that made no judge call says why once
  (:data:`NO_JUDGE_NOTE`: the rubric's criteria are programmatic checks) and how to add a judge.
* :func:`final_lines` is what the run prints last: the summary's opening sentence, regressions, reward-hacking
  cautions, then where the files are.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from .summary import SummarySettings

__all__ = ["LOG_FILE", "NO_JUDGE_NOTE", "StepLog", "final_lines", "quiet_libraries", "step_line", "use_step_log"]

LOG_FILE = "train_log.jsonl"
NO_JUDGE_NOTE = ("[grpo] judge 0 calls: every criterion scored so far is a programmatic check (the offline "
                 "default's rubrics are checks only), computed without a judge. To add judged criteria, "
                 "give the rubric criteria with a `requirement` and no `check`, and a judge: --judge MODEL "
                 "--judge_base_url URL (docs/training.md, docs/rewards.md).")
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
    rubric = _number(logs, f"{reward_name}/reward_mean")
    if rubric is not None and (reward is None or abs(rubric - reward) > 5e-4):  # shaping or per-criterion rewards
        parts.append(f"rubric {rubric:.3f}")
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
        self.explained = False

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
        calls = _number(record, f"{self.reward_name}/judge_calls")
        if line and calls == 0 and not self.explained:
            self.explained = True
            print(NO_JUDGE_NOTE, flush=True)


def use_step_log(trainer: Any, output_dir: str | Path, reward_name: str = "rubric") -> StepLog:
    """Put :class:`StepLog` in place of ``trainer``'s progress bar and metrics printer."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    log = StepLog(output_dir, reward_name)
    trainer.add_callback(log)
    return log


def _regressions(summary: dict[str, Any], run_dir: Path) -> list[str]:
    """Where the trained model is worse, with an interval or a Holm-adjusted test behind it."""
    alpha = SummarySettings.of(summary).alpha
    out = []
    for judge, c in (summary.get("report") or {}).items():
        ci = c.get("difference") or {}
        if ci.get("high") is not None and ci["high"] < 0:
            out.append(f"report split ({judge}): mean {summary.get('metric', 'score')} {ci['estimate']:+.3f} "
                       f"(CI [{ci['low']:+.3f}, {ci['high']:+.3f}])")
    for s in summary.get("report_by_type") or []:
        ci = s.get("difference") or {}
        if ci.get("high") is not None and ci["high"] < 0:
            out.append(f"report split, {s.get('benchmark')}: {ci['estimate']:+.3f} (CI [{ci['low']:+.3f}, "
                       f"{ci['high']:+.3f}], n {s.get('n')})")
    ifeval = summary.get("ifeval") or {}
    for mode, levels in (ifeval.get("overall") or {}).items():
        for level, lv in levels.items():
            if lv.get("delta") is not None and lv["delta"] < 0 and (lv.get("pvalue") or 1) < alpha:
                out.append(f"IFEval {mode} {level.replace('_', '-')} accuracy {100 * lv['delta']:+.1f} points "
                           f"(p {lv['pvalue']:.3g})")
    folder = Path(ifeval["dir"]) if ifeval.get("dir") else run_dir / "ifeval"
    try:
        comparison = json.loads((folder / "comparison.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        comparison = {}
    for g in (comparison.get("strict") or {}).get("per_instruction", []):
        if g.get("delta", 0) < 0 and (g.get("pvalue_holm") or 1) < alpha:
            out.append(f"IFEval type {g['name']}: {100 * g['delta']:+.1f} points (n {g.get('n')}, Holm p "
                       f"{g['pvalue_holm']:.3g})")
    return out


def _best_line(run_dir: Path) -> list[str]:
    """Which checkpoint ``best/`` holds when the watch flagged some: flagged ones are not picked."""
    from .monitor import BEST_DIR, BEST_FILE

    try:
        best = json.loads((run_dir / BEST_DIR / BEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    passed = best.get("passed_over") or []
    return [f"[grpo] best/ is step {best.get('step')}: the best selection score among the checkpoints the watch "
            "did not flag" + (f" (passed over step(s) {', '.join(map(str, passed))})" if passed else "")]


def final_lines(summary_path: str | Path) -> list[str]:
    """What the run prints last: the summary's opening sentence, regressions and reward-hacking cautions (or
    that none fired), then where the files are. Reads ``summary.json`` beside ``summary_path``."""
    path = Path(summary_path)
    run_dir = path.parent
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"[grpo] result: no summary.json to read ({exc}); see {path}"]
    lines = [f"[grpo] result: {summary.get('headline', '(no opening sentence in summary.json)')}"]
    regressions = _regressions(summary, run_dir)
    lines += [f"[grpo] regression: {r}" for r in regressions] or ["[grpo] regressions: none with an interval "
                                                                   "or test below zero"]
    flags = (summary.get("hacking") or {}).get("flags") or []
    lines += [f"[grpo] caution, reward hacking? {f}" for f in flags]
    try:
        from .monitor import read_records

        watched = [f"step {r['step']}: " + "; ".join(r["watch"]) for r in read_records(run_dir / "monitor.jsonl")
                   if r.get("watch")]
    except Exception:  # noqa: BLE001 - the watch is extra; the summary is already written
        watched = []
    lines += [f"[grpo] caution, the reward-hacking watch flagged {w}" for w in watched]
    if watched:
        lines += _best_line(run_dir)
    if not flags and not watched:
        lines.append("[grpo] reward-hacking indicators: none fired (length, repeated or copied completions)")
    plots = summary.get("plots") or {}
    files = ["summary.md", "summary.html", "summary.json"] + [str(v) for v in plots.values()]
    if (summary.get("ifeval") or {}).get("dir"):
        files.append("ifeval/")
    lines.append(f"[grpo] files in {run_dir.resolve()}: {', '.join(files)}")
    return lines
