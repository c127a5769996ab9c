"""A rubric reward combined with other reward functions, keeping "unscored means left out".

TRL leaves a completion out of its group's baseline only when *every* reward function returns
``None``; with ``reward_funcs=[RubricReward(...), other]`` an unscored rubric counts as 0 in TRL's
weighted sum and the row stays in the baseline. :func:`combine_rewards` gives TRL one function
instead, whose value is the weighted sum and which is ``None`` for the whole row when the rubric is
unscored::

    reward = combine_rewards(RubricReward("reward.yaml"), [format_reward], weights=[1.0, 0.2])
    GRPOTrainer(model=..., reward_funcs=reward, ...)        # no reward_weights: the weights are here

A ``None`` from another function counts as 0, as in TRL (such functions use it for rows they do not
apply to). Each other function's mean is logged as ``rewards/<name>/mean`` through TRL's
``log_metric``; the rubric logs its own metrics as usual.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["CombinedReward", "combine_rewards"]


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


class CombinedReward:
    """``rubric`` plus ``also`` as one TRL reward function (see the module docstring)."""

    def __init__(self, rubric: Callable[..., list[float | None]], also: Sequence[Callable[..., list[Any]]], *,
                 weights: Sequence[float] | None = None, name: str | None = None):
        also = list(also)
        for fn in (rubric, *also):
            if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):
                raise ValueError(f"combine_rewards: {_name(fn)!r} is async; combine sync reward functions "
                                 "(a RubricReward, not its as_async() form)")
        weights = [1.0] * (1 + len(also)) if weights is None else [float(w) for w in weights]
        if len(weights) != 1 + len(also) or not all(math.isfinite(w) for w in weights):
            raise ValueError(f"combine_rewards: 'weights' needs {1 + len(also)} finite numbers (the rubric's "
                             f"first), got {weights}")
        self.rubric, self.also, self.weights = rubric, also, weights
        self.__name__ = name or "+".join(_name(fn) for fn in (rubric, *also))

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), **kwargs: Any
                 ) -> list[float | None]:
        rubric = self.rubric(prompts=prompts, completions=completions, **kwargs)
        totals = [None if r is None else self.weights[0] * r for r in rubric]
        log_metric = kwargs.get("log_metric")
        for fn, weight in zip(self.also, self.weights[1:], strict=True):
            values = list(fn(prompts=prompts, completions=completions, **kwargs))
            if len(values) != len(totals):
                raise ValueError(f"combine_rewards: {_name(fn)!r} gave {len(values)} rewards for "
                                 f"{len(totals)} completions")
            given = [float(v) for v in values if v is not None and math.isfinite(v)]
            if log_metric is not None and given:
                log_metric(f"rewards/{_name(fn)}/mean", sum(given) / len(given))
            totals = [None if t is None else t + (weight * v if v is not None and math.isfinite(v) else 0.0)
                      for t, v in zip(totals, values, strict=True)]
        return totals

    def close(self) -> None:
        for fn in (self.rubric, *self.also):
            close = getattr(fn, "close", None)
            if callable(close):
                close()


def combine_rewards(rubric: Callable[..., list[float | None]], also: Sequence[Callable[..., list[Any]]], *,
                    weights: Sequence[float] | None = None, name: str | None = None) -> CombinedReward:
    """One TRL reward function: ``weights[0] * rubric + sum(weights[i] * also[i-1])``, ``None`` for a row
    whose rubric reward is ``None`` (default weights: all 1)."""
    return CombinedReward(rubric, also, weights=weights, name=name)
