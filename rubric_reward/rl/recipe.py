"""The GRPO recipe behind ``train/grpo.py``: its arguments and the functions that build each part.

``train/grpo.py`` (:mod:`~rubric_reward.rl.launch`) parses ``(RecipeArguments, GRPOConfig, ModelConfig)``
with TRL's ``TrlParser`` (YAML, then the command line; every ``GRPOConfig`` and ``ModelConfig`` field works
in both) and calls :func:`run`, which

1. loads the prompts and makes the seeded train / selection / report split (:func:`build_splits`);
2. builds the reward (:func:`build_reward`: a :class:`~rubric_reward.rl.RubricReward` from ``reward_config``
   with ``judge`` / ``judge_base_url`` / ``rubric`` overriding it);
3. builds the checkpoint monitor (:func:`build_monitor`, on the selection split);
4. trains with TRL's ``GRPOTrainer`` (LoRA when ``use_peft``), resuming with ``resume_from_checkpoint``;
5. writes the final report (:func:`final_report`): base vs best checkpoint on the report split, an optional
   second judge, IFEval transfer; ``summary.md`` + ``summary.json`` in ``output_dir``.

All heavy imports (torch, transformers, trl) happen inside the functions.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_CONFIG", "RecipeArguments", "build_dataset", "build_monitor", "build_reward", "build_splits",
           "final_report", "load_splits", "parse_args", "run"]

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "grpo" / "offline_default.yaml"


def _maybe_structured(value: Any) -> Any:
    """A command-line string holding a JSON/YAML mapping or list becomes that object; other values pass."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        import yaml

        try:
            return yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ValueError(f"could not parse {value[:80]!r} as YAML/JSON: {exc}") from None
    return value


@dataclass
class RecipeArguments:
    """Data, reward, monitor and report settings of the GRPO recipe (the rest is ``GRPOConfig``/``ModelConfig``).

    Mapping-valued fields take a YAML mapping in the config file, or a JSON string on the command line.
    """

    # ---------------------------------------------------------------- data
    dataset_name: str = field(default="offline", metadata={"help": (
        "'offline' (the bundled prompts and rubrics), 'facebook/AdvancedIF' (downloaded at run time), or a local "
        "AdvancedIF CSV / JSONL / save_to_disk folder")})
    data: dict | str | None = field(default=None, metadata={"help": (
        "loader and split options of rubric_reward.rl.data (split sizes, seed, benchmarks, bad-row policy)")})
    # ---------------------------------------------------------------- reward
    reward_config: dict | str | None = field(default=None, metadata={"help": (
        "RewardConfig fields (a mapping) or a reward YAML path; judge/judge_base_url/rubric below override it")})
    judge: dict | str | None = field(default=None, metadata={"help": (
        "the training judge: a model string, a JudgeConfig mapping, a judge YAML path or a list (ensemble)")})
    judge_base_url: str | None = field(default=None, metadata={"help": "OpenAI-compatible endpoint of the judge"})
    rubric: str | None = field(default=None, metadata={"help": (
        "one fixed rubric for every prompt (path); default: each row's rubric column")})
    # ---------------------------------------------------------------- monitor
    monitor: bool = field(default=True, metadata={"help": "score the base model and every saved checkpoint"})
    monitor_judge: dict | str | None = field(default=None, metadata={"help": (
        "judge of the monitor and the report (default: the training judge); another family shows judge coupling: "
        "the training judge then scores every checkpoint too, for the reward-hacking watch")})
    monitor_judge_base_url: str | None = None
    watch: dict | str | None = field(default=None, metadata={"help": (
        "reward-hacking watch thresholds (rubric_reward.rl.watch.WatchConfig: min_rise, stall, correlation_rise, "
        "length_collapse, copied_share, stop_after); with monitor_judge every checkpoint is scored by both judges")})
    generation_backend: str = field(default="transformers", metadata={"help": (
        "greedy generation for monitor and report: transformers, vllm or openai")})
    generation_base_url: str | None = None
    torch_threads: int | None = field(default=None, metadata={"help": (
        "torch intra-op threads (default: the CPUs this process may use, shared among the machine's processes)")})
    eval_max_new_tokens: int = field(default=256, metadata={"help": "token limit of monitor/report completions"})
    eval_batch_size: int = 8
    bootstrap_resamples: int = 2000
    confidence: float = 0.95
    # ---------------------------------------------------------------- final report
    final_report: bool = field(default=True, metadata={"help": "base vs best on the report split, then IFEval"})
    second_judge: dict | str | None = field(default=None, metadata={"help": (
        "optional second judge: its view of the same report-split completions")})
    second_judge_base_url: str | None = None
    ifeval: bool = field(default=True, metadata={"help": "IFEval transfer evaluation of base vs best"})
    ifeval_limit: int | None = field(default=None, metadata={"help": "a seeded subset of N IFEval prompts"})
    ifeval_types: list[str] | None = field(default=None, metadata={"help": (
        "only IFEval prompts with at least one of these instruction ids (e.g. punctuation:no_comma); "
        "ifeval_limit then samples from them")})
    ifeval_seed: int = 0
    ifeval_max_new_tokens: int | None = field(default=None, metadata={"help": "default: eval_max_new_tokens"})

    def __post_init__(self) -> None:
        for name in ("data", "reward_config", "judge", "monitor_judge", "second_judge", "watch"):
            setattr(self, name, _maybe_structured(getattr(self, name)))
        from .watch import WatchConfig

        WatchConfig.coerce(self.watch)  # a bad threshold stops the run before training
        if isinstance(self.data, str):
            raise ValueError(f"data: expected a mapping of rubric_reward.rl.data options, got {self.data!r}")
        if self.generation_backend not in ("transformers", "vllm", "openai"):
            raise ValueError(f"generation_backend must be transformers, vllm or openai, got {self.generation_backend!r}")
        for name in ("eval_max_new_tokens", "eval_batch_size", "bootstrap_resamples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.ifeval_types is not None:
            from ..checks.ifeval import get_checker

            for name in self.ifeval_types:
                try:
                    get_checker(name)
                except (KeyError, ValueError):
                    raise ValueError(f"ifeval_types: {name!r} is not an IFEval instruction id") from None
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(f"torch_threads must be positive or null, got {self.torch_threads}")
        if self.ifeval_limit is not None and self.ifeval_limit < 1:
            raise ValueError(f"ifeval_limit must be positive or null, got {self.ifeval_limit}")


# ------------------------------------------------------------------------------------------ parsing


def with_config(argv: Sequence[str] | None = None, default_config: str | Path | None = None) -> list[str]:
    """``argv`` (default ``sys.argv[1:]``) with ``--config default_config`` (else the offline default) in
    front when it names no config."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--config" not in argv:
        argv = ["--config", str(default_config or DEFAULT_CONFIG), *argv]
    return argv




# ------------------------------------------------------------------------------------------ building


def load_splits(recipe: RecipeArguments) -> Any:
    """The train / selection / report splits as loaded rows (``prompt`` messages, ``rubric``, ``id``,
    ``benchmark``); no torch, no ``datasets`` unless the source is a hub or ``save_to_disk`` dataset.

    ``data`` holds the options of :mod:`rubric_reward.rl.data`: ``format`` (``advancedif``, or ``prompts`` for
    rows with ``prompt``/``rubric`` columns; default ``prompts`` for ``offline``, else ``advancedif``), the
    split sizes ``train``/``selection``/``report``, ``seed``, ``benchmarks``, ``on_bad_row`` and the
    loader's field names.
    """
    from . import data

    options = dict(recipe.data or {})
    fmt = options.pop("format", data_format(recipe))
    split_keys = ("train", "selection", "report", "seed", "stratify")
    if fmt == "advancedif":
        return data.load_advancedif_splits(recipe.dataset_name, **options)
    if fmt == "prompts":
        sizes = {k: options.pop(k) for k in split_keys if k in options}
        rows = data.load_prompt_rows(recipe.dataset_name, **options)
        _say(f"[grpo] {rows.describe()}")
        return data.split_rows(rows, **sizes)
    raise ValueError(f"data.format must be 'advancedif' or 'prompts', got {fmt!r}")


def data_format(recipe: RecipeArguments) -> str:
    """``data.format``, defaulting to ``prompts`` for a bundled prompt set and ``advancedif`` otherwise."""
    from ..data import PROMPT_SETS

    return (recipe.data or {}).get("format", "prompts" if recipe.dataset_name in PROMPT_SETS else "advancedif")


def build_splits(recipe: RecipeArguments, loaded: Any = None) -> Any:
    """The splits (``loaded``, else :func:`load_splits`), each a list of rows as the trainer sees them
    (``prompt`` messages, ``rubric`` as JSON text, ``id``, ``benchmark``)."""
    from dataclasses import replace

    from . import data

    splits = loaded if loaded is not None else load_splits(recipe)
    _say(f"[grpo] split: {splits.describe()}")
    records = {s: data.to_dataset(splits[s]).to_list() if splits[s] else [] for s in data.SPLITS}
    return replace(splits, **records)


def build_dataset(rows: Sequence[Mapping[str, Any]]) -> Any:
    """A ``datasets.Dataset`` of the training rows (columns other than ``prompt`` reach the reward)."""
    from datasets import Dataset

    return Dataset.from_list([dict(r) for r in rows])


def _with_base_url(judge: Any, base_url: str) -> Any:
    """Put ``base_url`` into JudgeConfig mappings (a model string takes it through RewardConfig.base_url)."""
    if isinstance(judge, Mapping):
        return {**judge, "base_url": base_url}
    if isinstance(judge, list):
        return [_with_base_url(j, base_url) for j in judge]
    return judge


def reward_config(recipe: RecipeArguments, *, judge: Any = None, base_url: str | None = None) -> Any:
    """The RewardConfig: ``reward_config`` with the recipe's (or the given) judge, base URL and rubric on top."""
    from .config import RewardConfig

    base = RewardConfig.coerce(recipe.reward_config)
    overrides: dict[str, Any] = {}
    judge = judge if judge is not None else recipe.judge
    base_url = base_url or recipe.judge_base_url
    if judge is not None:
        overrides["judge"] = judge
    if base_url is not None:
        overrides["base_url"] = base_url
        overrides["judge"] = _with_base_url(overrides.get("judge", base.judge), base_url)
    if recipe.rubric is not None:  # one fixed rubric for every prompt, whatever the dataset's rubric column holds
        overrides["rubric"], overrides["rubric_column"] = recipe.rubric, None
    return base.replace(**overrides) if overrides else base


def build_reward(recipe: RecipeArguments, *, judge: Any = None, base_url: str | None = None) -> Any:
    """The training reward (or, with ``judge``/``base_url``, the same reward judged by another judge)."""
    from . import RubricReward

    return RubricReward(reward_config(recipe, judge=judge, base_url=base_url))


def _monitor_reward(recipe: RecipeArguments, training_reward: Any) -> Any:
    if recipe.monitor_judge is None and recipe.monitor_judge_base_url is None:
        return training_reward
    return build_reward(recipe, judge=recipe.monitor_judge, base_url=recipe.monitor_judge_base_url)


def generation_kwargs(recipe: RecipeArguments, max_new_tokens: int | None = None) -> dict[str, Any]:
    """``generate_responses`` arguments of the monitor and the report (adapters merged: no LoRA cost per token)."""
    return {"backend": recipe.generation_backend, "base_url": recipe.generation_base_url,
            "max_new_tokens": max_new_tokens or recipe.eval_max_new_tokens, "batch_size": recipe.eval_batch_size,
            "merge_adapter": True}


def build_monitor(recipe: RecipeArguments, training: Any, model: Any, selection: Sequence[Mapping[str, Any]],
                  reward: Any) -> Any:
    """The :class:`~rubric_reward.rl.monitor.CheckpointMonitor` on the selection split."""
    from .monitor import CheckpointMonitor

    try:
        from .plots import plot_monitor
    except ImportError:  # matplotlib is optional for training
        plot_monitor = None
    monitor_reward = _monitor_reward(recipe, reward)
    return CheckpointMonitor(
        selection, reward=monitor_reward, model=model.model_name_or_path,
        output_dir=training.output_dir, generation=generation_kwargs(recipe),
        n_resamples=recipe.bootstrap_resamples, confidence=recipe.confidence, seed=training.seed,
        plot=plot_monitor, training_reward=None if monitor_reward is reward else reward, watch=recipe.watch,
    )


class _TrainerLog:
    """Sends monitor metrics through the trainer's loggers without GRPOTrainer's metric averaging."""

    def __init__(self) -> None:
        self.trainer: Any = None

    def __call__(self, metrics: dict[str, float]) -> None:
        if self.trainer is not None:
            from transformers import Trainer

            Trainer.log(self.trainer, dict(metrics))


def _has_accelerator() -> bool:
    import torch

    accelerator = getattr(torch, "accelerator", None)
    return accelerator.is_available() if accelerator is not None else torch.cuda.is_available()


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _say(text: str) -> None:
    if is_main_process():
        print(text, flush=True)


def _print_where(training: Any, monitor: bool, extra: str = "") -> None:
    if not is_main_process():
        return
    out = Path(training.output_dir).resolve()
    parts = ["checkpoints"] if training.save_strategy != "no" else []
    parts += ["monitor.jsonl, monitor.png, best/"] if monitor else []
    parts += ["train_log.jsonl"] + ([extra] if extra else [])
    print(f"[grpo] output: {out} ({', '.join(parts)})", flush=True)


def run(recipe: RecipeArguments, training: Any, model: Any, *, splits: Any = None) -> Path | None:
    """Train, monitor and report (see the module docstring); return the summary path (main process).
    ``splits``: the data as :func:`load_splits` loaded it (loaded here when None)."""
    from trl import GRPOTrainer, get_peft_config

    from ..threads import available_cpus, set_torch_threads

    started = time.monotonic()
    threads = set_torch_threads(recipe.torch_threads)
    source = ("torch_threads" if recipe.torch_threads is not None
              else "OMP_NUM_THREADS, which accelerate launch sets" if os.environ.get("OMP_NUM_THREADS")
              else "CPUs / local processes")
    _say(f"[grpo] torch threads: {threads} of {available_cpus()} CPUs (from {source}), OMP_WAIT_POLICY="
         f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}")
    splits = build_splits(recipe, splits)
    if is_main_process():
        splits.write_manifest(Path(training.output_dir) / "splits.json")
    reward = build_reward(recipe).bind(training)
    callbacks = []
    monitor = None
    log = _TrainerLog()
    if recipe.monitor:
        monitor = build_monitor(recipe, training, model, splits.selection, reward)
        monitor.log = log
        callbacks.append(monitor)
    if training.dataloader_pin_memory and not _has_accelerator():
        training.dataloader_pin_memory = False  # pinned memory needs an accelerator; torch warns at every epoch
    model_kwargs = dict(training.model_init_kwargs or {})
    if model.dtype and "dtype" not in model_kwargs:
        model_kwargs["dtype"] = model.dtype
    training.model_init_kwargs = model_kwargs or None
    from ..models import resolve_model

    model_ref = model.model_name_or_path  # as the user named it, for the summary
    policy = resolve_model(model_ref)
    model.model_name_or_path = policy
    trainer = GRPOTrainer(model=policy, reward_funcs=[reward], args=training,
                          train_dataset=build_dataset(splits.train), peft_config=get_peft_config(model),
                          callbacks=callbacks)
    if training.use_vllm:
        from .vllm_sync import repack_colocated_sync

        repack_colocated_sync(trainer)
    log.trainer = trainer
    from .console import use_step_log

    use_step_log(trainer, training.output_dir, reward.config.metric_prefix)
    _print_where(training, recipe.monitor)
    resume = training.resume_from_checkpoint
    if isinstance(resume, str) and resume.lower() in ("true", "last"):
        from transformers.trainer_utils import get_last_checkpoint

        resume = get_last_checkpoint(training.output_dir)
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(training.output_dir)
    train_seconds = time.monotonic() - started
    is_main = trainer.accelerator.is_main_process
    reward.close()
    del trainer
    summary = None
    if recipe.final_report and is_main:
        summary = final_report(recipe, training, model, splits, train_seconds=train_seconds, model_ref=model_ref)
        print(f"[grpo] summary: {summary}", flush=True)
    _print_where(training, recipe.monitor, "summary.md" if summary else "")
    return summary


# ------------------------------------------------------------------------------------------ final report


def _score_split(reward: Any, rows: Sequence[Mapping[str, Any]], completions: list[str]) -> list[Any]:
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    return reward.score_batch([r["prompt"] for r in rows], completions, **columns)


def _generate(recipe: RecipeArguments, model: str, prompts: list[Any], adapter: str | None,
              max_new_tokens: int | None = None, keep_think: bool = False) -> list[str]:
    from ..rollouts import generate_responses

    return generate_responses(prompts, model=model, adapter=adapter, keep_think=keep_think,
                              **generation_kwargs(recipe, max_new_tokens))


def final_report(recipe: RecipeArguments, training: Any, model: Any, splits: Any, *,
                 train_seconds: float | None = None, model_ref: str | None = None) -> Path:
    """Base vs best on the report split (training judge, optional second judge), IFEval; write the summary."""
    from ..journal import write_atomic
    from . import report as report_module
    from .comparison import PERFECT
    from .monitor import BEST_DIR, BEST_FILE, read_records, score_values, token_lengths

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
    judge_reward = _monitor_reward(recipe, None) if (recipe.monitor_judge or recipe.monitor_judge_base_url) \
        else build_reward(recipe)
    metric = judge_reward.config.reward
    print(f"[report] base vs best (step {best_info.get('step')}) on {len(rows)} report prompts", flush=True)
    texts = {"base": _generate(recipe, base_model, prompts, None), "best": _generate(recipe, base_model, prompts,
                                                                                      adapter)}
    judges = {"judge": judge_reward}
    if recipe.second_judge is not None or recipe.second_judge_base_url is not None:
        judges["second_judge"] = build_reward(recipe, judge=recipe.second_judge, base_url=recipe.second_judge_base_url)
    scores: dict[str, dict[str, list[float | None]]] = {}
    perfect: dict[str, dict[str, list[bool | None]]] = {}
    for name, reward in judges.items():
        results = {system: _score_split(reward, rows, texts[system]) for system in texts}
        scores[name] = {system: score_values(res, reward.config.reward) for system, res in results.items()}
        perfect[name] = {system: [None if v is None else v >= PERFECT for v in score_values(res, "score")]
                         for system, res in results.items()}
        reward.close()
    tokens = {system: token_lengths(base_model, texts[system]) for system in texts}
    report_rows = [report_module.report_row(row, {s: texts[s][i] for s in texts}, {s: tokens[s][i] for s in texts},
                                            {j: {s: scores[j][s][i] for s in texts} for j in scores},
                                            {j: {s: perfect[j][s][i] for s in texts} for j in perfect})
                   for i, row in enumerate(rows)]
    write_atomic(out / report_module.REPORT_FILE, "".join(
        json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in report_rows))
    ifeval = None
    if recipe.ifeval:
        ifeval = ifeval_transfer(recipe, base_model, adapter, out / "ifeval", seed=recipe.ifeval_seed)
    return report_module.write_summary(
        out, monitor=records, best=best_info, report_rows=report_rows, metric=metric,
        looked_at=sum(1 for r in records if r["step"] > 0), ifeval=ifeval,
        splits={"train": len(splits.train), "selection": len(splits.selection), "report": len(rows)},
        n_resamples=recipe.bootstrap_resamples, confidence=recipe.confidence, seed=training.seed,
        meta={"model": model_ref or base_model, "dataset": recipe.dataset_name, "train_seconds": train_seconds,
              "recipe": asdict(recipe), "max_steps": training.max_steps},
    )


def ifeval_transfer(recipe: RecipeArguments, model: str, adapter: str, out_dir: Path, *, seed: int = 0) -> dict:
    """IFEval base vs trained (``eval/ifeval.py``'s machinery) on all prompts or a seeded subset."""
    from ..evaluation import evaluate_system, load_ifeval, write_comparison, write_system

    rows = load_ifeval()
    if recipe.ifeval_types:
        wanted = set(recipe.ifeval_types)
        rows = [r for r in rows if wanted & set(r.instruction_id_list)]
    if recipe.ifeval_limit and recipe.ifeval_limit < len(rows):
        rows = sorted(random.Random(seed).sample(rows, recipe.ifeval_limit), key=lambda r: r.key)
    print(f"[report] IFEval transfer on {len(rows)} prompts", flush=True)
    max_new = recipe.ifeval_max_new_tokens or recipe.eval_max_new_tokens
    systems = {}
    for name, ad in (("base", None), ("trained", adapter)):
        texts = _generate(recipe, model, [r.prompt for r in rows], ad, max_new)
        systems[name] = evaluate_system(name, list(zip(rows, texts, strict=True)),
                                        meta={"model": model, "adapter": ad, "max_new_tokens": max_new})
        write_system(out_dir / name, systems[name])
    write_comparison(out_dir, systems["base"], systems["trained"], n_resamples=recipe.bootstrap_resamples,
                     confidence=recipe.confidence, seed=seed)
    comparison = json.loads((out_dir / "comparison.json").read_text(encoding="utf-8"))
    return {"dir": str(out_dir), "num_prompts": len(rows), "seed": seed, "types_wanted": recipe.ifeval_types,
            "comparison": comparison}
