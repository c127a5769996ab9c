"""Shaping rewards: TRL's own length and repetition terms, added to the rubric reward in training only.

The rubric says what a good answer is; these say how a rollout should not look while the policy learns it
(a token n-gram repetition penalty, a soft penalty near ``max_completion_length``). The monitor, the report and
every comparison score the rubric alone, so a shaping term can change what is learnt but never what is measured.
The recipe's ``shaping_rewards`` mapping is read by the package's section reader (:mod:`rubric_reward.io.sections`);
the terms reach the trainer in the mapping's order, after the rubric (the order of GRPOConfig's ``reward_weights``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...io.sections import check_fields, from_section

__all__ = ["RepetitionPenalty", "ShapingConfig", "SoftOverlongPunishment", "build_shaping", "check_shaping"]


@dataclass(frozen=True)
class RepetitionPenalty:
    """``trl.rewards.get_repetition_penalty_reward``: minus the share of repeated token n-grams, scaled."""

    ngram_size: int = field(default=3, metadata={"help": "n of the token n-grams compared", "ge": 1})
    max_penalty: float = field(default=-1.0, metadata={"help": "the penalty of a fully repetitive completion",
                                                       "le": 0})

    def __post_init__(self) -> None:
        check_fields(self, "shaping_rewards.repetition_penalty")

    def build(self, max_completion_length: int | None) -> Callable[..., list[float]]:
        from trl.rewards import get_repetition_penalty_reward

        return get_repetition_penalty_reward(self.ngram_size, self.max_penalty)


@dataclass(frozen=True)
class SoftOverlongPunishment:
    """``trl.rewards.get_soft_overlong_punishment``: 0 up to the last ``soft_punish_cache`` tokens before
    ``max_completion_length``, then linearly down to -1 at the cap."""

    soft_punish_cache: int = field(default=16, metadata={
        "help": "tokens before max_completion_length over which the penalty grows", "ge": 1})

    def __post_init__(self) -> None:
        check_fields(self, "shaping_rewards.soft_overlong_punishment")

    def check(self, max_completion_length: int | None) -> None:
        if max_completion_length is not None and self.soft_punish_cache > max_completion_length:
            raise ValueError(f"shaping_rewards.soft_overlong_punishment.soft_punish_cache: {self.soft_punish_cache} "
                             f"exceeds max_completion_length ({max_completion_length})")

    def build(self, max_completion_length: int | None) -> Callable[..., list[float]]:
        if max_completion_length is None:
            raise ValueError("shaping_rewards.soft_overlong_punishment: needs max_completion_length (null here)")
        self.check(max_completion_length)
        from trl.rewards import get_soft_overlong_punishment

        return get_soft_overlong_punishment(max_completion_length, self.soft_punish_cache)


@dataclass(frozen=True)
class ShapingConfig:
    """The recipe's ``shaping_rewards`` section: each term a mapping of its parameters ({} or null: TRL's defaults)."""

    repetition_penalty: RepetitionPenalty | None = field(default=None, metadata={
        "help": "token n-gram repetition penalty (ngram_size, max_penalty)"})
    soft_overlong_punishment: SoftOverlongPunishment | None = field(default=None, metadata={
        "help": "soft penalty over the last tokens before max_completion_length (soft_punish_cache)"})

    def __post_init__(self) -> None:
        check_fields(self, "shaping_rewards")


def _terms(spec: Any) -> list[Any]:
    """The terms of ``spec`` (None or a mapping), read by the section reader, in the mapping's order."""
    if spec is None:
        return []
    if isinstance(spec, Mapping):  # a term named with null or {} takes TRL's defaults
        spec = {name: {} if params is None else params for name, params in spec.items()}
    config = from_section(ShapingConfig, spec, "shaping_rewards")
    return [getattr(config, name) for name in spec]


def check_shaping(spec: Any, *, max_completion_length: int | None = None,
                  reward_weights: Sequence[float] | None = None, per_criterion: bool = False) -> None:
    """Raise ``ValueError`` (one line naming the field) unless ``spec`` is None or a valid mapping; with
    ``max_completion_length`` and ``reward_weights`` (GRPOConfig's), also that they fit it. With ``per_criterion``
    (the recipe's ``per_criterion_rewards``) the weights come from the rubric, so ``reward_weights`` must be unset."""
    terms = _terms(spec)
    for term in terms:
        if isinstance(term, SoftOverlongPunishment):
            term.check(max_completion_length)
    if per_criterion and reward_weights is not None:
        raise ValueError("reward_weights: leave unset with per_criterion_rewards (the criteria's weights are used)")
    if terms and reward_weights is not None and len(reward_weights) != 1 + len(terms):
        raise ValueError(f"reward_weights: {len(reward_weights)} weight(s) for {1 + len(terms)} rewards (the rubric, "
                         "then each of shaping_rewards)")


def build_shaping(spec: Any, max_completion_length: int | None, reward_weights: Sequence[float] | None = None, *,
                  per_criterion: bool = False) -> list[Callable[..., list[float]]]:
    """TRL's reward functions for ``spec``, in the mapping's order (checked as :func:`check_shaping` does)."""
    check_shaping(spec, max_completion_length=max_completion_length, reward_weights=reward_weights,
                  per_criterion=per_criterion)
    return [term.build(max_completion_length) for term in _terms(spec)]
