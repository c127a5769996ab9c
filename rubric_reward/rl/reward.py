"""RubricReward: rubric scores as a reward function for TRL (GRPO, RLOO) and any other trainer.

The judging is the reward core's (:mod:`rubric_reward.rewards`: config, rubric resolution, think
stripping, judges, cache, the reward read), so TRL, the service and the adapters agree. What is
TRL's lives here: the call shape and its columns, binding to the trainer, the truncation guard and
the length penalty, the unscorable streak, and logging. One call judges a whole generation batch
concurrently within the judges' limits; identical (prompt, completion, rubric) triples are judged
once. Nothing in here stops or hangs training: a per-batch deadline turns stragglers into failures,
a malformed completion or rubric label is unscored with its cause, every exception becomes ``None``
rewards plus one log line, and only a run of mostly unscorable batches raises, with an error that
says which judge failed how. A batch whose shape cannot be aligned (a bare string for
``completions``, lists of different lengths) is one clear ``ValueError``.

The object pickles as its config: judges, connections and the loop thread are rebuilt lazily in the
process that unpickles it, and closed on ``close()``, garbage collection or interpreter exit.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..util.loop import SyncFacade
from ..rewards.config import RewardConfig
from ..rewards.length import length_penalties
from ..rewards.records import RewardRecord, failed_criteria
from ..items import prompt_key
from ..rewards.samples import BatchShapeError, SampleError, aligned, as_list
from .step_metrics import RunningTotals, batch_metrics

__all__ = ["AsyncRubricReward", "RewardRecord", "RubricReward", "UnscorableBatchesError", "rubric_rewards"]

log = logging.getLogger("rubric_reward.rl")


class UnscorableBatchesError(RuntimeError):
    """Too many consecutive batches were (mostly) unscorable: training on nothing is worse than stopping."""


class _Batch:
    """One call's prompts, records, and what the metrics need (prompt keys once per prompt object)."""

    def __init__(self, prompts: list[Any]):
        self.prompts = prompts
        self.records: list[RewardRecord] = []
        self.unique = 0
        self._keys: list[str] | None = None

    @property
    def prompt_keys(self) -> list[str]:
        """Per completion, its prompt's :func:`~rubric_reward.items.prompt_key` ("" for none): which
        completions answer the same prompt, for the metrics and the length penalty."""
        if self._keys is None:
            memo: dict[int, str] = {}  # one key per prompt object (a trainer may repeat one object)
            keys = []
            for p in self.prompts:
                key = memo.get(id(p))
                if key is None:
                    key = memo[id(p)] = prompt_key(p) or ""
                keys.append(key)
            self._keys = keys
        return self._keys


def _has_objects(judge: Any) -> bool:
    """Whether a judge spec holds built objects (a Judge), which are taken as they are."""
    from ..judges.judge import Judge

    if isinstance(judge, list | tuple):
        return any(_has_objects(j) for j in judge)
    return isinstance(judge, Judge)


class RubricReward(SyncFacade):
    """A TRL reward function (sync) scoring completions against rubrics with an LLM judge.

    ``RubricReward(config, **overrides)``: ``config`` is a :class:`RewardConfig`, a mapping of its
    fields, a YAML path (the service's ``reward.yaml`` too) or None; keyword overrides use the same
    names. TRL logs its rewards under ``rewards/<name>/...`` (``name`` defaults to ``"rubric"``) and
    its metrics under ``rubric/...``.
    """

    _loop_name = "rubric-reward"

    def __init__(self, config: RewardConfig | Mapping[str, Any] | str | Path | None = None, **overrides: Any):
        self.config = RewardConfig.coerce(config, **overrides)
        self.__name__ = self.config.name
        self._init_runtime()
        self._validate()
        if str(self.config.scoring_dict().get("abstention", "skip")) == "skip":
            log.warning("rubric reward: abstention 'skip' lets a policy raise its reward by making criteria "
                        "unassessable; 'zero' (the reward default) or 'fail' is safer for RL")

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._engine: Any = None
        self._rubrics: Any = None
        self._tokenizer: Any = None
        self._bound_max_len: int | None = None
        self._eos_ids: frozenset[int] = frozenset()
        self._streak: list[Counter[str]] = []
        self.totals = RunningTotals()
        self.last_metrics: dict[str, float] = {}

    def _validate(self) -> None:
        """Fail at construction, not at the first training step, on a bad judge, rubric or rubric source."""
        cfg = self.config
        if cfg.judge is not None and not _has_objects(cfg.judge):
            cfg.judge_configs()  # validates every field; builds no client
        default = self.source.default
        if default is not None:
            from ..scorer import NoJudgeError, require_judge

            try:
                require_judge(default, cfg.judge is not None)
            except NoJudgeError as exc:
                raise ValueError(f"rubric reward: {exc}") from None

    @classmethod
    def from_config(cls, source: RewardConfig | Mapping[str, Any] | str | Path, **overrides: Any) -> RubricReward:
        """Build from a RewardConfig, a mapping or a YAML file (the picklable factory)."""
        return cls(source, **overrides)

    # ------------------------------------------------------------------ pickling: config only
    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "max_completion_length": self._bound_max_len, "eos_ids": self._eos_ids}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
        self.__name__ = self.config.name
        self._init_runtime()
        self._bound_max_len = state.get("max_completion_length")
        self._eos_ids = state.get("eos_ids", frozenset())

    # ------------------------------------------------------------------ trainer settings
    def bind(self, trainer_or_args: Any) -> RubricReward:
        """Take settings from a trainer (or its args): ``max_completion_length`` for the truncation guard,
        and, from a trainer, its end-of-sequence ids (a completion that ends on one at the limit finished)."""
        args = getattr(trainer_or_args, "args", trainer_or_args)
        value = getattr(args, "max_completion_length", None)
        if value is not None:
            self._bound_max_len = int(value)
        eos = getattr(trainer_or_args, "eos_token_ids", None)
        if eos:
            self._eos_ids = frozenset(int(x) for x in eos)
        return self

    @property
    def max_completion_length(self) -> int | None:
        return self.config.guards.max_completion_length or self._bound_max_len

    def _check_setup(self) -> None:
        """Configuration mistakes stop the run at its first step (they are not judge failures)."""
        if self.config.guards.truncated and self.max_completion_length is None:
            raise ValueError("rubric reward: guards.truncated is on but no max_completion_length is known; set "
                             "guards.max_completion_length, or call reward.bind(trainer) (see docs/rewards.md)")

    # ------------------------------------------------------------------ lazy parts
    @property
    def engine(self) -> Any:
        """The reward core doing the judging (built on first use, in the process that uses it)."""
        with self._lock:
            if self._engine is None:
                from ..rewards.engine import RewardEngine

                self._engine = self._own(RewardEngine(self.config))
            return self._engine

    @property
    def scorer(self) -> Any:
        """The Scorer behind the engine."""
        return self.engine.scorer

    @property
    def source(self) -> Any:
        """The rubric resolver (the engine's once it is built)."""
        if self._engine is not None:
            return self._engine.rubrics
        with self._lock:
            if self._rubrics is None:
                from ..rewards.rubrics import RubricResolver

                cfg = self.config
                self._rubrics = RubricResolver(cfg.rubric, rubric_dir=cfg.rubric_dir, rubrics=cfg.rubrics)
            return self._rubrics

    @property
    def judge_names(self) -> list[str]:
        try:
            return self.engine.judge_names
        except Exception:  # noqa: BLE001 - only used in messages
            return [str(self.config.judge)]

    # ------------------------------------------------------------------ scoring (no logging)
    def score_batch(self, prompts: Sequence[Any] | None, completions: Sequence[Any], **columns: Any) -> list[RewardRecord]:
        """Score one batch synchronously; never raises for judge or data problems (see ``RewardRecord``)."""
        return self._run(self.ascore_batch(prompts, completions, **columns))

    async def ascore_batch(self, prompts: Sequence[Any] | None, completions: Sequence[Any], *,
                           completion_ids: Sequence[Sequence[int]] | None = None, **columns: Any) -> list[RewardRecord]:
        """Score one batch on the running event loop; failures come back as records, never raised."""
        return (await self._ascore(prompts, completions, completion_ids, columns)).records

    async def _ascore(self, prompts: Sequence[Any] | None, completions: Sequence[Any],
                      completion_ids: Sequence[Sequence[int]] | None, columns: Mapping[str, Any]) -> _Batch:
        self._check_setup()
        completions = as_list("completions", completions)
        n = len(completions)
        prompts = [None] * n if prompts is None else aligned("prompts", prompts, n)
        ids = None if completion_ids is None else aligned("completion_ids", completion_ids, n)
        batch = _Batch(prompts)
        try:
            await self._score(batch, completions, ids, columns)
        except (asyncio.CancelledError, BatchShapeError):
            raise
        except Exception as exc:  # a bug here must not stop training
            cause = f"{type(exc).__name__}: {exc}"
            log.error("rubric reward: scoring the batch failed, %d completion(s) unscored: %s", n, cause,
                      exc_info=log.isEnabledFor(logging.DEBUG))
            batch.records = [RewardRecord.failed(cause, "internal") for _ in range(n)]
        return batch

    async def _score(self, batch: _Batch, completions: list[Any], completion_ids: list[Any] | None,
                     columns: Mapping[str, Any]) -> None:
        cfg, engine = self.config, self.engine
        n = len(completions)
        rubrics = engine.rubrics.rows(n, columns, cfg.rubric_column)
        prepared = engine.prepare_batch(batch.prompts, completions, rubrics)
        guards, penalty = cfg.guards, cfg.length_penalty
        max_len = self.max_completion_length
        records: list[RewardRecord | None] = [None] * n
        lengths = [0] * n
        pairs, owners = [], []
        for i, p in enumerate(prepared):
            if isinstance(p, SampleError):
                records[i] = RewardRecord.failed(str(p), p.kind)
                continue
            ids = completion_ids[i] if completion_ids is not None else None
            lengths[i] = self._length(p[1].response, ids, penalty)
            if guards.truncated and ids is not None and len(ids) >= max_len and not (ids and ids[-1] in self._eos_ids):
                records[i] = RewardRecord(guards.min_reward, guard="truncated", rubric=p[0])
                continue
            pairs.append(p)
            owners.append(i)
        keys = batch.prompt_keys
        batch.unique = len({(keys[i], p[1].response, id(p[0])) for i, p in zip(owners, pairs, strict=True)})
        for i, rec in zip(owners, await engine.score(pairs), strict=True):
            records[i] = rec
        judged = [r.score if r.reward is not None and r.guard is None else None for r in records]  # type: ignore[union-attr]
        for i, (rec, cut) in enumerate(zip(records, length_penalties(penalty, lengths, judged, batch.prompt_keys),
                                           strict=True)):
            if cut:
                rec.penalty = cut
                rec.reward = rec.score - cut
            rec.length = lengths[i]
        batch.records = records  # type: ignore[assignment]

    def _length(self, text: str, ids: Sequence[int] | None, penalty: Any) -> int:
        if penalty.enabled and penalty.unit == "tokens":
            if ids is not None:
                return len(ids)
            if penalty.tokenizer:
                if self._tokenizer is None:
                    from transformers import AutoTokenizer

                    self._tokenizer = AutoTokenizer.from_pretrained(penalty.tokenizer)
                return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])
        if ids is not None and not (penalty.enabled and penalty.unit == "words"):
            return len(ids)
        return len(text.split())

    # ------------------------------------------------------------------ the TRL call
    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                 completion_ids: Sequence[Sequence[int]] | None = None, trainer_state: Any = None,
                 log_extra: Callable[[str, list], None] | None = None,
                 log_metric: Callable[[str, float], None] | None = None, **columns: Any) -> list[float | None]:
        return [r.reward for r in self.call_records(prompts, completions, completion_ids, trainer_state, log_extra,
                                                     log_metric, **columns)]

    def call_records(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                     completion_ids: Sequence[Sequence[int]] | None = None, trainer_state: Any = None,
                     log_extra: Callable[[str, list], None] | None = None,
                     log_metric: Callable[[str, float], None] | None = None, **columns: Any) -> list[RewardRecord]:
        """The TRL call (metrics, logging, the unscorable streak) returning each completion's record, not just
        its reward."""
        start = time.perf_counter()
        batch = self._run(self._ascore(prompts, completions, completion_ids, columns))
        return self._finish(batch, start, log_extra, log_metric, trainer_state)

    def _finish(self, batch: _Batch, start: float, log_extra: Callable | None, log_metric: Callable | None,
                trainer_state: Any = None) -> list[RewardRecord]:
        records = batch.records
        try:
            step = getattr(trainer_state, "global_step", None)
            self._report(batch, time.perf_counter() - start, log_extra, log_metric, step)
        except Exception as exc:  # noqa: BLE001 - logging must never stop training
            log.error("rubric reward: could not log metrics: %s: %s", type(exc).__name__, exc)
        self._check_streak(records)
        return records

    def _report(self, batch: _Batch, batch_s: float, log_extra: Callable | None, log_metric: Callable | None,
                step: int | None = None) -> None:
        cfg, records = self.config, batch.records
        unscored = [r for r in records if r.reward is None]
        if unscored:
            causes = Counter((r.error or "unknown").split("\n")[0][:200] for r in unscored)
            top, count = causes.most_common(1)[0]
            where = f" at step {step}" if step is not None else ""
            log.warning("rubric reward%s: %d of %d completion(s) unscored (judge %s); most common cause (%dx): %s",
                        where, len(unscored), len(records), ", ".join(self.judge_names), count, top)
        rubrics = {id(r.rubric): r.rubric for r in records if r.rubric is not None}
        metrics = batch_metrics(
            records, lengths=[r.length for r in records], prompt_keys=batch.prompt_keys,
            fixed_rubric=next(iter(rubrics.values())) if len(rubrics) == 1 else None, totals=self.totals,
            batch_s=batch_s, prefix=cfg.metric_prefix, max_criteria=cfg.max_criteria_metrics, unique=batch.unique,
            scoring=cfg.scoring_config(), reward_field=cfg.reward,
        )
        self.last_metrics = metrics
        if log_metric is not None:
            for name, value in metrics.items():
                log_metric(name, value)
        if log_extra is not None and cfg.log_completions:
            p = cfg.metric_prefix
            log_extra(f"{p}_score", [r.score for r in records])
            log_extra(f"{p}_failed", [
                r.guard and f"guard: {r.guard}" or (f"unscored: {r.error_kinds[0] if r.error_kinds else 'error'}"
                                                    if r.reward is None else ", ".join(failed_criteria(r.result, r.rubric)))
                for r in records
            ])

    def _check_streak(self, records: list[RewardRecord]) -> None:
        cfg = self.config
        if not cfg.max_unscorable_steps or not records:
            return
        bad = [r for r in records if r.reward is None]
        if len(bad) / len(records) < cfg.max_unscorable_fraction - 1e-9:
            self._streak.clear()
            return
        kinds: Counter[str] = Counter()
        for r in bad:
            kinds.update(r.error_kinds or ("unknown",))
        kinds["__completions__"] += len(bad)
        self._streak.append(kinds)
        if len(self._streak) >= cfg.max_unscorable_steps:
            total: Counter[str] = Counter()
            for k in self._streak:
                total.update(k)
            steps = len(self._streak)
            self._streak.clear()
            completions = total.pop("__completions__")
            detail = ", ".join(f"{k} x{v}" for k, v in total.most_common())
            raise UnscorableBatchesError(
                f"rubric reward: {steps} consecutive batches had at least {cfg.max_unscorable_fraction:.0%} of "
                f"their completions unscorable (judge {', '.join(self.judge_names)}): {completions} completions "
                f"unscored, errors by kind: {detail}. "
                "Check the judge endpoint and key, or raise max_unscorable_steps / max_unscorable_fraction."
            )

    # ------------------------------------------------------------------ other forms
    def as_async(self) -> AsyncRubricReward:
        """An ``async`` callable with the same signature, for TRL's concurrent async reward path."""
        return AsyncRubricReward(self)

    def close(self) -> None:
        """Close the judges (each connection on the loop it lives on) and the loop thread; the reward is
        rebuilt on its next call. Garbage collection and interpreter exit close it too."""
        with self._lock:
            self._engine = None
        super().close()

    def __repr__(self) -> str:
        return f"RubricReward(judge={self.config.judge!r}, reward={self.config.reward!r})"


class AsyncRubricReward:
    """The async form of a :class:`RubricReward` (shares its judges, metrics and streak)."""

    def __init__(self, reward: RubricReward):
        self.reward = reward
        self.__name__ = reward.__name__

    @property
    def config(self) -> RewardConfig:
        return self.reward.config

    async def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                       completion_ids: Sequence[Sequence[int]] | None = None, trainer_state: Any = None,
                       log_extra: Callable[[str, list], None] | None = None,
                       log_metric: Callable[[str, float], None] | None = None, **columns: Any) -> list[float | None]:
        start = time.perf_counter()
        batch = await self.reward._ascore(prompts, completions, completion_ids, columns)
        return [r.reward for r in self.reward._finish(batch, start, log_extra, log_metric, trainer_state)]

    def __getstate__(self) -> dict[str, Any]:
        return {"reward": self.reward}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["reward"])

    def close(self) -> None:
        self.reward.close()


_SHARED: dict[tuple[int, str], RubricReward] = {}
_SHARED_LOCK = threading.Lock()


def rubric_rewards(prompts: Sequence[Any] | None, completions: Sequence[Any], rubrics: Sequence[Any] | Any = None, *,
                   config: RubricReward | RewardConfig | Mapping[str, Any] | str | Path | None = None,
                   **overrides: Any) -> list[float | None]:
    """Rewards for any trainer: one per completion, ``None`` where unscorable.

    ``rubrics`` is one rubric per completion (anything a rubric column holds), or None for the config's
    default ``rubric``. Same guarantees as :class:`RubricReward` (deadline, dedupe, guards, the
    unscorable-streak error). The reward object behind a config is built once per process and reused
    by later calls with the same config (its judges keep their connections); pass a
    :class:`RubricReward` as ``config`` to manage it yourself.
    """
    import os

    if isinstance(config, RubricReward) and not overrides:
        reward = config
    else:
        cfg = RewardConfig.coerce(config.config if isinstance(config, RubricReward) else config, **overrides)
        key = (os.getpid(), repr(cfg))
        with _SHARED_LOCK:
            reward = _SHARED.get(key)
            if reward is None:
                if not _SHARED:
                    import atexit

                    atexit.register(_close_shared)
                if len(_SHARED) >= 8:
                    _SHARED.pop(next(iter(_SHARED))).close()
                reward = _SHARED[key] = RubricReward(cfg)
    column = reward.config.rubric_column or "rubric"
    columns = {} if rubrics is None else {column: list(rubrics)}
    return reward(prompts, completions, **columns)


def _close_shared() -> None:
    while _SHARED:
        _SHARED.popitem()[1].close()
