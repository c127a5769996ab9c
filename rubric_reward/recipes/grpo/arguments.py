"""The GRPO recipe's own arguments (data, reward, monitor, report) and its one default config path.

``train/grpo.py`` parses ``(RecipeArguments, GRPOConfig, ModelConfig)`` with TRL's ``TrlParser``: YAML first,
then the command line; every ``GRPOConfig`` and ``ModelConfig`` field works in both.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_CONFIG", "RecipeArguments", "recipe_rules", "with_config"]

DEFAULT_CONFIG = Path(__file__).resolve().parents[3] / "configs" / "grpo" / "offline_default.yaml"
EVAL_DTYPES = ("auto", "float32", "bfloat16", "float16")


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
        "loader and split options of rubric_reward.recipes.grpo.data (split sizes, seed, benchmarks, bad-row policy)")})
    train_order: str = field(default="shuffle", metadata={"help": (
        "order of the training prompts: 'shuffle' (TRL's seeded shuffle) or 'balanced' (the split's strata, e.g. "
        "instruction types, in turn, seeded by --seed: every run trains on each stratum equally often; sets "
        "shuffle_dataset false)")})
    # ---------------------------------------------------------------- reward
    reward_config: dict | str | None = field(default=None, metadata={"help": (
        "RewardConfig fields (a mapping) or a reward YAML path; judge/judge_base_url/rubric below override it")})
    judge: dict | str | None = field(default=None, metadata={"help": (
        "the training judge: a model string, a JudgeConfig mapping, a judge YAML path or a list (ensemble)")})
    judge_base_url: str | None = field(default=None, metadata={"help": "OpenAI-compatible endpoint of the judge"})
    rubric: str | None = field(default=None, metadata={"help": (
        "one fixed rubric for every prompt (path); default: each row's rubric column")})
    shaping_rewards: dict | str | None = field(default=None, metadata={"help": (
        "TRL reward functions added to the rubric reward in training only (monitor and report score the rubric): "
        "a mapping of 'repetition_penalty' ({ngram_size, max_penalty}: token n-gram repetition, "
        "trl.rewards.get_repetition_penalty_reward) and/or 'soft_overlong_punishment' ({soft_punish_cache}: "
        "linear penalty over the last tokens before max_completion_length); weights: GRPOConfig reward_weights, "
        "the rubric's first")})
    per_criterion_rewards: bool = field(default=False, metadata={"help": (
        "give TRL one reward function per criterion name (GDPO with multi_objective_aggregation: "
        "normalize_then_sum: each criterion normalised within its group before the weighted sum); the weights are "
        "the criteria's, so reward_weights stays unset")})
    # ---------------------------------------------------------------- judge gate
    qualify: dict | str | None = field(default=None, metadata={"help": (
        "qualify the training judge before training (rubric_reward.recipes.grpo.gate.GateConfig: on_fail stop|warn, "
        "prompts, completions, repeats, temperature, seed, persuasion; docs/qualify.md): the base model's "
        "completions on the selection split are judged repeatedly and the judge card written to "
        "<output_dir>/qualify/ and the summary; null: no gate")})
    # ---------------------------------------------------------------- monitor
    monitor: bool = field(default=True, metadata={"help": "score the base model and every saved checkpoint"})
    monitor_judge: dict | str | None = field(default=None, metadata={"help": (
        "judge of the monitor and the report (default: the training judge); another family shows judge coupling: "
        "the training judge then scores every checkpoint too, for the reward-hacking watch")})
    monitor_judge_base_url: str | None = field(default=None, metadata={
        "help": "OpenAI-compatible endpoint of the monitor judge"})
    watch: dict | str | None = field(default=None, metadata={"help": (
        "reward-hacking watch thresholds (rubric_reward.recipes.grpo.watch.WatchConfig: min_rise, stall, "
        "correlation_rise, length_collapse, copied_share, repetitive_share, stop_after); with monitor_judge every "
        "checkpoint is scored by both judges; a flagged checkpoint is not picked as best while an unflagged one is "
        "there")})
    generation_backend: str = field(default="transformers", metadata={"help": (
        "greedy generation for monitor and report: transformers, vllm or openai")})
    generation_base_url: str | None = field(default=None, metadata={
        "help": "endpoint of the openai generation backend"})
    torch_threads: int | None = field(default=None, metadata={"help": (
        "torch intra-op threads (default: the CPUs this process may use, shared among the machine's processes)")})
    eval_max_new_tokens: int = field(default=256, metadata={"help": "token limit of monitor/report completions"})
    eval_batch_size: int = field(default=8, metadata={"help": "prompts per generation batch of monitor/report"})
    eval_dtype: str = field(default="auto", metadata={"help": (
        "weights' dtype of monitor/report/IFEval generation (transformers backend): auto = bfloat16 on a GPU or on "
        "a CPU with bfloat16 kernels, float32 elsewhere; the base and every checkpoint are scored at this one "
        "precision")})
    bootstrap_resamples: int = field(default=2000, metadata={"help": "bootstrap resamples of every interval"})
    confidence: float = field(default=0.95, metadata={"help": "confidence level of every interval"})
    # ---------------------------------------------------------------- final report
    final_report: bool = field(default=True, metadata={"help": "base vs best on the report split, then IFEval"})
    second_judge: dict | str | None = field(default=None, metadata={"help": (
        "optional second judge: its view of the same report-split completions")})
    second_judge_base_url: str | None = field(default=None, metadata={
        "help": "OpenAI-compatible endpoint of the second judge"})
    ifeval: bool = field(default=True, metadata={"help": "IFEval transfer evaluation of base vs best"})
    ifeval_limit: int | None = field(default=None, metadata={"help": "a seeded subset of N IFEval prompts"})
    ifeval_types: list[str] | None = field(default=None, metadata={"help": (
        "only IFEval prompts with at least one of these instruction ids (e.g. punctuation:no_comma); "
        "ifeval_limit then samples from them")})
    ifeval_seed: int = field(default=0, metadata={"help": "seed of the IFEval subset (ifeval_limit)"})
    ifeval_max_new_tokens: int | None = field(default=None, metadata={"help": "default: eval_max_new_tokens"})
    side_generation: str = field(default="auto", metadata={"help": (
        "generate greedy completions in a side process on the CPU training leaves idle: the monitor's for each "
        "checkpoint while training goes on, the base model's report and IFEval completions, and the best "
        "checkpoint's IFEval completions during its report completions (the same call, dtype and threads: the "
        "same texts). auto: local transformers generation on a CPU, one process, and a CPU training leaves "
        "idle; true; false")})

    def __post_init__(self) -> None:
        for name in ("data", "reward_config", "judge", "monitor_judge", "second_judge", "watch", "shaping_rewards",
                     "qualify"):
            setattr(self, name, _maybe_structured(getattr(self, name)))
        from .watch import WatchConfig

        WatchConfig.coerce(self.watch)  # a bad threshold stops the run before training
        if isinstance(self.data, str):
            raise ValueError(f"data: expected a mapping of rubric_reward.recipes.grpo.data options, got {self.data!r}")
        from .shaping import check_shaping

        check_shaping(self.shaping_rewards)
        if isinstance(self.side_generation, bool):  # YAML's true / false
            self.side_generation = str(self.side_generation).lower()
        from ..setting_rules import check_settings

        check_settings(vars(self), recipe_rules())
        if self.generation_backend == "openai" and not self.generation_base_url and (self.monitor or self.final_report):
            raise ValueError("generation_backend is openai, which needs generation_base_url (the endpoint of the "
                             "monitor's and the report's greedy completions)")
        if self.ifeval_types is not None:
            from ...checks.ifeval import get_checker

            for name in self.ifeval_types:
                try:
                    get_checker(name)
                except (KeyError, ValueError):
                    raise ValueError(f"ifeval_types: {name!r} is not an IFEval instruction id") from None


@functools.cache
def recipe_rules() -> dict[str, Any]:
    """The rules of :class:`RecipeArguments`' fields (:mod:`rubric_reward.recipes.setting_rules`): ranges, choices,
    URLs; held by ``__post_init__`` and by the recipe's check, which adds TRL's fields."""
    from ..setting_rules import URL, number, one_of
    from .data.order import TRAIN_ORDERS

    return {
        "train_order": one_of(*TRAIN_ORDERS),
        "judge_base_url": URL, "monitor_judge_base_url": URL, "second_judge_base_url": URL, "generation_base_url": URL,
        "generation_backend": one_of("transformers", "vllm", "openai"),
        "side_generation": one_of("auto", "true", "false"),
        "eval_dtype": one_of(*EVAL_DTYPES),
        "torch_threads": number(int, ge=1, optional=True),
        "eval_max_new_tokens": number(int, ge=1),
        "eval_batch_size": number(int, ge=1),
        "bootstrap_resamples": number(int, ge=1),
        "confidence": number(gt=0, lt=1),
        "ifeval_limit": number(int, ge=1, optional=True),
        "ifeval_seed": number(int),
        "ifeval_max_new_tokens": number(int, ge=1, optional=True),
    }


def with_config(argv: Sequence[str] | None = None, default_config: str | Path | None = None) -> list[str]:
    """``argv`` (default ``sys.argv[1:]``) with ``--config default_config`` (else the offline default) in
    front when it names no config."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--config" not in argv:
        argv = ["--config", str(default_config or DEFAULT_CONFIG), *argv]
    return argv
