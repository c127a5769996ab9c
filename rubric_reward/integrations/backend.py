"""Where trainer adapters get rewards: judged in-process, or asked of the reward service.

Trainers such as verl and OpenRLHF name a file and a function and pass no objects, so the adapters
find their settings in keyword arguments (verl's ``reward_kwargs``) or the environment:

* ``url`` / ``RUBRIC_REWARD_URL``: the reward service (token from ``RUBRIC_REWARD_TOKEN``);
* ``config`` / ``RUBRIC_REWARD_CONFIG``: a ``reward.yaml`` judged in this process;
* ``unscored_reward`` / ``RUBRIC_REWARD_UNSCORED``: the number an unscored sample gets with the
  service (in-process, the config's ``serve.unscored_reward``).

One backend per setting is built per process and reused (pooled connections, one judge pool).
Every sample comes back as an :class:`Outcome`; failures, including a bad label or an unreachable
service, are data (an explicit unscored outcome with its error), never an exception or a hang.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Outcome", "Sample", "get_backend"]

log = logging.getLogger("rubric_reward.integrations")

Sample = tuple[Any, str, Any]  # (prompt or None, response text, label)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One sample's result: ``reward`` is a number (the unscored fallback when ``unscored``)."""

    reward: float
    score: float | None
    unscored: bool
    cost: float = 0.0
    error: str | None = None

    def as_dict(self) -> dict[str, float]:
        """verl's per-sample dict: ``score`` plus numeric extra info (verl averages these)."""
        return {"score": self.reward, "rubric_unscored": float(self.unscored), "rubric_judge_cost": self.cost}


class _Local:
    """Judges in this process with a :class:`RewardEngine` on a private event-loop thread."""

    def __init__(self, config: Any):
        from rubric_reward._loop import LoopThread
        from rubric_reward.serve.engine import RewardEngine

        self._loop = LoopThread("rubric-reward-adapter")

        async def build() -> RewardEngine:
            return RewardEngine(config)

        self.engine = self._loop.run(build())
        self.fallback = float(self.engine.config.serve.unscored_reward)

    def score(self, samples: Sequence[Sample]) -> list[Outcome]:
        return self._loop.run(self.ascore(samples))

    async def ascore(self, samples: Sequence[Sample]) -> list[Outcome]:
        engine, fallback = self.engine, self.fallback
        out: list[Outcome | None] = [None] * len(samples)
        pairs, where = [], []
        for i, (prompt, response, label) in enumerate(samples):
            try:
                pairs.append(engine.label_pair(prompt, response, label, f"sample {i}: label", id=str(i)))
                where.append(i)
            except (ValueError, TypeError) as exc:  # a bad label or prompt: this sample only
                out[i] = _failed(fallback, str(exc))
        if pairs:
            results = await engine.score(pairs)
            for i, res in zip(where, results, strict=True):
                reward = engine.reward(res)
                out[i] = Outcome(fallback if reward is None else reward, res.score, reward is None, res.cost, res.error)
        return [o for o in out if o is not None]

    def close(self) -> None:
        self._loop.run(self.engine.aclose())
        self._loop.close()


class _Remote:
    """Asks the reward service's ``/score`` with ``label`` items; a sample the service rejects is dropped and the rest resent."""

    def __init__(self, url: str, unscored_reward: float):
        from rubric_reward.serve.client import RewardClient

        self.client = RewardClient(url)
        self.fallback = unscored_reward

    def score(self, samples: Sequence[Sample]) -> list[Outcome]:
        return self.client._run(self.ascore(samples))

    async def ascore(self, samples: Sequence[Sample]) -> list[Outcome]:
        from rubric_reward.serve.client import RewardServiceError

        out: list[Outcome | None] = [None] * len(samples)
        todo = list(range(len(samples)))
        while todo:
            items = []
            for i in todo:
                prompt, response, label = samples[i]
                item: dict[str, Any] = {"id": str(i), "response": str(response), "label": _jsonable(label)}
                if prompt is not None:
                    item["prompt"] = _jsonable(prompt)
                items.append(item)
            try:
                results = await self.client.ascore(items)
            except RewardServiceError as exc:
                bad = _item_index(exc.field)
                if exc.status is not None and 400 <= exc.status < 500 and bad is not None and bad < len(todo):
                    out[todo[bad]] = _failed(self.fallback, str(exc))  # drop the rejected sample, send the rest
                    todo.pop(bad)
                    continue
                for i in todo:
                    out[i] = _failed(self.fallback, str(exc))
                break
            for i, res in zip(todo, results, strict=True):
                reward = res.get("reward")
                out[i] = Outcome(self.fallback if reward is None else float(reward), res.get("score"), reward is None,
                                 float(res.get("cost") or 0.0), res.get("error"))
            break
        return [o for o in out if o is not None]


    def close(self) -> None:
        self.client.close()


def _jsonable(value: Any) -> Any:
    """Labels and prompts from dataframes (numpy arrays, numpy scalars) as plain JSON values."""
    import json

    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def _failed(fallback: float, error: str) -> Outcome:
    log.warning("rubric reward: sample unscored: %s", error)
    return Outcome(fallback, None, True, 0.0, error)


def _item_index(field: str | None) -> int | None:
    if not field or not field.startswith("items["):
        return None
    try:
        return int(field[6:field.index("]")])
    except ValueError:
        return None


_BACKENDS: dict[tuple, Any] = {}
_LOCK = threading.Lock()


def get_backend(config: Any = None, url: str | None = None, unscored_reward: float | None = None) -> Any:
    """The process-wide backend for these settings (keyword arguments first, then the environment)."""
    url = url or os.environ.get("RUBRIC_REWARD_URL") or None
    config = config or os.environ.get("RUBRIC_REWARD_CONFIG") or None
    if url is None and config is None:
        raise ValueError("rubric reward: set RUBRIC_REWARD_URL (the reward service) or RUBRIC_REWARD_CONFIG "
                         "(a reward.yaml to judge in-process), or pass url= / config= as reward kwargs")
    if unscored_reward is None:
        unscored_reward = float(os.environ.get("RUBRIC_REWARD_UNSCORED", "0"))
    key = ("url", url, unscored_reward) if url else ("config", str(config))
    with _LOCK:
        backend = _BACKENDS.get(key)
        if backend is None:
            backend = _Remote(url, unscored_reward) if url else _Local(config)
            if not _BACKENDS:
                atexit.register(_close_all)
            _BACKENDS[key] = backend
        return backend


def _close_all() -> None:
    """At exit: close judge sessions and the cache cleanly (best effort)."""
    with _LOCK:
        backends = list(_BACKENDS.values())
        _BACKENDS.clear()
    for backend in backends:
        try:
            backend.close()
        except Exception:  # exiting anyway
            pass
