"""The functions that build each part of the GRPO recipe from its arguments: splits, dataset, reward, monitor.

All heavy imports (torch, transformers, trl, datasets) happen inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .arguments import RecipeArguments
from .ranks import say

__all__ = ["build_dataset", "build_monitor", "build_monitor_reward", "build_reward", "build_second_reward",
           "build_splits", "data_format", "generation_kwargs", "has_monitor_judge", "has_second_judge", "load_splits",
           "monitor_reward", "reward_config", "train_rows"]


def load_splits(recipe: RecipeArguments) -> Any:
    """The train / selection / report splits as loaded rows (``prompt`` messages, ``rubric``, ``id``,
    ``benchmark``); no torch, no ``datasets`` unless the source is a hub or ``save_to_disk`` dataset.

    ``data`` holds the options of :mod:`rubric_reward.recipes.grpo.data`: ``format`` (``advancedif``, or ``prompts`` for
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
        say(f"[grpo] {rows.describe()}")
        return data.split_rows(rows, **sizes)
    raise ValueError(f"data.format must be 'advancedif' or 'prompts', got {fmt!r}")


def data_format(recipe: RecipeArguments) -> str:
    """``data.format``, defaulting to ``prompts`` for a bundled prompt set and ``advancedif`` otherwise."""
    from ...data import PROMPT_SETS

    return (recipe.data or {}).get("format", "prompts" if recipe.dataset_name in PROMPT_SETS else "advancedif")


def build_splits(recipe: RecipeArguments, loaded: Any = None) -> Any:
    """The splits (``loaded``, else :func:`load_splits`), each a list of rows as the trainer sees them
    (``prompt`` messages, ``rubric`` as JSON text, ``id``, ``benchmark``)."""
    from dataclasses import replace

    from . import data

    splits = loaded if loaded is not None else load_splits(recipe)
    say(f"[grpo] split: {splits.describe()}")
    records = {s: data.to_dataset(splits[s]).to_list() if splits[s] else [] for s in data.SPLITS}
    return replace(splits, **records)


def train_rows(recipe: RecipeArguments, training: Any, splits: Any) -> list[Any]:
    """The training rows in the order ``recipe.train_order`` asks for. ``balanced`` deals the split's strata in
    turn (seeded by ``training.seed``) and turns TRL's own shuffle off, which would undo the order."""
    if recipe.train_order == "shuffle":
        return list(splits.train)
    from .data.order import balanced_order

    training.shuffle_dataset = False
    order = balanced_order(splits.train, stratify=splits.stratify, seed=training.seed)
    say(f"[grpo] training order: {splits.stratify or 'rows'} in turn (seed {training.seed})")
    return order


def reward_funcs(recipe: RecipeArguments, training: Any, reward: Any, rows: Sequence[Mapping[str, Any]],
                 shaping: Sequence[Any]) -> list[Any]:
    """TRL's ``reward_funcs``: the rubric reward (or, with ``per_criterion_rewards``, one function per criterion
    of the training rows' rubrics, whose weights become ``reward_weights``: unset, as ``build_shaping`` checked),
    then the shaping terms."""
    if not recipe.per_criterion_rewards:
        return [reward, *shaping]
    from ...rl.criteria import criterion_rewards
    from ...rewards.samples import SampleError

    column = reward.config.rubric_column or "rubric"
    rubrics = reward.source.rows(len(rows), {column: [r.get(column) for r in rows]} if rows else {}, column)
    bad = next((r for r in rubrics if isinstance(r, SampleError)), None)
    if bad is not None:
        raise ValueError(f"per_criterion_rewards: a training row has no usable rubric: {bad}")
    funcs, weights = criterion_rewards(reward, rubrics)
    training.reward_weights = [*weights, *[1.0] * len(shaping)]
    say(f"[grpo] per-criterion rewards: {', '.join(f'{f.criterion} ({w:g})' for f, w in zip(funcs, weights))}; "
        f"aggregation {training.multi_objective_aggregation}")
    return [*funcs, *shaping]


def build_dataset(rows: Sequence[Mapping[str, Any]]) -> Any:
    """A ``datasets.Dataset`` of the training rows (columns other than ``prompt`` reach the reward)."""
    from datasets import Dataset

    return Dataset.from_list([dict(r) for r in rows])


def reward_config(recipe: RecipeArguments, *, judge: Any = None, base_url: str | None = None) -> Any:
    """The RewardConfig: ``reward_config`` with the recipe's (or the given) judge, base URL and rubric on top.

    The base URL (``judge_base_url``, or the given one) becomes the RewardConfig's top-level ``base_url``, so
    the library's one rule applies (:func:`rubric_reward.judges.config.load_judges`): it reaches model strings
    and judge mappings that name no ``base_url``; a judge that names its own keeps it, and a judges file is
    self-contained. The recipe and every other path (``RubricReward``, the service, ``Scorer(base_url=...)``)
    read a judge's endpoint the same way.
    """
    from ...rewards.config import RewardConfig

    base = RewardConfig.coerce(recipe.reward_config)
    overrides: dict[str, Any] = {}
    judge = judge if judge is not None else recipe.judge
    base_url = base_url or recipe.judge_base_url
    if judge is not None:
        overrides["judge"] = judge
    if base_url is not None:
        overrides["base_url"] = base_url
    if recipe.rubric is not None:  # one fixed rubric for every prompt, whatever the dataset's rubric column holds
        overrides["rubric"], overrides["rubric_column"] = recipe.rubric, None
    return base.replace(**overrides) if overrides else base


def build_reward(recipe: RecipeArguments, *, judge: Any = None, base_url: str | None = None) -> Any:
    """The training reward (or, with ``judge``/``base_url``, the same reward judged by another judge)."""
    from ...rl import RubricReward

    return RubricReward(reward_config(recipe, judge=judge, base_url=base_url))


def has_monitor_judge(recipe: RecipeArguments) -> bool:
    """Whether the monitor and the report have a judge of their own (``monitor_judge`` or its base URL set);
    otherwise the training judge is theirs. The one answer for the monitor, the report and the check."""
    return recipe.monitor_judge is not None or recipe.monitor_judge_base_url is not None


def has_second_judge(recipe: RecipeArguments) -> bool:
    """Whether the report has a second judge (``second_judge`` or its base URL set)."""
    return recipe.second_judge is not None or recipe.second_judge_base_url is not None


def build_monitor_reward(recipe: RecipeArguments) -> Any:
    """A new reward judged by the monitor's judge (the training judge when there is no monitor judge)."""
    if not has_monitor_judge(recipe):
        return build_reward(recipe)
    return build_reward(recipe, judge=recipe.monitor_judge, base_url=recipe.monitor_judge_base_url)


def build_second_reward(recipe: RecipeArguments) -> Any:
    """The reward judged by the report's second judge (call only when :func:`has_second_judge`)."""
    return build_reward(recipe, judge=recipe.second_judge, base_url=recipe.second_judge_base_url)


def monitor_reward(recipe: RecipeArguments, training_reward: Any) -> Any:
    """The monitor's reward: ``training_reward`` itself unless the monitor has a judge of its own."""
    return build_monitor_reward(recipe) if has_monitor_judge(recipe) else training_reward


def generation_kwargs(recipe: RecipeArguments, max_new_tokens: int | None = None) -> dict[str, Any]:
    """``generate_responses`` arguments of the monitor and the report (adapters merged: no LoRA cost per token)."""
    return {"backend": recipe.generation_backend, "base_url": recipe.generation_base_url,
            "max_new_tokens": max_new_tokens or recipe.eval_max_new_tokens, "batch_size": recipe.eval_batch_size,
            "merge_adapter": True, "dtype": recipe.eval_dtype}


def build_monitor(recipe: RecipeArguments, training: Any, model: Any, selection: Sequence[Mapping[str, Any]],
                  reward: Any) -> Any:
    """The :class:`~rubric_reward.recipes.grpo.monitor.CheckpointMonitor` on the selection split."""
    from .monitor import CheckpointMonitor

    try:
        from .plots import plot_monitor
    except ImportError:  # matplotlib is optional for training
        plot_monitor = None
    judged_by = monitor_reward(recipe, reward)
    return CheckpointMonitor(
        selection, reward=judged_by, model=model.model_name_or_path,
        output_dir=training.output_dir, generation=generation_kwargs(recipe),
        n_resamples=recipe.bootstrap_resamples, confidence=recipe.confidence, seed=training.seed,
        plot=plot_monitor, training_reward=None if judged_by is reward else reward, watch=recipe.watch,
    )
