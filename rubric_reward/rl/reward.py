"""RubricReward: rubric scores as a reward function for TRL (GRPO, RLOO) and any other trainer.

One call judges a whole generation batch concurrently within the judges' limits. Identical
(prompt, completion, rubric) triples are judged once. Nothing in here stops or hangs training:
a per-batch deadline turns stragglers into failures, every exception becomes ``None`` rewards plus
one log line naming the cause, and only a run of mostly unscorable batches raises, with an error
that says which judge failed how. Guards (degenerate, truncated) give the minimum reward without a
judge call; an optional length penalty is subtracted after scoring and recorded separately.

The object pickles as its config: judges, connections and the loop thread are rebuilt lazily in the
process that unpickles it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results import ScoreResult
from .config import RewardConfig
from .metrics import RunningTotals, batch_metrics, failed_criteria

__all__ = ["AsyncRubricReward", "RewardRecord", "RubricReward", "UnscorableBatchesError", "rubric_rewards"]

log = logging.getLogger("rubric_reward.rl")


class UnscorableBatchesError(RuntimeError):
    """Too many consecutive batches were (mostly) unscorable: training on nothing is worse than stopping."""


@dataclass
class RewardRecord:
    """What one completion got: the reward (None = unscored), and why.

    ``score`` is the judged score before any length penalty; ``penalty`` what was subtracted;
    ``guard`` names the guard that decided the reward without a judge (``degenerate``, ``truncated``);
    ``error`` says why a completion is unscored.
    """

    reward: float | None
    result: ScoreResult | None = None
    guard: str | None = None
    error: str | None = None
    score: float | None = None
    penalty: float = 0.0
    length: int = 0
    rubric: Any = field(default=None, repr=False)
    error_kinds: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (the result in full; the rubric by name)."""
        return {
            "reward": self.reward, "score": self.score, "penalty": self.penalty, "length": self.length,
            "guard": self.guard, "error": self.error, "error_kinds": list(self.error_kinds),
            "rubric": getattr(self.rubric, "name", None),
            "failed": failed_criteria(self.result, self.rubric) if self.reward is not None and not self.guard else [],
            "result": self.result.to_dict() if self.result is not None else None,
        }


def _prompt_key(prompt: Any) -> str:
    if prompt is None or isinstance(prompt, str):
        return prompt or ""
    try:
        return json.dumps(prompt, sort_keys=True, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(prompt)


def _with_base_url(spec: Any, base_url: str | None) -> Any:
    """``base_url`` applies to judge mappings that name none (as it does to model strings)."""
    if base_url is None:
        return spec
    if isinstance(spec, Mapping) and "base_url" not in spec and "judges" not in spec:
        return {**spec, "base_url": base_url}
    if isinstance(spec, list | tuple):
        return [_with_base_url(s, base_url) for s in spec]
    return spec


class RubricReward:
    """A TRL reward function (sync) scoring completions against rubrics with an LLM judge.

    ``RubricReward(config, **overrides)``: ``config`` is a :class:`RewardConfig`, a mapping of its
    fields, a YAML path or None; keyword overrides use the same names. TRL logs its rewards under
    ``rewards/<name>/...`` (``name`` defaults to ``"rubric"``) and its metrics under ``rubric/...``.
    """

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
        self._scorer: Any = None
        self._source: Any = None
        self._loop: Any = None
        self._tokenizer: Any = None
        self._bound_max_len: int | None = None
        self._eos_ids: frozenset[int] = frozenset()
        self._streak: list[Counter[str]] = []
        self.totals = RunningTotals()
        self.last_metrics: dict[str, float] = {}

    def _validate(self) -> None:
        """Fail at construction, not at the first training step, on a bad judge or fixed rubric."""
        cfg = self.config
        if cfg.judge is not None and not isinstance(cfg.judge, str):
            from ..judges.config import JudgeConfig, load_judges

            if not isinstance(cfg.judge, JudgeConfig):
                load_judges(_with_base_url(cfg.judge, cfg.base_url))  # validates every field; builds no client
        fixed = self.source.fixed
        if fixed is not None and fixed.judged and cfg.judge is None:
            raise ValueError(f"rubric reward: rubric {fixed.name!r} has judged criteria, so a judge is needed (judge=...)")

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
    def scorer(self) -> Any:
        """The Scorer doing the judging (built on first use, in the process that uses it)."""
        with self._lock:
            if self._scorer is None:
                from ..judges.judge import as_judges
                from ..scorer import Scorer

                cfg = self.config
                cache = None
                if cfg.cache:
                    from ..judges.cache import SQLiteCache

                    cache = SQLiteCache(cfg.cache)
                judges = as_judges(_with_base_url(cfg.judge, cfg.base_url), base_url=cfg.base_url, cache=cache) \
                    if cfg.judge is not None else None
                self._scorer = Scorer(None, judges or None, scoring=cfg.scoring_dict(), grading=cfg.grading_dict())
            return self._scorer

    @property
    def source(self) -> Any:
        with self._lock:
            if self._source is None:
                from .rubrics import RubricSource

                cfg = self.config
                self._source = RubricSource(cfg.rubric, column=cfg.rubric_column, rubric_dir=cfg.rubric_dir,
                                            rubrics=cfg.rubrics)
            return self._source

    @property
    def judge_names(self) -> list[str]:
        try:
            return [j.name for j in self.scorer.grader.judges]
        except Exception:  # noqa: BLE001 - only used in messages
            return [str(self.config.judge)]

    def _runner(self) -> Any:
        with self._lock:
            if self._loop is None:
                from .._loop import LoopThread

                self._loop = LoopThread("rubric-reward")
            return self._loop

    # ------------------------------------------------------------------ scoring (no logging)
    def score_batch(self, prompts: Sequence[Any] | None, completions: Sequence[Any], **columns: Any) -> list[RewardRecord]:
        """Score one batch synchronously; never raises for judge or data problems (see ``RewardRecord``)."""
        return self._runner().run(self.ascore_batch(prompts, completions, **columns))

    async def ascore_batch(self, prompts: Sequence[Any] | None, completions: Sequence[Any], *,
                           completion_ids: Sequence[Sequence[int]] | None = None, **columns: Any) -> list[RewardRecord]:
        """Score one batch on the running event loop; failures come back as records, never raised."""
        n = len(completions)
        self._check_setup()
        try:
            return await self._score(prompts, completions, completion_ids, columns)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug here must not stop training
            cause = f"{type(exc).__name__}: {exc}"
            log.error("rubric reward: scoring the batch failed, %d completion(s) unscored: %s", n, cause,
                      exc_info=log.isEnabledFor(logging.DEBUG))
            return [RewardRecord(None, error=f"internal: {cause}", error_kinds=("internal",)) for _ in range(n)]

    async def _score(self, prompts: Sequence[Any] | None, completions: Sequence[Any],
                     completion_ids: Sequence[Sequence[int]] | None, columns: Mapping[str, Any]) -> list[RewardRecord]:
        from ..items import Item, response_text
        from ..rollouts import strip_think

        cfg = self.config
        n = len(completions)
        prompts = list(prompts) if prompts is not None else [None] * n
        if len(prompts) != n:
            raise ValueError(f"{len(prompts)} prompts for {n} completions")
        if completion_ids is not None and len(completion_ids) != n:
            completion_ids = None
        rubrics = self.source.rows(n, columns)
        guards, penalty_cfg = cfg.guards, cfg.length_penalty
        max_len = self.max_completion_length

        records: list[RewardRecord | None] = [None] * n
        unique: dict[tuple[str, str, int], int] = {}
        pairs: list[tuple[Any, Any]] = []
        owner: list[int] = [-1] * n  # index into pairs
        for i in range(n):
            rubric = rubrics[i]
            if isinstance(rubric, Exception):
                records[i] = RewardRecord(None, error=f"rubric: {rubric}", error_kinds=("rubric",))
                continue
            try:
                text = response_text(completions[i])
                if cfg.strip_think:
                    text = strip_think(text)
                item = Item(response=text, prompt=prompts[i])
            except (TypeError, ValueError) as exc:
                records[i] = RewardRecord(None, error=f"data: row {i}: {exc}", error_kinds=("data",), rubric=rubric)
                continue
            ids = completion_ids[i] if completion_ids is not None else None
            length = self._length(text, ids, penalty_cfg)
            if guards.truncated and ids is not None and len(ids) >= max_len and not (ids and ids[-1] in self._eos_ids):
                records[i] = RewardRecord(guards.min_reward, guard="truncated", score=None, length=length,
                                          rubric=rubric)
                continue
            key = (_prompt_key(prompts[i]), text, id(rubric))  # equal column values resolve to one object
            j = unique.get(key)
            if j is None:
                j = unique[key] = len(pairs)
                pairs.append((rubric, item))
            owner[i] = j
            records[i] = RewardRecord(None, length=length, rubric=rubric)

        results = await self._grade(pairs) if pairs else []
        for i, rec in enumerate(records):
            j = owner[i]
            if j < 0:
                continue
            res = results[j]
            rec.result = res
            if res.metadata.get("screened"):
                rec.guard, rec.score, rec.reward = "degenerate", res.score, guards.min_reward
                continue
            value = getattr(res, cfg.reward) if res.score is not None else None
            if value is None:
                rec.error = res.error or f"no {cfg.reward} on the result"
                rec.error_kinds = tuple(v.error.kind.value for v in res.verdicts if v.error is not None) or ("none",)
                continue
            rec.score = float(value)
            rec.penalty = penalty_cfg(rec.length)
            rec.reward = rec.score - rec.penalty
        return records  # type: ignore[return-value]

    async def _grade(self, pairs: list[tuple[Any, Any]]) -> list[ScoreResult]:
        grader = self.scorer.grader
        for rubric, _ in pairs:
            if rubric.judged and not self.scorer._has_judge:
                raise ValueError(f"rubric {rubric.name!r} has judged criteria but the reward config names no judge")
        deadline = self.config.deadline_s
        coro = grader.grade_many(pairs, deadline_s=deadline)
        if deadline is None:
            return await coro
        # grade_many ends calls at the deadline itself; this is the belt over its braces
        return await asyncio.wait_for(coro, timeout=deadline + max(2.0, 0.25 * deadline))

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
        start = time.perf_counter()
        records = self.score_batch(prompts, completions, completion_ids=completion_ids, **columns)
        return self._finish(records, prompts, start, log_extra, log_metric, trainer_state)

    def _finish(self, records: list[RewardRecord], prompts: Sequence[Any] | None, start: float,
                log_extra: Callable | None, log_metric: Callable | None, trainer_state: Any = None) -> list[float | None]:
        n = len(records)
        try:
            step = getattr(trainer_state, "global_step", None)
            self._report(records, prompts, time.perf_counter() - start, log_extra, log_metric, step)
        except Exception as exc:  # noqa: BLE001 - logging must never stop training
            log.error("rubric reward: could not log metrics: %s: %s", type(exc).__name__, exc)
        self._check_streak(records)
        return [r.reward for r in records][:n]

    def _report(self, records: list[RewardRecord], prompts: Sequence[Any] | None, batch_s: float,
                log_extra: Callable | None, log_metric: Callable | None, step: int | None = None) -> None:
        cfg = self.config
        unscored = [r for r in records if r.reward is None]
        if unscored:
            causes = Counter((r.error or "unknown").split("\n")[0][:200] for r in unscored)
            top, count = causes.most_common(1)[0]
            where = f" at step {step}" if step is not None else ""
            log.warning("rubric reward%s: %d of %d completion(s) unscored (judge %s); most common cause (%dx): %s",
                        where, len(unscored), len(records), ", ".join(self.judge_names), count, top)
        prompt_keys = [_prompt_key(p) for p in prompts] if prompts is not None else [""] * len(records)
        metrics = batch_metrics(
            records, lengths=[r.length for r in records], prompt_keys=prompt_keys,
            fixed_rubric=self.source.fixed, totals=self.totals, batch_s=batch_s,
            prefix=cfg.metric_prefix, max_criteria=cfg.max_criteria_metrics,
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
        with self._lock:
            scorer, loop = self._scorer, self._loop
            self._scorer, self._loop = None, None
        if scorer is not None:
            try:
                if loop is not None:
                    loop.run(scorer.aclose())
                else:
                    asyncio.run(scorer.aclose())
            except Exception as exc:  # noqa: BLE001
                log.debug("closing the judges: %s", exc)
        if loop is not None:
            loop.close()

    def __enter__(self) -> RubricReward:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

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
        records = await self.reward.ascore_batch(prompts, completions, completion_ids=completion_ids, **columns)
        return self.reward._finish(records, prompts, start, log_extra, log_metric, trainer_state)

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

    ``rubrics`` is one rubric per completion (anything a rubric column holds), or None when the config
    sets a fixed rubric. Same guarantees as :class:`RubricReward` (deadline, dedupe, guards, the
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
    columns = {} if rubrics is None else {reward.config.rubric_column: list(rubrics)}
    return reward(prompts, completions, **columns)


def _close_shared() -> None:
    while _SHARED:
        _SHARED.popitem()[1].close()
