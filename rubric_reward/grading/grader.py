"""Grading: rubric + item -> judge calls -> verdicts -> ensemble -> score.

The grader owns the flow for one response: it batches criteria into calls (one per criterion, k per
call, or all at once), renders prompts, runs every judge and sample concurrently, parses strictly
with one re-ask, evaluates programmatic checks locally, aggregates votes and scores the result.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from ..arithmetic import ScoringConfig, score_verdicts
from ..guards.degenerate import screen_response
from ..guards.flag import FLAG_POLICIES, flag_response
from ..items import Item, prompt_key
from ..judges.base import JudgeLike
from ..judges.transport import batch_scope
from ..results import CallRecord, ErrorKind, JudgeError, ScoreResult, Verdict
from ..rubric import Criterion, Rubric
from ..util.deadlines import batch_net, give_up_at
from .calls import run_call
from .criterion_prompt import Exemplar, option_order, read_reply, reask_for, render_call
from .ensemble import BINARY_METHODS, ORDINAL_METHODS, aggregate_votes
from .group import group_units, judge_group

__all__ = ["Grader", "GradingConfig"]

log = logging.getLogger(__name__)

# Responses longer than this are screened and flagged in a worker thread (a 300-word response takes ~0.1-0.3 ms to
# read, a 20k-character one ~1.5 ms, against ~0.1-0.2 ms for the hop to a thread and back); a shorter one inline,
# where it can hold the loop for at most a few milliseconds (tens on the slowest text, benchmarks/guard_speed.py).
_OFF_LOOP_CHARS = 20_000


_GUARD_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _guard_pool() -> ThreadPoolExecutor:
    """The threads that read long responses: two (the reading holds the GIL; more would not read faster), made
    afresh in a forked child, where the parent's threads do not exist."""
    global _GUARD_POOL
    if _GUARD_POOL is None or _GUARD_POOL[0] != os.getpid():
        _GUARD_POOL = (os.getpid(), ThreadPoolExecutor(max_workers=2, thread_name_prefix="rubric-reward-guard"))
    return _GUARD_POOL[1]


# grade_many's on_call hook, inherited by the tasks it starts (so grade()'s signature stays as it is)
_ON_CALL: contextvars.ContextVar[Callable[[CallRecord], Any] | None] = contextvars.ContextVar("on_call", default=None)

ExemplarSource = Mapping[str, Sequence[Exemplar]] | Callable[[Criterion, str], Sequence[Exemplar]]


@dataclass(frozen=True, slots=True)
class GradingConfig:
    """How a response is put to the judges."""

    seed: int = field(default=0, metadata={"help": "seed of the option shuffle and of group layouts"})
    shuffle: bool = field(default=True, metadata={
        "help": "shuffle option order per (seed, response, criterion, judge)"})
    reask: bool = field(default=True, metadata={"help": "one re-ask after an unparseable answer"})
    binary_aggregation: str = field(default="majority", metadata={
        "help": "how an ensemble's or repeated samples' binary verdicts combine"})
    ordinal_aggregation: str = field(default="mean", metadata={
        "help": "how an ensemble's or repeated samples' ordinal values combine"})
    batch_deadline_s: float | None = field(default=None, metadata={
        "help": "grade_many: calls unfinished by then become DEADLINE failures"})
    screen_degenerate: bool = field(default=True, metadata={
        "help": "degenerate responses get the minimum score with no judge call (guards/degenerate.py)"})
    screen_phrases: tuple[str, ...] | None = field(default=None, metadata={
        "help": "bare phrases counted as degenerate (None: guards.degenerate.MASTER_KEYS)"})
    # a response flagged before judging (verdict-shaped text, text to the grader, a forged prompt structure:
    # guards/flag.py) is "screen"ed (minimum score, no judge call), judged "alone" (never in a group call with
    # other responses), or judged alone and marked "suspect" (metadata "suspect"); every policy records
    # metadata "flagged"
    injection: str = field(default="screen", metadata={"choices": FLAG_POLICIES, "help": "a response flagged before "
                           "judging is screened (judged criteria at their worst), judged alone, or judged alone "
                           "and marked suspect (docs/security.md)"})

    def __post_init__(self) -> None:
        if self.binary_aggregation not in BINARY_METHODS:
            raise ValueError(f"GradingConfig.binary_aggregation must be one of {BINARY_METHODS}, "
                             f"got {self.binary_aggregation!r}")
        if self.ordinal_aggregation not in ORDINAL_METHODS:
            raise ValueError(f"GradingConfig.ordinal_aggregation must be one of {ORDINAL_METHODS}, "
                             f"got {self.ordinal_aggregation!r}")
        if self.screen_phrases is not None and not isinstance(self.screen_phrases, tuple):
            object.__setattr__(self, "screen_phrases", tuple(str(p) for p in self.screen_phrases))
        if self.injection not in FLAG_POLICIES:
            raise ValueError(f"GradingConfig.injection must be one of {FLAG_POLICIES}, got {self.injection!r}")
        if self.batch_deadline_s is not None and self.batch_deadline_s <= 0:
            raise ValueError(f"GradingConfig.batch_deadline_s must be positive, got {self.batch_deadline_s}")


class Grader:
    """Grades items against rubrics with one or more judges (a single judge is an ensemble of one)."""

    def __init__(
        self,
        judges: Sequence[JudgeLike],
        *,
        scoring: ScoringConfig = ScoringConfig(),
        config: GradingConfig = GradingConfig(),
        exemplars: ExemplarSource | None = None,
    ):
        self.judges = list(judges)  # none: only rubrics of programmatic checks can be graded (Scorer.check_rubric)
        self.scoring = scoring
        self.config = config
        self.exemplars = exemplars

    # ------------------------------------------------------------------ one item, one group
    async def grade(self, rubric: Rubric, item: Item) -> ScoreResult:
        """Grade one item; failures come back as data, never as exceptions."""
        return (await self.grade_group(rubric, [item]))[0]

    async def grade_group(self, rubric: Rubric, items: Sequence[Item]) -> list[ScoreResult]:
        """Grade the items of one group (one prompt's responses, for ``mode: group`` judges, which judge
        them together; other judges judge each on its own), in order; failures come back as data."""
        results: list[ScoreResult | None] = [None] * len(items)
        flags: dict[int, str] = {}
        if rubric.judged:
            # a long response is read in a worker thread, so the loop's other calls and timers run meanwhile (the
            # reading is linear and bounded, guards.confusables.SCAN_CHARS); a short one inline, where a thread hop
            # would cost as much as the reading
            loop = asyncio.get_running_loop()
            off = {i: loop.run_in_executor(_guard_pool(), self._guard, rubric, item) for i, item in enumerate(items)
                   if len(item.response) > _OFF_LOOP_CHARS}
            guarded = [None if i in off else self._guard(rubric, item) for i, item in enumerate(items)]
            for i, future in off.items():
                guarded[i] = await future
            for i, (item, (reason, why)) in enumerate(zip(items, guarded, strict=True)):
                if reason is not None:
                    results[i] = _screened(rubric, item, reason)
                elif why is not None:
                    flags[i] = why
                    if self.config.injection == "screen":
                        results[i] = _screened(rubric, item, why, flagged=True, scoring=self.scoring)
        todo = [i for i, r in enumerate(results) if r is None]
        # a flagged response is judged alone: never in a group call beside other responses
        batches = [[i for i in todo if i not in flags]] + [[i] for i in todo if i in flags]
        batches = [b for b in batches if b]
        try:
            outs = await asyncio.gather(*(self._grade([items[i] for i in b], rubric) for b in batches))
            by_index = {i: r for b, out in zip(batches, outs, strict=True) for i, r in zip(b, out, strict=True)}
            graded = [by_index[i] for i in todo]
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not stop a training run; it is reported on the result
            log.exception("grading failed")  # the details stay in the log, never in a result
            err = JudgeError(ErrorKind.INTERNAL, f"internal error ({type(exc).__name__}); details in the log")
            verdicts = tuple(Verdict(c.name, None, None, error=err) for c in rubric.criteria)
            graded = [ScoreResult(None, verdicts, error=str(err), metadata=_meta(items[i])) for i in todo]
        for i, result in zip(todo, graded, strict=True):
            if i in flags:
                mark = {"flagged": flags[i]}
                if self.config.injection == "suspect":
                    mark["suspect"] = True
                result = replace(result, metadata={**result.metadata, **mark})
            results[i] = result
        return results  # type: ignore[return-value]

    def _guard(self, rubric: Rubric, item: Item) -> tuple[str | None, str | None]:
        """What the guards read of ``item`` before any judge: (degenerate reason, flag), the screen first."""
        if self.config.screen_degenerate:
            reason = screen_response(item.response, item.prompt, rubric=rubric, phrases=self.config.screen_phrases)
            if reason is not None:
                return reason, None
        return None, flag_response(item.response, rubric)

    async def _grade(self, items: Sequence[Item], rubric: Rubric) -> list[ScoreResult]:
        judged = rubric.judged
        jobs = []  # (judge index, item index or None for a group judge's votes on every item, coroutine)
        for ji, judge in enumerate(self.judges):
            if judge.config.group_mode and judged:
                jobs.append((ji, None, judge_group(
                    judge, rubric, items, seed=self.config.seed, shuffle=self.config.shuffle,
                    reask=self.config.reask, exemplars=self._exemplars_for, on_call=_ON_CALL.get())))
                continue
            k = judge.config.criteria_per_call(len(judged))
            for ii, item in enumerate(items):
                for sample in range(judge.config.samples):
                    for start in range(0, len(judged), k):
                        chunk = judged[start : start + k]
                        jobs.append((ji, ii, self._render_and_run(judge, rubric, item, chunk, sample)))
        outcomes = await asyncio.gather(*(coro for _, _, coro in jobs))

        votes: list[dict[str, list[tuple[int, Verdict]]]] = [{c.name: [] for c in judged} for _ in items]
        calls: list[list[CallRecord]] = [[] for _ in items]
        for (ji, ii, _), outcome in zip(jobs, outcomes, strict=True):
            targets = enumerate(outcome) if ii is None else [(ii, (outcome[0], [outcome[1]]))]
            for target, (verdicts, records) in targets:
                calls[target].extend(records)
                for v in verdicts:
                    votes[target][v.criterion].append((ji, v))
        return [self._score(rubric, item, votes[i], calls[i]) for i, item in enumerate(items)]

    def _score(self, rubric: Rubric, item: Item, votes: Mapping[str, list[tuple[int, Verdict]]],
               calls: Sequence[CallRecord]) -> ScoreResult:
        final: dict[str, Verdict] = {}
        for c in rubric.criteria:
            if not c.is_judged:
                final[c.name] = _check_verdict(c, item)
                continue
            cast = votes[c.name]
            final[c.name] = aggregate_votes(
                c, [v for _, v in cast], binary=self.config.binary_aggregation,
                ordinal=self.config.ordinal_aggregation,
                weights=[self.judges[ji].config.weight for ji, _ in cast],
            )
        result = score_verdicts(rubric, final, self.scoring)
        return replace(result, calls=tuple(calls), metadata=_meta(item))

    def _exemplars_for(self, criteria: Sequence[Criterion], judge: str) -> dict[str, Sequence[Exemplar]] | None:
        if self.exemplars is None:
            return None
        if callable(self.exemplars):
            return {c.name: self.exemplars(c, judge) for c in criteria}
        return {c.name: self.exemplars.get(c.name, ()) for c in criteria}

    async def _render_and_run(self, judge: JudgeLike, rubric: Rubric, item: Item, chunk: Sequence[Criterion],
                              sample: int) -> tuple[list[Verdict], CallRecord]:
        # rendered in the call's own task, so a batch's first requests go out before its last are rendered
        call = render_call(
            rubric, item, chunk, judge=judge.name, seed=self._render_seed(sample),
            shuffle=self.config.shuffle, exemplars=self._exemplars_for(chunk, judge.name),
        )
        outcome = await run_call(judge, call, sample=sample, read=partial(read_reply, call),
                                 reask=partial(reask_for, call) if self.config.reask else None, on_call=_ON_CALL.get())
        if outcome.error is not None:
            return [Verdict(c.name, None, None, error=outcome.error, judge=judge.name) for c in chunk], outcome.record
        reply, reading = outcome.readings[-1]
        verdicts = [
            Verdict(p.criterion, p.label, p.value, reason=p.reason, abstained=p.abstained, judge=judge.name)
            for p in reading.verdicts
        ]
        if reply.logprobs is not None:
            from .logprobs import attach_probabilities

            verdicts = attach_probabilities(call, reply, verdicts)
        return verdicts, outcome.record

    def _render_seed(self, sample: int) -> int:
        return self.config.seed + sample

    def shown_order(self, criterion: Criterion, item: Item, judge: str, sample: int = 0) -> tuple[str, ...]:
        """The order in which sample ``sample`` of judge ``judge`` is shown ``criterion``'s labels for ``item`` in a
        per-criterion, per-item or k-criteria call (the judge card reads position bias from it)."""
        return option_order(criterion, seed=self._render_seed(sample), response=item.response, judge=judge,
                            shuffle=self.config.shuffle)

    # ------------------------------------------------------------------ many items
    async def grade_many(
        self,
        pairs: Sequence[tuple[Rubric, Item]],
        *,
        on_result: Callable[[int, ScoreResult], Any] | None = None,
        deadline_s: float | None = None,
        on_call: Callable[[CallRecord], Any] | None = None,
    ) -> list[ScoreResult]:
        """Grade many (rubric, item) pairs concurrently, in input order. ``on_result(i, result)`` is
        called as each item finishes, ``on_call(record)`` as each judge call finishes (progress).

        With a deadline (argument, ``GradingConfig.batch_deadline_s``, or a judge's own
        ``batch_deadline_s``), judge calls still unfinished when it passes end as DEADLINE failures
        of their verdicts (finished verdicts are kept): a straggler never hangs the caller, and never
        turns into a number. Items that still have not finished shortly after are cancelled and
        returned unscored with DEADLINE errors.
        """
        deadline_s = deadline_s if deadline_s is not None else self.config.batch_deadline_s
        net = batch_net(deadline_s, [j.config.batch_deadline_s for j in self.judges])  # every call cut by then

        # Identical (rubric, item) pairs anywhere in the batch are graded once; the copies get the
        # result with their own metadata and calls marked free (cached, cost 0), as in-flight dedupe does.
        keys = _pair_keys(pairs)
        first = _first_copies(pairs, keys)
        unique = [i for i, f in enumerate(first) if f == i]
        copies: dict[int, list[int]] = {}
        for i, f in enumerate(first):
            if f != i:
                copies.setdefault(f, []).append(i)

        # Scheduling units: one item each, or, with a group judge, one group each (graded together).
        grouped = any(j.config.group_mode for j in self.judges)
        units = group_units(pairs, keys, unique) if grouped else [[i] for i in unique]
        # Admission window, in units: only enough to keep every judge slot busy (twice over) are
        # rendered and queued at a time, so a large batch's first answers are not stuck behind the rest.
        window = self._item_window([pairs[i] for i in unique])
        gate = asyncio.Semaphore(max(2, math.ceil(window * len(units) / max(1, len(unique)))))

        async def one(unit: list[int]) -> list[ScoreResult]:
            async with gate:
                results = await self.grade_group(pairs[unit[0]][0], [pairs[i][1] for i in unit])
            if on_result is not None:
                for i, result in zip(unit, results, strict=True):
                    on_result(i, result)
                    for j in copies.get(i, ()):
                        on_result(j, _copy_of(result, pairs[j][1]))
            return results

        hook = _ON_CALL.set(on_call)
        with batch_scope(deadline_s):  # tasks inherit the scope: the transport cuts calls at the deadline
            tasks = [asyncio.ensure_future(one(unit)) for unit in units]
        _ON_CALL.reset(hook)
        if not tasks:
            return []
        where = {i: (task, pos) for task, unit in zip(tasks, units, strict=True) for pos, i in enumerate(unit)}
        # safety net: calls end at the deadline; an item still running a grace after it is cancelled
        done, pending = await asyncio.wait(tasks, timeout=give_up_at(net))
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        results = []
        for i, (rubric, item) in enumerate(pairs):
            task, pos = where[first[i]]
            if task in done:
                result = task.result()[pos]
                results.append(result if first[i] == i else _copy_of(result, item))
            else:
                err = JudgeError(ErrorKind.DEADLINE, f"not judged within the batch deadline of {net}s")
                results.append(ScoreResult(
                    None, tuple(Verdict(c.name, None, None, error=err) for c in rubric.criteria),
                    error=str(err), metadata=_meta(item),
                ))
        return results

    def _item_window(self, pairs: Sequence[tuple[Rubric, Item]]) -> int:
        """How many items to grade at once: twice the judges' concurrency, in items."""
        limiters, slots = set(), 0
        for judge in self.judges:
            if id(judge.limiter) not in limiters:  # judges of one endpoint share its slots
                limiters.add(id(judge.limiter))
                slots += judge.limiter.slots.capacity
        sample = pairs[: min(len(pairs), 32)]
        calls = sum(self.calls_per_item(rubric) for rubric, _ in sample)
        per_item = max(1.0, calls / max(1, len(sample)))
        return max(2, math.ceil(2 * slots / per_item))

    def calls_per_item(self, rubric: Rubric) -> float:
        """Judge calls one item of ``rubric`` takes (every judge, sample and criterion batch); a group
        judge's calls count as shared by ``group_size`` items."""
        n = len(rubric.judged)
        if not n:
            return 0
        total = 0.0
        for j in self.judges:
            calls = j.config.samples * -(-n // j.config.criteria_per_call(n))
            if j.config.group_mode:
                calls = calls * j.config.group_passes / j.config.group_size
            total += calls
        return total if total != int(total) else int(total)

    async def aclose(self) -> None:
        for judge in self.judges:
            await judge.aclose()


def _pair_keys(pairs: Sequence[tuple[Rubric, Item]]) -> list[tuple[str, Any]]:
    """For each pair, its (rubric content, :func:`~rubric_reward.items.prompt_key`) key: what identical pairs and
    one group share."""
    fingerprints: dict[int, str] = {}
    prompts: dict[int, str | None] = {}  # a conversation is keyed once per object (a prompt's generations share it)
    out = []
    for rubric, item in pairs:
        fp = fingerprints.get(id(rubric))
        if fp is None:
            fp = fingerprints[id(rubric)] = rubric.fingerprint()
        prompt = item.prompt
        if prompt is not None and not isinstance(prompt, str):
            if id(prompt) not in prompts:
                prompts[id(prompt)] = prompt_key(prompt)
            prompt = prompts[id(prompt)]
        out.append((fp, prompt))
    return out


def _first_copies(pairs: Sequence[tuple[Rubric, Item]], keys: Sequence[tuple[str, Any]]) -> list[int]:
    """For each pair, the index of the first identical pair (same rubric content, prompt and response)."""
    seen: dict[tuple, int] = {}
    return [seen.setdefault((*key, item.response), i) for i, (key, (_, item)) in enumerate(zip(keys, pairs, strict=True))]


def _copy_of(result: ScoreResult, item: Item) -> ScoreResult:
    """``result`` for an identical copy of its item: its own metadata, calls that cost nothing new."""
    calls = tuple(replace(c, cost=0.0, attempts=0, cached=True) for c in result.calls)
    return replace(result, calls=calls, metadata=_meta(item))


def _check_verdict(criterion: Criterion, item: Item) -> Verdict:
    try:
        from ..checks import run_check

        passed = run_check(criterion.check or "", item.response, criterion.kwargs, item.prompt)
    except Exception as exc:  # a broken check is a failed verdict, not a crash
        return Verdict(criterion.name, None, None, error=JudgeError(ErrorKind.CHECK, f"{type(exc).__name__}: {exc}"),
                       judge="check")
    value = 1.0 if passed else 0.0
    return Verdict(criterion.name, "MET" if passed else "UNMET", value,
                   reason=f"programmatic check {criterion.check}: {'passed' if passed else 'failed'}", judge="check")


def _screened(rubric: Rubric, item: Item, reason: str, flagged: bool = False,
              scoring: ScoringConfig | None = None) -> ScoreResult:
    """A degenerate or flagged response, with no judge call. Degenerate: the minimum score, every criterion at its
    worst. Flagged: its judged criteria at their worst (a judge might have been persuaded), its programmatic
    checks computed as usual (a check cannot be persuaded), scored as any result; with no checks, the minimum."""
    why = f"not judged: {'flagged response' if flagged else 'degenerate response'} ({reason})"
    verdicts = []
    for c in rubric.criteria:
        if flagged and not c.is_judged:
            verdicts.append(_check_verdict(c, item))
            continue
        worst = c.worst_value if c.weight > 0 else c.best_value
        label = next((o.label for o in c.options if o.value == worst), None)
        verdicts.append(Verdict(c.name, label, worst, reason=why, judge="screen"))
    meta = {**_meta(item), "screened": reason, **({"flagged": reason} if flagged else {})}
    if flagged and len(rubric.judged) < len(rubric.criteria):
        return replace(score_verdicts(rubric, verdicts, scoring or ScoringConfig()), metadata=meta)
    return ScoreResult(0.0, tuple(verdicts), raw_score=0.0, expected_score=0.0, metadata=meta)


def _meta(item: Item) -> dict[str, Any]:
    return {"id": item.id} if item.id is not None else {}

