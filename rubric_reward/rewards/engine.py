"""The reward core every trainer path goes through: one config made runnable.

:class:`RewardEngine` assembles the judges (the top-level ``base_url`` rule, the reply cache), the
rubric resolver and a :class:`~rubric_reward.Scorer`, and turns samples into
:class:`~rubric_reward.rewards.records.RewardRecord` s::

    engine = RewardEngine("reward.yaml")
    pairs = engine.prepare_batch(prompts, completions, engine.rubrics.resolve_many(labels, lambda i: f"labels[{i}]"))
    records = await engine.score([p for p in pairs if not isinstance(p, SampleError)])

The TRL plugin, ``rubric_rewards()``, the reward service and the OpenRLHF / verl adapters each add
only their own shapes around it, so the same config and the same samples give the same rewards and
the same judge requests on every path (``tests/test_reward_parity.py``). The failure boundary:
``prepare*`` raise or return :class:`~rubric_reward.rewards.samples.SampleError` for one bad sample
(each path decides what that becomes); ``score`` never raises for judge trouble: an unfinished or
failed judgement is an unscored record with its error, never a number.

Extension points: ``score(pairs, deadline_s=...)`` takes a per-request deadline (it may only lower
the config's); pairs are scored in order and identical pairs are judged once, so a caller may group
samples by prompt before handing them over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..util.deadlines import earliest, give_up_at
from ..items import Conversation, Item, as_messages, prompt_key, response_text
from ..rubric import Rubric
from .config import RewardConfig
from .records import RewardRecord, reward_of
from .rubrics import RubricResolver
from .samples import SampleError, aligned
from ..util.think import strip_think

__all__ = ["Pair", "RewardEngine"]

Pair = tuple[Rubric, Item]


class RewardEngine:
    """Judges, rubrics and the reward read for one :class:`RewardConfig`.

    Build it in the process (and preferably on the event loop) that will use it; ``aclose()`` closes
    the judges' connections and the cache.
    """

    def __init__(self, config: RewardConfig | Mapping[str, Any] | str | Path | None = None):
        from ..judges.judge import as_judges
        from ..scorer import Scorer

        self.config = config = self.config_class().coerce(config)
        self.rubrics = RubricResolver(config.rubric, rubric_dir=config.rubric_dir, rubrics=config.rubrics)
        self.cache = None
        if config.cache:
            from ..judges.cache import SQLiteCache

            self.cache = SQLiteCache(config.cache)
        judges = as_judges(config.judge, base_url=config.base_url, cache=self.cache) if config.judge is not None else []
        self.scorer = Scorer(None, judges, scoring=config.scoring_config(), grading=config.grading_config())
        if self.rubrics.default is not None:
            try:
                self.usable(self.rubrics.default, "rubric")
            except SampleError as exc:
                raise ValueError(f"RewardConfig: field 'rubric': {exc.message}") from None

    @classmethod
    def config_class(cls) -> type[RewardConfig]:
        return RewardConfig

    @property
    def has_judge(self) -> bool:
        return self.scorer.has_judge

    @property
    def judge_names(self) -> list[str]:
        return self.scorer.judge_names

    def pool_stats(self) -> list[dict[str, Any]]:
        """Per judge: its cap and its replicas' routing figures (:meth:`~rubric_reward.judges.Judge.pool_stats`)."""
        return [j.pool_stats() for j in self.scorer.grader.judges if hasattr(j, "pool_stats")]

    # ------------------------------------------------------------------ samples
    def usable(self, rubric: Rubric, field: str) -> Rubric:
        """``rubric``, if this config can judge it (a SampleError ``no_judge`` otherwise)."""
        from ..scorer import NoJudgeError, require_judge

        try:
            return require_judge(rubric, self.scorer.has_judge)
        except NoJudgeError as exc:
            raise SampleError(field, str(exc), code="no_judge", kind="rubric") from None

    def rubric(self, label: Any, field: str = "label", *, ids: bool = True) -> Rubric:
        """The usable rubric ``label`` names (empty: the default); SampleError naming ``field``."""
        return self.usable(self.rubrics.resolve(label, field, ids=ids), field)

    def item(self, prompt: Any, completion: Any, *, id: str | None = None, group: str | None = None,
             prompt_field: str = "prompt", completion_field: str = "completion") -> Item:
        """The judgeable item: the completion's text (think blocks removed when ``strip_think``), the
        prompt as text or normalised messages, the group label (which completions a ``mode: group``
        judge judges together; None: the prompt decides). SampleError naming the field for malformed
        input."""
        try:
            text = response_text(completion)
        except ValueError as exc:
            raise SampleError(completion_field, str(exc)) from None
        if self.config.strip_think:
            text = strip_think(text)
        if prompt is not None and not isinstance(prompt, str | Conversation):
            try:
                prompt = Conversation(as_messages(prompt))
            except ValueError as exc:
                raise SampleError(prompt_field, str(exc)) from None
        return Item(response=text, prompt=prompt or None, id=id, group=None if group is None else str(group))

    def prepare(self, prompt: Any, completion: Any, label: Any = None, *, id: str | None = None,
                group: str | None = None, where: str = "") -> Pair:
        """One (rubric, item) from a trainer's prompt, completion, rubric label and group label (verl's
        uid, a service item's ``group``); SampleError naming ``{where}prompt``, ``{where}completion`` or
        ``{where}label``."""
        rubric = self.rubric(label, f"{where}label")
        return rubric, self.item(prompt, completion, id=id, group=group, prompt_field=f"{where}prompt",
                                 completion_field=f"{where}completion")

    def prepare_batch(self, prompts: Sequence[Any], completions: Sequence[Any],
                      rubrics: Sequence[Rubric | SampleError], *, groups: Sequence[Any] | None = None,
                      where: Callable[[int], str] = lambda i: f"row {i}: ") -> list[Pair | SampleError]:
        """A batch's (rubric, item) pairs, or per sample the SampleError saying why it cannot be judged.

        ``rubrics`` come from ``self.rubrics.rows`` / ``resolve_many``; ``groups`` (optional, one label
        or None per sample) say which completions a group judge judges together. Each distinct prompt is
        normalised once and its items share it (trainers repeat a prompt for each of its generations).
        """
        n = len(completions)
        prompts = aligned("prompts", prompts, n)
        rubrics = aligned("rubrics", rubrics, n)
        groups = [None] * n if groups is None else aligned("groups", groups, n)
        seen: dict[str, Conversation] = {}  # normalised conversations, one per distinct prompt (prompt_key)
        out: list[Pair | SampleError] = []
        for i in range(n):
            rubric = rubrics[i]
            if isinstance(rubric, SampleError):
                out.append(rubric)
                continue
            prompt, key = prompts[i], None
            if prompt is not None and not isinstance(prompt, str):
                key = prompt_key(prompt)
                prompt = seen.get(key, prompt)
            try:
                self.usable(rubric, f"{where(i)}rubric")
                item = self.item(prompt, completions[i], group=groups[i], prompt_field=f"{where(i)}prompt",
                                 completion_field=f"{where(i)}completion")
            except SampleError as exc:
                out.append(exc)
                continue
            if key is not None and isinstance(item.prompt, Conversation):
                seen.setdefault(key, item.prompt)
            out.append((rubric, item))
        return out

    # ------------------------------------------------------------------ scoring
    async def score(self, pairs: Sequence[Pair], *, deadline_s: float | None = None) -> list[RewardRecord]:
        """One record per pair, in order. ``deadline_s`` (default: the config's; a request may only lower
        it) turns unfinished judge calls into DEADLINE failures: unscored, never a hang."""
        if not pairs:
            return []
        deadline = earliest(deadline_s, self.config.deadline_s)
        coro = self.scorer.ascore_pairs(pairs, deadline_s=deadline)
        if deadline is None:
            results = await coro
        else:  # grading ends calls at the deadline itself; this is the belt over its braces, one grace later
            results = await asyncio.wait_for(coro, timeout=give_up_at(give_up_at(deadline)))
        return [self.record(result, rubric) for result, (rubric, _) in zip(results, pairs, strict=True)]

    def record(self, result: Any, rubric: Rubric | None = None) -> RewardRecord:
        """A result read as a reward: the configured field (never NaN), ``min_reward`` for a screened response
        (guard ``degenerate``, or ``flagged`` for one flagged before judging), or unscored with the error and its
        kinds. A flagged response of a rubric with programmatic checks is rewarded by its score (judged criteria
        at their worst, checks as computed), still under the ``flagged`` guard."""
        if result.metadata.get("screened"):
            flagged = bool(result.metadata.get("flagged"))
            guard = "flagged" if flagged else "degenerate"
            checks = rubric is not None and len(rubric.judged) < len(rubric.criteria)
            value = reward_of(result, self.config.reward) if flagged and checks else self.config.guards.min_reward
            if value is None:
                kinds = tuple(v.error.kind.value for v in result.verdicts if v.error is not None) or ("none",)
                return RewardRecord(None, result, error=result.error or f"no finite {self.config.reward} on the "
                                    "result", guard=guard, rubric=rubric, error_kinds=kinds, cost=result.cost)
            return RewardRecord(value, result, guard=guard, score=result.score, rubric=rubric, cost=result.cost)
        value = reward_of(result, self.config.reward)
        if value is None:
            kinds = tuple(v.error.kind.value for v in result.verdicts if v.error is not None) or ("none",)
            return RewardRecord(None, result, error=result.error or f"no finite {self.config.reward} on the result",
                                rubric=rubric, error_kinds=kinds, cost=result.cost)
        return RewardRecord(value, result, score=value, rubric=rubric, cost=result.cost)

    async def score_samples(self, samples: Sequence[tuple[Any, Any, Any]], *, deadline_s: float | None = None,
                            where: Callable[[int], str] = lambda i: f"sample {i}: ") -> list[RewardRecord]:
        """(prompt, completion, label) or (prompt, completion, label, group) samples to records; a sample
        that cannot be judged is unscored with its cause (never an exception)."""
        labels = [s[2] for s in samples]
        groups = [s[3] if len(s) > 3 else None for s in samples]
        rubrics = self.rubrics.resolve_many(labels, lambda i: f"{where(i)}label")
        prepared = self.prepare_batch([s[0] for s in samples], [s[1] for s in samples], rubrics, where=where,
                                      groups=groups if any(g is not None for g in groups) else None)
        pairs = [p for p in prepared if not isinstance(p, SampleError)]
        scored = iter(await self.score(pairs, deadline_s=deadline_s))
        return [RewardRecord.failed(str(p), p.kind) if isinstance(p, SampleError) else next(scored) for p in prepared]

    async def aclose(self) -> None:
        await self.scorer.aclose()
        if self.cache is not None:
            self.cache.close()
