"""A rubric's criteria as separate TRL reward functions, for per-criterion (GDPO) advantages.

With one rubric reward, GRPO normalises the weighted sum of all criteria within each group: a flaw that one
rollout of eight shows and the instruction the rubric exists for are added before anything is compared.
``GRPOConfig(multi_objective_aggregation="normalize_then_sum")`` normalises each reward function within its group
first, then sums them with ``reward_weights`` (GDPO). :func:`criterion_rewards` gives TRL one function per
criterion name and those weights::

    funcs, weights = criterion_rewards(RubricReward(...), rubrics)     # rubrics: the ones training will see
    args = GRPOConfig(..., multi_objective_aggregation="normalize_then_sum", reward_weights=weights)
    GRPOTrainer(..., reward_funcs=funcs, args=args)

Each batch is judged once: the first of these functions TRL calls scores it through the rubric reward (its
metrics, completion columns and unscorable streak as usual) and the others read those records. The function of
criterion ``k`` returns the value ``k`` counts with in the score (:func:`~rubric_reward.arithmetic.counted_value`:
failures at the criterion's worst, abstentions by the scoring config; the expected value when the reward is
``expected_score``), ``None`` where the row's rubric has no criterion of that name, the row is unscored or the
criterion is left out, and the criterion's worst value where a guard decided the reward. TRL leaves a ``None``
out of that function's group statistics, and a row with every function ``None`` out of the baseline.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..rewards.records import RewardRecord, criterion_targets
from ..rubric import Rubric
from ..arithmetic import counted_value
from .reward import RubricReward

__all__ = ["CriterionReward", "criterion_rewards", "criterion_weights"]


def criterion_weights(rubrics: Iterable[Rubric]) -> dict[str, float]:
    """Each criterion name's weight in the reward (:attr:`~rubric_reward.rubric.Criterion.reward_weight`: 0 for a
    monitor, whose function TRL then logs without adding it), in first-seen order; a name with two weights is a
    one-line ``ValueError`` (TRL has one weight per reward function)."""
    weights: dict[str, float] = {}
    where: dict[str, str] = {}
    seen: set[int] = set()
    for rubric in rubrics:
        if id(rubric) in seen:
            continue
        seen.add(id(rubric))
        for c in rubric.criteria:
            if c.name in weights and not math.isclose(weights[c.name], c.reward_weight):
                raise ValueError(f"per-criterion rewards: criterion {c.name!r} has weight {weights[c.name]:g} in "
                                 f"rubric {where[c.name]!r} and {c.reward_weight:g} in rubric {rubric.name!r}; a "
                                 "criterion name needs one weight (rename one of them)")
            if c.name not in weights:
                weights[c.name], where[c.name] = float(c.reward_weight), rubric.name
    return weights


class _Batches:
    """The records of the batch TRL is computing rewards for, scored once through the rubric reward."""

    def __init__(self, reward: RubricReward):
        self.reward = reward
        self._completions: Any = None
        self._records: list[RewardRecord] = []

    def __getstate__(self) -> dict[str, Any]:  # the reward pickles as its config; the last batch stays behind
        return {"reward": self.reward}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["reward"])

    def records(self, prompts: Any, completions: Sequence[Any], kwargs: dict[str, Any]) -> list[RewardRecord]:
        # TRL passes the same list object to every reward function of one step; holding it keeps its id unique
        if completions is not self._completions:
            self._records = self.reward.call_records(prompts, completions, **kwargs)
            self._completions = completions
        return self._records


def _position(rubric: Rubric, name: str) -> int | None:
    return next((i for i, (n, _, _) in enumerate(criterion_targets(rubric)) if n == name), None)


class CriterionReward:
    """One criterion's value as a TRL reward function (see the module docstring); TRL logs it as
    ``rewards/<reward name>:<criterion>/...``."""

    def __init__(self, batches: _Batches, criterion: str):
        self._batches, self.criterion = batches, criterion
        self.__name__ = f"{batches.reward.__name__}:{criterion}"
        config = batches.reward.config
        self._expected = config.reward == "expected_score"
        self._scoring = config.scoring_config()

    def value(self, record: RewardRecord) -> float | None:
        """This criterion's value in ``record`` (None: not in its rubric, unscored, or left out)."""
        rubric = record.rubric
        if record.reward is None or rubric is None:
            return None
        i = _position(rubric, self.criterion)
        if i is None:
            return None
        c = rubric.criteria[i]
        if record.guard is not None or record.result is None:
            return c.worst_value if c.weight > 0 else c.best_value
        counted = counted_value(c, record.result.verdicts[i], self._scoring)
        if counted is None:
            return None
        return counted[1] if self._expected else counted[0]

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), **kwargs: Any
                 ) -> list[float | None]:
        return [self.value(r) for r in self._batches.records(prompts, completions, kwargs)]

    def close(self) -> None:
        self._batches.reward.close()


def criterion_rewards(reward: RubricReward, rubrics: Iterable[Rubric]) -> tuple[list[CriterionReward], list[float]]:
    """One reward function per criterion name of ``rubrics`` (the rubrics training will see) and their weights,
    for ``GRPOConfig(multi_objective_aggregation="normalize_then_sum", reward_weights=weights)``."""
    config = reward.config
    if config.length_penalty.enabled:
        raise ValueError("per-criterion rewards: reward_config.length_penalty is not carried by criterion rewards; "
                         "turn it off (a shaping term can penalise length)")
    if config.scoring_config().all_or_nothing:
        raise ValueError("per-criterion rewards: reward_config.scoring.all_or_nothing is one pass/fail over every "
                         "criterion; it cannot be split per criterion")
    weights = criterion_weights(rubrics)
    if not weights:
        raise ValueError("per-criterion rewards: no criteria in the rubrics given")
    batches = _Batches(reward)
    return [CriterionReward(batches, name) for name in weights], list(weights.values())
