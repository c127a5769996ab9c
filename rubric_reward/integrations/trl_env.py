"""The rubric judge as a TRL 1.16 ``environment_factory`` environment that owns its reward.

TRL 1.16 lets an environment define ``get_reward()`` (no arguments, may be async): it is called once per finished
rollout and becomes an extra reward column, weight 1, logged under the environment's class name; ``reward_funcs``
may then be omitted. The environment sees the dataset row in ``reset(**row)`` and what the model does only through
its tools, so this one gives the model a ``submit_answer`` tool and judges the submitted answer against the row's
rubric::

    from rubric_reward.integrations.trl_env import rubric_environment

    GRPOTrainer(model=..., train_dataset=rows_with_prompt_and_rubric,
                environment_factory=rubric_environment("reward.yaml"), ...)   # no reward_funcs needed

Judging starts when the model submits (on the reward's own event loop), so the judge calls of a batch overlap
with each other and with generation; TRL awaits ``get_reward()`` of each rollout in turn, which then mostly
collects finished results. A rollout that never submits gets ``no_answer_reward`` (default 0.0: not answering
is a failure); an unscored one (judge failure, bad rubric) gets ``None``, which TRL leaves out like any ``None``
reward. The factory pickles as its settings (TRL's AsyncGRPOTrainer ships it to a spawned child); each process
builds one :class:`~rubric_reward.rl.RubricReward` from them and shares it between its environments.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

__all__ = ["RubricEnvironment", "RubricEnvironmentFactory", "rubric_environment"]


class RubricEnvironmentFactory:
    """``environment_factory`` for TRL: each call makes a :class:`RubricEnvironment` sharing one reward."""

    def __init__(self, config: Any = None, *, rubric_column: str = "rubric", no_answer_reward: float | None = 0.0,
                 **overrides: Any):
        if isinstance(config, Path):
            config = str(config)
        self.config, self.overrides = config, dict(overrides)
        self.rubric_column, self.no_answer_reward = rubric_column, no_answer_reward
        self._reward: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_reward", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reward, self._lock = None, threading.Lock()

    @property
    def reward(self) -> Any:
        """The process's :class:`RubricReward` for these settings (built on first use)."""
        with self._lock:
            if self._reward is None:
                from rubric_reward.rl import RubricReward

                self._reward = RubricReward(self.config, **{"rubric_column": self.rubric_column, **self.overrides})
            return self._reward

    def start(self, prompt: Any, answer: str, label: Any) -> Any:
        """Start judging one answer on the reward's loop; a ``concurrent.futures.Future`` of ``[reward]``."""
        reward = self.reward
        columns = {} if self.rubric_column is None else {self.rubric_column: [label]}
        coro = reward.as_async()(prompts=[prompt], completions=[answer], **columns)
        return reward._lifetime().loop_thread().submit(coro)

    def __call__(self) -> RubricEnvironment:
        return RubricEnvironment(self)

    def close(self) -> None:
        if self._reward is not None:
            self._reward.close()


class RubricEnvironment:
    """One rollout's environment: ``reset(**row)`` reads the prompt and rubric, the model answers through
    ``submit_answer``, ``await get_reward()`` is the judged reward (``None`` when unscored)."""

    def __init__(self, factory: RubricEnvironmentFactory):
        self._factory = factory
        self._prompt: Any = None
        self._label: Any = None
        self._pending: Any = None

    def reset(self, **row: Any) -> None:
        """TRL passes the dataset row; the prompt is left as it is (``None``: nothing appended)."""
        self._prompt = row.get("prompt")
        self._label = row.get(self._factory.rubric_column) if self._factory.rubric_column else None
        self._pending = None
        return None

    def submit_answer(self, answer: str) -> str:
        """Submit your final answer to the user's request. Call this once, when the answer is complete.

        Args:
            answer: The complete final answer, exactly as the user should read it.
        """
        if self._pending is not None:
            return "An answer was already submitted; only the first one counts."
        self._pending = self._factory.start(self._prompt, str(answer), self._label)
        return "Answer submitted."

    async def get_reward(self) -> float | None:
        if self._pending is None:
            return self._factory.no_answer_reward
        values = await asyncio.wrap_future(self._pending)
        return values[0]


def rubric_environment(config: Any = None, *, rubric_column: str = "rubric", no_answer_reward: float | None = 0.0,
                       **overrides: Any) -> RubricEnvironmentFactory:
    """A TRL ``environment_factory`` whose environments own the rubric reward (see the module docstring).

    ``config``/``overrides``: as for :class:`~rubric_reward.rl.RubricReward`; ``rubric_column``: the dataset
    column holding each row's rubric (``None``: the config's default ``rubric``)."""
    return RubricEnvironmentFactory(config, rubric_column=rubric_column, no_answer_reward=no_answer_reward,
                                    **overrides)
