"""The public facade: ``Scorer(rubric, judge).score(prompt, response)``.

Async methods (``ascore``, ``ascore_batch``, ``ascore_pairs``) are the core; the sync methods run
them on a private event-loop thread (:class:`~rubric_reward.util.loop.SyncFacade`) so pooled
connections live across calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .arithmetic import ScoringConfig
from .grading.grader import Grader, GradingConfig
from .items import Item
from .judges.judge import as_judges
from .results import ScoreResult
from .rubric import Rubric, load_rubric
from .util.loop import SyncFacade

__all__ = ["NoJudgeError", "Scorer", "require_judge"]

RubricLike = Rubric | str | Path | Mapping | Sequence


class NoJudgeError(ValueError):
    """A rubric with judged criteria, and no judge to judge them."""


def require_judge(rubric: Rubric, has_judge: bool) -> Rubric:
    """``rubric``, if it can be graded with (``has_judge``) or without a judge: the one rule, on every path
    (Scorer, the reward engine and service, RubricReward), that a rubric with judged criteria needs a judge
    (one made only of programmatic checks needs none). :class:`NoJudgeError` otherwise; each path adds only
    where it was said (``Scorer:``, the field, ``rubric reward:``)."""
    if rubric.judged and not has_judge:
        raise NoJudgeError(f"rubric {rubric.name!r} has judged criteria, so a judge is needed, but the config has "
                           "no 'judge' (judge=...)")
    return rubric


class Scorer(SyncFacade):
    """Score responses against a rubric with one judge or an ensemble.

    ``judge`` is a model string (litellm form, e.g. ``"openai/gpt-4.1-mini"``, or any model name
    with ``base_url`` for an OpenAI-compatible server), a :class:`JudgeConfig`, a judge YAML file,
    or a list of those (an ensemble). Only rubrics made entirely of programmatic checks need no judge.
    """

    def __init__(
        self,
        rubric: RubricLike | None = None,
        judge: Any = None,
        *,
        base_url: str | None = None,
        scoring: ScoringConfig | Mapping[str, Any] | None = None,
        grading: GradingConfig | Mapping[str, Any] | None = None,
        exemplars: Any = None,
    ):
        self.rubric = load_rubric(rubric) if rubric is not None else None
        judges = as_judges(judge, base_url=base_url) if judge is not None else []
        scoring = ScoringConfig(**scoring) if isinstance(scoring, Mapping) else scoring or ScoringConfig()
        grading = GradingConfig(**grading) if isinstance(grading, Mapping) else grading or GradingConfig()
        self.grader = Grader(judges, scoring=scoring, config=grading, exemplars=exemplars)
        if self.rubric is not None:
            self.check_rubric(self.rubric)

    @property
    def has_judge(self) -> bool:
        """Whether a judge is configured (rubrics made only of programmatic checks need none)."""
        return bool(self.grader.judges)

    @property
    def judge_names(self) -> list[str]:
        return [j.name for j in self.grader.judges]

    def check_rubric(self, rubric: Rubric) -> Rubric:
        """``rubric``, if this scorer can grade it (:func:`require_judge`: a ValueError naming the scorer when
        it has judged criteria and there is no judge)."""
        try:
            return require_judge(rubric, self.has_judge)
        except NoJudgeError as exc:
            raise NoJudgeError(f"Scorer: {exc}") from None

    def calls_per_item(self, rubric: Rubric) -> int:
        """Judge calls one item of ``rubric`` takes (0 for programmatic checks only): for progress bars."""
        return self.grader.calls_per_item(rubric)

    def _rubric(self, rubric: RubricLike | None) -> Rubric:
        if rubric is None and self.rubric is None:
            raise ValueError("Scorer: no rubric given here or at construction")
        return self.check_rubric(load_rubric(rubric) if rubric is not None else self.rubric)

    # ------------------------------------------------------------------ async core
    async def ascore(self, prompt: Any, response: Any, *, rubric: RubricLike | None = None,
                     id: str | None = None) -> ScoreResult:
        return await self.grader.grade(self._rubric(rubric), Item(response=response, prompt=prompt, id=id))

    async def ascore_batch(self, items: Iterable[Mapping[str, Any] | Item | tuple], *,
                           deadline_s: float | None = None, on_result: Any = None,
                           on_call: Any = None) -> list[ScoreResult]:
        """Score many items concurrently. Each is an Item, a (prompt, response[, rubric]) tuple, or a
        mapping with ``response`` and optional ``prompt``, ``rubric``, ``id`` and ``group``. ``on_result(i, result)``
        and ``on_call(call_record)`` report progress per item and per judge call."""
        return await self.ascore_pairs([self._pair(x) for x in items], deadline_s=deadline_s, on_result=on_result,
                                       on_call=on_call)

    async def ascore_pairs(self, pairs: Sequence[tuple[Rubric, Item]], *, deadline_s: float | None = None,
                           on_result: Any = None, on_call: Any = None) -> list[ScoreResult]:
        """Score prepared (rubric, item) pairs concurrently, in order, each rubric its own; identical pairs
        are judged once. Judge calls unfinished at ``deadline_s`` end as DEADLINE failures (never a hang)."""
        return await self.grader.grade_many(pairs, deadline_s=deadline_s, on_result=on_result, on_call=on_call)

    def _pair(self, x: Any) -> tuple[Rubric, Item]:
        if isinstance(x, Item):
            return self._rubric(None), x
        if isinstance(x, tuple):
            prompt, response, *rest = x
            return self._rubric(rest[0] if rest else None), Item(response=response, prompt=prompt)
        if isinstance(x, Mapping):
            if "response" not in x:
                raise ValueError(f"item is missing field 'response': {dict(x)!r:.120}")
            return self._rubric(x.get("rubric")), Item(
                response=x["response"], prompt=x.get("prompt"), id=None if x.get("id") is None else str(x["id"]),
                group=None if x.get("group") is None else str(x["group"]),
            )
        raise TypeError(f"cannot score a {type(x).__name__}; pass an Item, a tuple or a mapping")

    async def aclose(self) -> None:
        await self.grader.aclose()

    # ------------------------------------------------------------------ sync facade
    def score(self, prompt: Any, response: Any, *, rubric: RubricLike | None = None) -> ScoreResult:
        self._own_grader()
        return self._run(self.ascore(prompt, response, rubric=rubric))

    def score_batch(self, items: Iterable[Any], *, deadline_s: float | None = None) -> list[ScoreResult]:
        self._own_grader()
        return self._run(self.ascore_batch(items, deadline_s=deadline_s))

    def score_pairs(self, pairs: Sequence[tuple[Rubric, Item]], *,
                    deadline_s: float | None = None) -> list[ScoreResult]:
        self._own_grader()
        return self._run(self.ascore_pairs(pairs, deadline_s=deadline_s))

    def _own_grader(self) -> None:
        life = self._life
        if life is None or self.grader not in life.resources:
            self._own(self.grader)

