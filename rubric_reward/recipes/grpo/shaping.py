"""Shaping rewards: TRL's own length and repetition terms, added to the rubric reward in training only.

The rubric says what a good answer is; these say how a rollout should not look while the policy learns it
(a token n-gram repetition penalty, a soft penalty near ``max_completion_length``). The monitor, the report and
every comparison score the rubric alone, so a shaping term can change what is learnt but never what is measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["SHAPING_REWARDS", "build_shaping", "check_shaping"]

DEFAULT_CACHE = 16  # soft_punish_cache when not given: the last 16 tokens before the cap

#: name -> (the parameters it takes, with their types)
SHAPING_REWARDS: dict[str, dict[str, type]] = {
    "repetition_penalty": {"ngram_size": int, "max_penalty": float},
    "soft_overlong_punishment": {"soft_punish_cache": int},
}


def check_shaping(spec: Any, *, max_completion_length: int | None = None,
                  reward_weights: Sequence[float] | None = None) -> None:
    """Raise ``ValueError`` (one line naming the field) unless ``spec`` is None or a valid mapping; with
    ``max_completion_length`` and ``reward_weights`` (GRPOConfig's), also that they fit it."""
    if spec is None:
        return
    if not isinstance(spec, Mapping):
        raise ValueError(f"shaping_rewards: expected a mapping of {', '.join(SHAPING_REWARDS)}, got {spec!r}")
    for name, params in spec.items():
        if name not in SHAPING_REWARDS:
            raise ValueError(f"shaping_rewards.{name}: unknown; expected one of {', '.join(SHAPING_REWARDS)}")
        params = {} if params is None else params
        if not isinstance(params, Mapping):
            raise ValueError(f"shaping_rewards.{name}: expected a mapping of parameters, got {params!r}")
        for key, value in params.items():
            kind = SHAPING_REWARDS[name].get(key)
            if kind is None:
                raise ValueError(f"shaping_rewards.{name}.{key}: unknown; expected "
                                 f"{', '.join(SHAPING_REWARDS[name])}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
                raise ValueError(f"shaping_rewards.{name}.{key}: expected {kind.__name__}, got {value!r}")
        if name == "repetition_penalty":
            if params.get("ngram_size", 3) < 1:
                raise ValueError(f"shaping_rewards.{name}.ngram_size: must be positive, got {params['ngram_size']}")
            if params.get("max_penalty", -1.0) > 0:
                raise ValueError(f"shaping_rewards.{name}.max_penalty: must be <= 0, got {params['max_penalty']}")
        if name == "soft_overlong_punishment":
            cache = params.get("soft_punish_cache", DEFAULT_CACHE)
            if cache < 1:
                raise ValueError(f"shaping_rewards.{name}.soft_punish_cache: must be positive, got {cache}")
            if max_completion_length is not None and cache > max_completion_length:
                raise ValueError(f"shaping_rewards.{name}.soft_punish_cache: {cache} exceeds max_completion_length "
                                 f"({max_completion_length})")
    if reward_weights is not None and len(reward_weights) != 1 + len(spec):
        raise ValueError(f"reward_weights: {len(reward_weights)} weight(s) for {1 + len(spec)} rewards (the rubric, "
                         "then each of shaping_rewards)")


def build_shaping(spec: Mapping[str, Any] | None, max_completion_length: int | None,
                  reward_weights: Sequence[float] | None = None) -> list[Callable[..., list[float]]]:
    """TRL's reward functions for ``spec`` (checked by :func:`check_shaping`), in the mapping's order."""
    check_shaping(spec, max_completion_length=max_completion_length, reward_weights=reward_weights)
    from trl.rewards import get_repetition_penalty_reward, get_soft_overlong_punishment

    funcs = []
    for name, params in (spec or {}).items():
        params = dict(params or {})
        if name == "repetition_penalty":
            funcs.append(get_repetition_penalty_reward(int(params.get("ngram_size", 3)),
                                                       float(params.get("max_penalty", -1.0))))
        else:
            if max_completion_length is None:
                raise ValueError(f"shaping_rewards.{name}: needs max_completion_length (null here)")
            cache = int(params.get("soft_punish_cache", DEFAULT_CACHE))
            funcs.append(get_soft_overlong_punishment(int(max_completion_length), cache))
    return funcs
