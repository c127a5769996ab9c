"""Where trainer adapters get rewards: judged in-process by the reward core, or asked of the reward service.

Trainers such as verl and OpenRLHF name a file and a function and pass no objects, so the adapters
find their settings in keyword arguments (verl's ``reward_kwargs``) or the environment:

* ``url`` / ``RUBRIC_REWARD_URL``: the reward service (token from ``RUBRIC_REWARD_TOKEN``);
* ``config`` / ``RUBRIC_REWARD_CONFIG``: a ``reward.yaml`` judged in this process;
* ``unscored_reward`` / ``RUBRIC_REWARD_UNSCORED`` and ``step_budget_s`` / ``RUBRIC_REWARD_STEP_BUDGET``:
  with the service, the number an unscored sample gets and a training step's budget for failing
  judge calls (default 120 s; in-process, the config's ``unscored_reward`` and ``step_budget_s``).

One backend per setting is built per process and reused (pooled connections, one judge pool).
Every sample comes back as a :class:`~rubric_reward.rewards.records.RewardRecord`; failures,
including a bad label or an unreachable service, are data (an unscored record with its error),
never an exception or a hang.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Hashable, Sequence
from typing import Any

from rubric_reward.util.loop import SyncFacade
from rubric_reward.rewards.budget import StepBudget
from rubric_reward.rewards.records import RewardRecord
from rubric_reward.rewards.trainers import score_openrlhf, unscored_cause

__all__ = ["Sample", "get_backend"]

log = logging.getLogger("rubric_reward.integrations")

Sample = tuple[Any, ...]  # (prompt or None, response, label), optionally a group label after them


class _Backend(SyncFacade):
    """Scores samples on a private event-loop thread; per-sample entry points share a :class:`StepBudget`."""

    _loop_name = "rubric-reward-adapter"
    fallback: float
    budget: StepBudget

    async def _score(self, samples: Sequence[Sample], deadline_s: float | None) -> list[RewardRecord]:
        raise NotImplementedError

    def score(self, samples: Sequence[Sample], *, step: Hashable = None, budgeted: bool = False) -> list[RewardRecord]:
        """Records for ``samples``; ``budgeted``: one per-sample call of a training step (``step``: its key)."""
        return self._run(self.ascore(samples, step=step, budgeted=budgeted))

    async def ascore_from_any_loop(self, samples: Sequence[Sample], *, step: Hashable = None,
                                   budgeted: bool = False) -> list[RewardRecord]:
        """:meth:`score` for a caller on its own event loop: awaited there, judged on the backend's loop."""
        return await self._arun(self.ascore(samples, step=step, budgeted=budgeted))

    def score_openrlhf(self, queries: Sequence[Any], prompts: Sequence[Any],
                       labels: Sequence[Any] | None) -> list[RewardRecord]:
        """Records for OpenRLHF's (query, prompt, label) samples (the reward core's reading of them)."""
        return self._run(score_openrlhf(self.ascore, queries, prompts, labels))

    async def ascore(self, samples: Sequence[Sample], *, step: Hashable = None,
                     budgeted: bool = False) -> list[RewardRecord]:
        if not budgeted:
            return await self._score(samples, None)
        ticket = self.budget.begin(step)
        records: list[RewardRecord] = []
        try:
            if ticket.remaining_s == 0:
                error = (f"this step's reward budget ({self.budget.budget_s:g} s, step_budget_s) was spent on "
                         "failing judge calls")
                records = [RewardRecord.failed(error, "service") for _ in samples]
            else:
                records = await self._score(samples, ticket.remaining_s)
        finally:
            self.budget.end(ticket, failed=any(unscored_cause(r) == "judge" for r in records))
        return records


class _Local(_Backend):
    """Judges in this process with the reward core."""

    def __init__(self, config: Any):
        from rubric_reward.rewards.engine import RewardEngine

        async def build() -> RewardEngine:
            return RewardEngine(config)

        self.engine = self._own(self._run(build()))
        self.fallback = float(self.engine.config.unscored_reward)
        self.budget = StepBudget(self.engine.config.step_budget)

    async def _score(self, samples: Sequence[Sample], deadline_s: float | None) -> list[RewardRecord]:
        records = await self.engine.score_samples(samples, deadline_s=deadline_s)
        for r in records:
            if r.unscored and r.result is None:  # bad data or label, never judged
                log.warning("rubric reward: sample unscored: %s", r.error)
        return records


class _Remote(_Backend):
    """Asks the reward service's ``/score`` with ``label`` items; a sample the service rejects is dropped
    and the rest resent."""

    def __init__(self, url: str, unscored_reward: float, step_budget_s: float | None):
        from rubric_reward.rewards.client import RewardClient

        self.client = self._own(RewardClient(url))
        self.fallback = unscored_reward
        self.budget = StepBudget(step_budget_s)

    async def _score(self, samples: Sequence[Sample], deadline_s: float | None) -> list[RewardRecord]:
        from rubric_reward.rewards.client import RewardServiceError

        out: list[RewardRecord | None] = [None] * len(samples)
        todo = list(range(len(samples)))
        while todo:
            items = []
            for i in todo:
                prompt, response, label = samples[i][:3]
                item: dict[str, Any] = {"id": str(i), "response": _jsonable(response), "label": _jsonable(label)}
                if prompt is not None:
                    item["prompt"] = _jsonable(prompt)
                if len(samples[i]) > 3 and samples[i][3] is not None:
                    item["group"] = str(samples[i][3])
                items.append(item)
            try:
                results = await self.client.ascore(items, deadline_s=deadline_s)
            except RewardServiceError as exc:
                bad = _item_index(exc.field)
                if exc.status is not None and 400 <= exc.status < 500 and bad is not None and bad < len(todo):
                    out[todo[bad]] = _failed(str(exc), "rejected")  # drop the rejected sample, send the rest
                    todo.pop(bad)
                    continue
                for i in todo:
                    out[i] = _failed(str(exc), "service")
                break
            for i, res in zip(todo, results, strict=True):
                reward = res.get("reward")
                out[i] = RewardRecord(None if reward is None else float(reward), score=res.get("score"),
                                      error=res.get("error"), cost=float(res.get("cost") or 0.0),
                                      error_kinds=() if reward is not None else ("judge",))
            break
        return [o for o in out if o is not None]


def _jsonable(value: Any) -> Any:
    """Labels and prompts from dataframes (numpy arrays, numpy scalars) as plain JSON values."""
    import json

    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def _failed(error: str, kind: str) -> RewardRecord:
    log.warning("rubric reward: sample unscored: %s", error)
    return RewardRecord.failed(error, kind)


def _item_index(field: str | None) -> int | None:
    if not field or not field.startswith("items["):
        return None
    try:
        return int(field[6:field.index("]")])
    except ValueError:
        return None


_BACKENDS: dict[tuple, Any] = {}
_INHERITED: list[Any] = []  # a forked child's copies of the parent's backends: kept, never used or closed
_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked worker (verl's prime manager) builds its own backends: the parent's loop thread is not here."""
    global _LOCK
    _INHERITED.extend(_BACKENDS.values())
    _BACKENDS.clear()
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def get_backend(config: Any = None, url: str | None = None, unscored_reward: float | None = None,
                step_budget_s: float | None = None) -> Any:
    """The process-wide backend for these settings (keyword arguments first, then the environment).

    ``step_budget_s`` applies to the service (``url``; default 120 s); in-process, the config's applies."""
    url = url or os.environ.get("RUBRIC_REWARD_URL") or None
    config = config or os.environ.get("RUBRIC_REWARD_CONFIG") or None
    if url is None and config is None:
        raise ValueError("rubric reward: set RUBRIC_REWARD_URL (the reward service) or RUBRIC_REWARD_CONFIG "
                         "(a reward.yaml to judge in-process), or pass url= / config= as reward kwargs")
    if unscored_reward is None:
        unscored_reward = float(os.environ.get("RUBRIC_REWARD_UNSCORED", "0"))
    if url and step_budget_s is None:
        step_budget_s = float(os.environ.get("RUBRIC_REWARD_STEP_BUDGET", "120"))
    key = ("url", url, unscored_reward, step_budget_s) if url else ("config", str(config))
    with _LOCK:
        backend = _BACKENDS.get(key)
        if backend is None:  # closed at interpreter exit (SyncFacade): judge sessions and the cache
            backend = _BACKENDS[key] = _Remote(url, unscored_reward, step_budget_s) if url else _Local(config)
        return backend
