"""Checkpoint monitoring: score every saved LoRA checkpoint on the selection split.

:class:`CheckpointMonitor` is a ``transformers.TrainerCallback``. At the start of training it scores the base
model (step 0) and any checkpoint left unscored by an interrupted run; at each save it generates greedy
completions for the selection prompts with the checkpoint's adapter reloaded from disk
(:func:`rubric_reward.evaluation.rollouts.generate_responses`), scores them with the monitor's reward (by default the
training judge; a second judge family shows judge coupling), and

* appends one record per step to ``<output_dir>/monitor.jsonl`` (step, mean with a bootstrap interval,
  perfect-score count, mean length in tokens, unscored count, judge cost and calls, the completions' file);
* logs the same numbers as ``monitor/...`` through the trainer's loggers (``report_to``);
* copies the best checkpoint so far to ``<output_dir>/best/`` (``best/best.json`` says which step it is): the
  highest selection mean among the checkpoints the reward-hacking watch did not flag
  (:func:`~rubric_reward.recipes.grpo.comparison.best_record`);
* redraws ``<output_dir>/monitor.png`` (score and length against step);
* keeps the reward-hacking watch (:mod:`rubric_reward.recipes.grpo.watch`): with ``training_reward`` (the training
  judge, when the monitor's own reward is a second judge) every checkpoint is scored by both, and each
  record carries ``watch``, the flags raised at it; ``watch.stop_after`` flagged checkpoints stop training.

With a side process (:mod:`.side_process`, ``side``) a checkpoint's completions are generated there while
training goes on, and the checkpoint is scored at the first step end after they are ready (at the latest when
training ends), in step order; not when ``watch.stop_after`` needs the flags at the save itself, nor with
``save_total_limit`` (rotation could delete the checkpoint first). The texts are the same either way, and
generating inside the training process leaves its random stream as it was: the monitor never changes what is
trained.

Only the main process works; the others wait at a barrier, so the monitor runs once per save however many
processes train. ``monitor.jsonl`` is keyed by step: on resume, records past the resumed step (a discarded
future) are dropped and a step already recorded is not scored again, so the file has one line per step (it is
rewritten whole at each record, so a line torn by a kill never swallows the next). A checkpoint cut off mid-save
(:mod:`.checkpoints`) is never scored.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ...io.rows import numbered_jsonl_rows
from .checkpoints import adapter_sha256, complete_checkpoints
from .comparison import best_record, passed_over

__all__ = ["CheckpointMonitor", "MonitorRecord", "best_record", "checkpoints_looked_at", "read_records", "score_values",
           "token_lengths"]

MONITOR_FILE = "monitor.jsonl"
BEST_DIR = "best"
BEST_FILE = "best.json"
# Files of a checkpoint that make up the adapter (optimizer state, RNG and trainer state are left behind).
_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin", "tokenizer.json",
                  "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "vocab.json",
                  "merges.txt", "added_tokens.json", "generation_config.json", "README.md")


@dataclass(frozen=True)
class MonitorRecord:
    """One monitored step (0 = the base model)."""

    step: int
    checkpoint: str | None
    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    perfect: int
    unscored: int
    mean_length_tokens: float
    judge_cost: float
    judge_calls: int
    seconds: float
    completions: str
    metric: str = "score"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "extra"}
        d.update(self.extra)
        return d


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``monitor.jsonl`` (a torn last line from a crash is skipped), one per step."""
    path = Path(path)
    if not path.is_file():
        return []
    by_step: dict[int, dict[str, Any]] = {}
    for _, rec in numbered_jsonl_rows(path, torn_ok=True):
        try:
            by_step[int(rec["step"])] = dict(rec)
        except (ValueError, KeyError, TypeError):
            continue
    return [by_step[s] for s in sorted(by_step)]


def checkpoints_looked_at(records: Sequence[Mapping[str, Any]]) -> int:
    """How many checkpoints the monitor looked at: distinct steps > 0 (a step a resumed run recorded again
    counts once; step 0 is the base model)."""
    return len({int(r["step"]) for r in records if int(r["step"]) > 0})


def score_values(records: Sequence[Any], metric: str) -> list[float | None]:
    """Per completion, the ``metric`` of its score result (``score``/``expected_score``/``raw_score``).

    A completion stopped by a guard has no result and counts with the reward the guard gave it; one whose
    judging failed is ``None`` (unscored, never a number).
    """
    values: list[float | None] = []
    for rec in records:
        result = getattr(rec, "result", None)
        value = getattr(result, metric, None) if result is not None else None
        if value is None and metric != "score" and result is not None:
            value = result.score  # no continuous verdicts (checks only, no logprobs): the plain score
        if value is None and result is None and getattr(rec, "guard", None) and rec.reward is not None:
            value = rec.reward
        values.append(None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value))
    return values


class CheckpointMonitor(TrainerCallback):
    """Score the base model and each saved checkpoint on the selection split (see the module docstring).

    ``rows`` are the selection split's rows (``prompt`` plus the columns the reward reads); ``reward`` is a
    :class:`~rubric_reward.rl.RubricReward` (its ``score_batch`` judges); ``model`` the base policy reference;
    ``generation`` the keyword arguments for :func:`~rubric_reward.evaluation.rollouts.generate_responses`
    (``max_new_tokens``, ``batch_size``, ``backend``, ``base_url``); ``side`` a
    :class:`~.side_process.SideGenerator` that generates them beside training.
    """

    def __init__(self, rows: Sequence[Mapping[str, Any]], *, reward: Any, model: str, output_dir: str | Path,
                 generation: Mapping[str, Any] | None = None, n_resamples: int = 2000, confidence: float = 0.95,
                 seed: int = 0, score_base: bool = True, plot: Callable[[Path, list[dict]], Any] | None = None,
                 log: Callable[[dict[str, float]], None] | None = None, training_reward: Any = None,
                 watch: Any = None, side: Any = None):
        if not rows:
            raise ValueError("the monitor needs at least one selection prompt")
        self.rows = [dict(r) for r in rows]
        self.reward = reward
        self.model = model
        self.output_dir = Path(output_dir)
        self.generation = dict(generation or {})
        self.n_resamples = n_resamples
        self.confidence = confidence
        self.seed = seed
        self.score_base = score_base
        self.plot = plot
        self.log = log
        self.metric = getattr(getattr(reward, "config", None), "reward", "score") or "score"
        from .watch import WatchConfig

        self.training_reward = training_reward
        self.watch = WatchConfig.coerce(watch)
        self.side = side
        self._pending: dict[int, Path | None] = {}  # step -> checkpoint, generating in the side process
        # called with (step, checkpoint folder) when best/ takes a new checkpoint while training goes on: the
        # recipe queues that checkpoint's report completions in the side process
        self.on_best: Callable[[int, Path], Any] | None = None
        self._training = True

    # ------------------------------------------------------------------ files
    @property
    def path(self) -> Path:
        return self.output_dir / MONITOR_FILE

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.path)

    def _rewrite(self, records: list[dict[str, Any]]) -> None:
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        os.replace(tmp, self.path)

    # ------------------------------------------------------------------ callback hooks
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            records = self.records()
            kept = [r for r in records if r["step"] <= state.global_step]
            if len(kept) != len(records):  # resumed from an earlier checkpoint: those steps are retrained
                self._rewrite(kept)
                self._refresh_best(kept)
            done = {r["step"] for r in kept}
            todo: list[tuple[int, Path | None]] = [(0, None)] if self.score_base and 0 not in done else []
            todo += [(step, folder) for step, folder in complete_checkpoints(args.output_dir)[0]
                     if 0 < step <= state.global_step and step not in done]  # saved but not scored (interrupted)
            for step, folder in todo:
                self._start(step, folder, state, beside=self._beside(args))
        _barrier()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self._collect(state, wait=False)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        stop = False
        if state.is_world_process_zero:
            step = state.global_step
            if step not in {r["step"] for r in self.records()} and step not in self._pending:
                self._start(step, Path(args.output_dir) / f"checkpoint-{step}", state, beside=self._beside(args))
            flagged = sum(1 for r in self.records() if r.get("watch"))
            if self.watch.stop_after and flagged >= self.watch.stop_after:
                print(f"[monitor] WATCH: {flagged} flagged checkpoint(s) (stop_after {self.watch.stop_after}): "
                      "stopping training", flush=True)
                stop = True
        if _agree(stop):  # every rank stops at the same step
            control.should_training_stop = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._training = False  # a best found now is reported at once: nothing to get ahead with
        if state.is_world_process_zero:
            self._collect(state, wait=True)
        _barrier()

    # ------------------------------------------------------------------ beside training
    def _beside(self, args: Any) -> bool:
        """Whether a checkpoint's completions can be generated by the side process while training goes on: not
        when the watch may stop training at this save, nor when rotation may delete the checkpoint first."""
        return (self.side is not None and not self.watch.stop_after
                and not getattr(args, "save_total_limit", None))

    def _start(self, step: int, checkpoint: Path | None, state: Any, *, beside: bool) -> None:
        if beside and self.side.submit(self._job(step), self.model, self._prompts(), self.generation, checkpoint):
            self._pending[step] = checkpoint
        else:
            self.evaluate(step, checkpoint, state)

    def _collect(self, state: Any, *, wait: bool) -> None:
        """Score the checkpoints whose completions the side process has generated, in step order (the watch
        compares each with the ones before it); ``wait``: all of them, waiting for the side process."""
        for step in sorted(self._pending):
            if not wait and not self.side.ready(self._job(step)):
                return
            self.evaluate(step, self._pending.pop(step), state)

    def _job(self, step: int) -> str:
        return f"monitor-step-{step:05d}"

    def _prompts(self) -> list[Any]:
        return [r["prompt"] for r in self.rows]

    # ------------------------------------------------------------------ the work
    def evaluate(self, step: int, checkpoint: str | Path | None, state: Any = None) -> dict[str, Any]:
        """Generate, score, record, log, update ``best/`` and the plot for one step; return the record."""
        from ...evaluation.rollouts import generate_responses

        started = time.monotonic()
        label = "base model" if checkpoint is None else f"checkpoint-{step}"
        prompts = self._prompts()
        adapter = None if checkpoint is None else str(checkpoint)
        taken = None if self.side is None else self.side.take(self._job(step), self.model, prompts, self.generation,
                                                              adapter, threads=_torch_threads())
        if taken is not None:
            completions, generated_s = taken
            print(f"[monitor] {label}: {len(prompts)} selection completions generated beside training "
                  f"({generated_s:.0f} s)", flush=True)
            started = time.monotonic() - generated_s  # the record's seconds: generation and scoring, no waiting
        else:
            print(f"[monitor] {label}: generating {len(prompts)} selection completions", flush=True)
            completions = generate_responses(prompts, model=self.model, adapter=adapter,
                                             **{"progress": True, **self.generation})
        columns = {k: [r[k] for r in self.rows] for k in self.rows[0] if k != "prompt"}
        print(f"[monitor] {label}: scoring", flush=True)
        results = self.reward.score_batch(prompts, completions, **columns)
        values = score_values(results, self.metric)
        training = None
        if self.training_reward is not None:
            print(f"[monitor] {label}: scoring with the training judge too", flush=True)
            metric = getattr(getattr(self.training_reward, "config", None), "reward", "score") or "score"
            training = score_values(self.training_reward.score_batch(prompts, completions, **columns), metric)
        record = self._record(step, checkpoint, prompts, completions, results, values, time.monotonic() - started,
                              training)
        from .watch import watch_flags

        earlier = [r for r in self.records() if r["step"] != step]
        record["watch"] = watch_flags([r for r in earlier if r["step"] < step] + [record], self.watch)
        # rewritten whole, not appended: a line torn by a kill would swallow the next one appended to it
        self._rewrite(sorted([*earlier, record], key=lambda r: r["step"]))
        self._log(record, state)
        ci = "" if record["ci_low"] is None else f" [{record['ci_low']:.3f}, {record['ci_high']:.3f}]"
        mean = "n/a" if record["mean"] is None else f"{record['mean']:.3f}"
        print(f"[monitor] {label}: selection {self.metric} {mean}{ci}, perfect {record['perfect']}/{record['n']}, "
              f"unscored {record['unscored']}, {record['mean_length_tokens']:.0f} tokens, "
              f"{record['seconds']:.0f} s"
              + ("" if record.get("training_mean") is None else f"; training judge {record['training_mean']:.3f}"),
              flush=True)
        for flag in record["watch"]:
            print(f"[monitor] WATCH {label}: {flag}", flush=True)
        self._refresh_best(self.records())  # after the flags, so the console reads cause then pick
        return record

    def _interval(self, values: Sequence[float | None]) -> Any:
        from ...stats import bootstrap_ci

        scored = [v for v in values if v is not None]
        return bootstrap_ci(scored, n_resamples=self.n_resamples, confidence=self.confidence, seed=self.seed) \
            if scored else None

    def _record(self, step: int, checkpoint: Any, prompts: list[Any], completions: list[str], results: list[Any],
                values: list[float | None], seconds: float, training: list[float | None] | None = None
                ) -> dict[str, Any]:
        from .watch import copied_share, length_correlation, repetitive_share

        scored = [v for v in values if v is not None]
        interval = self._interval(values)
        plain = [getattr(getattr(r, "result", None), "score", None) for r in results]
        lengths = self._token_lengths(completions)
        cost = sum(r.result.cost for r in results if getattr(r, "result", None) is not None)
        calls = sum(r.result.judge_calls for r in results if getattr(r, "result", None) is not None)
        watch: dict[str, Any] = {"length_rho": length_correlation(values if training is None else training, lengths),
                                 "copied_share": copied_share(prompts, completions),
                                 "repetitive_share": repetitive_share(completions)}
        if training is not None:
            t = self._interval(training)
            watch.update(training_mean=None if t is None else t.estimate, training_ci_low=None if t is None else t.low,
                         training_ci_high=None if t is None else t.high)
        folder = self.output_dir / "monitor"
        folder.mkdir(exist_ok=True)
        completions_file = folder / f"step-{step:05d}.jsonl"
        with completions_file.open("w", encoding="utf-8") as fh:
            for row, text, rec, value in zip(self.rows, completions, results, values, strict=True):
                result = getattr(rec, "result", None)
                fh.write(json.dumps({
                    "id": row.get("id"), "prompt": row["prompt"], "completion": text, "value": value,
                    "score": getattr(result, "score", None), "guard": getattr(rec, "guard", None),
                    "error": getattr(rec, "error", None) or getattr(result, "error", None),
                    "verdicts": [v.to_dict() for v in result.verdicts] if result is not None else None,
                }, ensure_ascii=False, default=str) + "\n")
        return MonitorRecord(
            step=step, checkpoint=None if checkpoint is None else str(checkpoint), n=len(values),
            mean=None if interval is None else interval.estimate,
            ci_low=None if interval is None else interval.low, ci_high=None if interval is None else interval.high,
            perfect=sum(1 for s in plain if s is not None and s >= 1.0 - 1e-9),
            unscored=len(values) - len(scored),
            mean_length_tokens=sum(lengths) / len(lengths) if lengths else 0.0,
            judge_cost=float(cost), judge_calls=int(round(calls)), seconds=round(seconds, 2),
            completions=str(completions_file.relative_to(self.output_dir)), metric=self.metric,
            extra={"adapter_sha256": adapter_sha256(checkpoint), **watch},
        ).to_dict()

    def _token_lengths(self, texts: list[str]) -> list[int]:
        return token_lengths(self.model, texts)

    def _refresh_best(self, records: list[dict[str, Any]]) -> None:
        """Make ``best/`` hold the adapter of the best recorded checkpoint (copied: rotation may delete it)."""
        best = best_record(records)
        passed = passed_over(records)
        target = self.output_dir / BEST_DIR
        marker = target / BEST_FILE
        try:
            current = json.loads(marker.read_text())
            step = current["step"]
        except (OSError, ValueError, KeyError, TypeError):
            current, step = None, None
        if best is None:
            return
        if step == best["step"]:
            if current.get("passed_over") != passed:  # a later flagged checkpoint scored higher: say so
                tmp_marker = marker.with_suffix(".json.tmp")
                tmp_marker.write_text(json.dumps({**current, "passed_over": passed}, indent=2) + "\n")
                os.replace(tmp_marker, marker)
                print(f"[monitor] best/ stays checkpoint-{step}: passed over flagged step(s) "
                      f"{', '.join(map(str, passed))}", flush=True)
            return
        source = Path(best["checkpoint"])
        if not (source / "adapter_config.json").is_file():
            print(f"[monitor] best step {best['step']}: {source} holds no adapter any more; best/ left as is",
                  flush=True)
            return
        tmp = self.output_dir / f".{BEST_DIR}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for name in _ADAPTER_FILES:
            if (source / name).is_file():
                shutil.copy2(source / name, tmp / name)
        info = {k: best.get(k) for k in ("step", "checkpoint", "mean", "ci_low", "ci_high", "perfect", "n",
                                         "metric")}
        info["passed_over"] = passed  # higher selection means the watch flagged
        (tmp / BEST_FILE).write_text(json.dumps(info, indent=2) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        print(f"[monitor] best/ <- checkpoint-{best['step']} (selection mean {best['mean']:.3f}"
              + (f"; passed over flagged step(s) {', '.join(map(str, passed))}" if passed else "") + ")", flush=True)
        if self.on_best is not None and self._training:
            self.on_best(int(best["step"]), source)

    def _log(self, record: dict[str, Any], state: Any) -> None:
        metrics = {f"monitor/{k}": float(record[k]) for k in
                   ("mean", "ci_low", "ci_high", "perfect", "unscored", "mean_length_tokens", "judge_cost",
                    "judge_calls", "training_mean", "length_rho", "copied_share", "repetitive_share")
                   if record.get(k) is not None}
        metrics["monitor/watch_flags"] = float(len(record.get("watch") or ()))
        metrics["monitor/step"] = float(record["step"])  # scored beside training: logged at a later step
        if self.log is not None:
            self.log(metrics)
        if self.plot is not None:
            try:
                self.plot(self.output_dir / "monitor.png", self.records())
            except Exception as exc:  # a plot never stops training
                print(f"[monitor] could not draw monitor.png: {type(exc).__name__}: {exc}", flush=True)


@functools.lru_cache(maxsize=4)
def _tokenizer(model: str) -> Any:
    from transformers import AutoTokenizer

    from ...io.models import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(model))


def token_lengths(model: str, texts: Sequence[str]) -> list[int]:
    """Completion lengths in the policy's tokens (no special tokens)."""
    tokenizer = _tokenizer(model)
    return [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _agree(flag: bool) -> bool:
    """The main process's ``flag`` on every process (itself in a single process)."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return flag
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        box = [flag]
        dist.broadcast_object_list(box, src=0)
        return bool(box[0])
    return flag


def _barrier() -> None:
    """Wait for every process (a no-op in a single process)."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
