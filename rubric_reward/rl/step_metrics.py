"""Per-step reward metrics: what the judge did for one batch, as flat ``prefix/name -> float``.

Pure functions of the batch's records (no I/O); only finite values are returned, so a trainer's
logs never see a NaN from here. Cumulative figures (cost) live in :class:`RunningTotals`.

``contrib/<criterion>`` decomposes ``reward_mean``: each criterion's mean term in the reward
(:func:`~rubric_reward.arithmetic.score_terms`; 0 for a monitor criterion, which is logged all the same), beside
``contrib/_base`` (a penalty-only rubric's 1), ``contrib/_clip`` (what clipping took off), ``contrib/_length_penalty``,
``contrib/_guard`` (rewards a guard decided) and ``contrib/_other`` (criteria past ``max_criteria``); together they
sum to ``reward_mean`` (to float rounding): the logged decomposition is the trained reward (TRL #5352).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..rewards.length import quantile
from ..rewards.records import criterion_passed, criterion_targets, failed_criteria

if TYPE_CHECKING:
    from ..arithmetic import ScoringConfig
    from ..rewards.records import RewardRecord
    from ..rubric import Rubric

__all__ = ["RunningTotals", "batch_metrics", "criterion_passed", "failed_criteria"]

_EPS = 1e-9
_UNSAFE = re.compile(r"[^\w.-]+")


@dataclass
class RunningTotals:
    """Figures summed over the life of one reward object (one process)."""

    steps: int = 0
    cost: float = 0.0
    judge_calls: int = 0
    completions: int = 0


def _spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    from ..stats.agreement import spearman

    res = spearman(list(x), list(y))
    return None if res is None or not math.isfinite(res.statistic) else res.statistic


def _groups(prompt_keys: Sequence[str]) -> list[list[int]]:
    """Runs of equal consecutive prompts (TRL repeats each prompt ``num_generations`` times in a row)."""
    groups: list[list[int]] = []
    for i, k in enumerate(prompt_keys):
        if groups and prompt_keys[groups[-1][0]] == k:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def batch_metrics(
    records: Sequence[RewardRecord],
    *,
    lengths: Sequence[int],
    prompt_keys: Sequence[str],
    fixed_rubric: Rubric | None,
    totals: RunningTotals,
    batch_s: float,
    prefix: str = "rubric",
    max_criteria: int = 20,
    unique: int | None = None,
    scoring: ScoringConfig | None = None,
    reward_field: str = "score",
) -> dict[str, float]:
    """The metrics of one batch (see docs/rewards.md for the list). ``unique``: the distinct (prompt,
    completion, rubric) triples judged (default: the distinct results); ``scoring`` and ``reward_field``: how the
    reward was scored, for the ``contrib/`` decomposition (left out without ``scoring``)."""
    if not records:
        return {}
    m: dict[str, float] = {}
    m.update(_reward_figures(records))
    m.update(_guard_figures(records))
    m.update(_verdict_figures(records, lengths, fixed_rubric, max_criteria))
    m.update(_call_figures(records, totals, unique))
    m["batch_s"] = batch_s
    m.update(_spread_figures(records, lengths, prompt_keys))
    if scoring is not None:
        m.update(_contribution_figures(records, scoring, reward_field, max_criteria))
    return {f"{prefix}/{k}": float(v) for k, v in m.items() if v is not None and math.isfinite(v)}


def _reward_figures(records: Sequence[RewardRecord]) -> dict[str, float]:
    """The rewards and scores of the batch: mean, spread, the unscored share, the length penalty."""
    m: dict[str, float] = {}
    rewards = [r.reward for r in records]
    scored = [x for x in rewards if x is not None]
    if scored:
        m["reward_mean"] = sum(scored) / len(scored)
        m["reward_std"] = math.sqrt(sum((x - m["reward_mean"]) ** 2 for x in scored) / len(scored))
    judged = [r.score for r in records if r.score is not None and r.guard is None]
    if judged:
        m["score_mean"] = sum(judged) / len(judged)
    m["unscored_frac"] = sum(x is None for x in rewards) / len(records)
    penalties = [r.penalty for r in records if r.reward is not None]
    if any(penalties):
        m["length_penalty_mean"] = sum(penalties) / len(penalties)
    return m


def _guard_figures(records: Sequence[RewardRecord]) -> dict[str, float]:
    """The reward guards that fired, and the verdict boundary (docs/security.md): flagged before judging,
    screened without a judge (degenerate or flagged, under grading.injection: screen), judged but marked
    suspect (grading.injection: suspect)."""
    n = len(records)
    guards = Counter(r.guard for r in records if r.guard)
    m = {"guarded_frac": sum(guards.values()) / n}
    for name, count in guards.items():
        m[f"guard/{name}_frac"] = count / n
    meta = [r.result.metadata if r.result is not None else {} for r in records]
    m["flagged_frac"] = sum(bool(x.get("flagged")) for x in meta) / n
    m["screened_frac"] = sum(bool(x.get("screened")) for x in meta) / n
    m["suspect_frac"] = sum(bool(x.get("suspect")) for x in meta) / n
    return m


def _verdict_figures(records: Sequence[RewardRecord], lengths: Sequence[int], fixed_rubric: Rubric | None,
                     max_criteria: int) -> dict[str, float]:
    """Verdict-level figures over the judged completions (guarded ones were never put to the judge):
    abstentions, failures by kind, pass rates (per criterion for a fixed rubric), deadline misses by length."""
    m: dict[str, float] = {}
    verdicts = passed = abstained = failed = 0
    kinds: Counter[str] = Counter()
    per_criterion: dict[str, list[int]] = {}
    late_lengths: list[int] = []  # completions a verdict of which missed the deadline, and the rest judged
    ontime_lengths: list[int] = []
    for r, length in zip(records, lengths, strict=True):
        if r.result is None or r.guard is not None or r.rubric is None:
            continue
        late = any(v.error is not None and v.error.kind.value == "deadline" for v in r.result.verdicts)
        (late_lengths if late else ontime_lengths).append(length)
        for (name, weight, best), v in zip(criterion_targets(r.rubric), r.result.verdicts, strict=False):
            verdicts += 1
            if v.error is not None:
                failed += 1
                kinds[v.error.kind.value] += 1
                continue
            if v.abstained or v.value is None:
                abstained += 1
                ok = False
            else:
                ok = criterion_passed(weight, best, v.value)
            passed += ok
            if fixed_rubric is not None:
                per_criterion.setdefault(name, []).append(ok)
    if verdicts:
        m["abstention_rate"] = abstained / verdicts
        m["failure_rate"] = failed / verdicts
        for kind, count in kinds.items():
            m[f"failures/{kind}"] = count / verdicts
        if verdicts - failed:
            m["pass_rate"] = passed / (verdicts - failed)
    if late_lengths:  # a deadline that falls on the longest completions biases training against length
        m["deadline_frac"] = len(late_lengths) / len(records)
        m["length_deadline_mean"] = sum(late_lengths) / len(late_lengths)
        if ontime_lengths:
            m["length_ontime_mean"] = sum(ontime_lengths) / len(ontime_lengths)
    for name in list(per_criterion)[:max_criteria]:
        oks = per_criterion[name]
        m[f"pass/{_UNSAFE.sub('_', name)}"] = sum(oks) / len(oks)
    return m


def _call_figures(records: Sequence[RewardRecord], totals: RunningTotals, unique: int | None) -> dict[str, float]:
    """Calls, cache hits, tokens, cost and latency, added to the running ``totals``. Duplicates within a batch
    come back with their calls marked cached and free; a group call is on each of its results with its share
    (1/n), so shares, tokens and costs add up to it."""
    seen: set[int] = set()
    calls = hits = tokens = 0.0
    cost = 0.0
    latencies: list[float] = []
    for r in records:
        if r.result is None or id(r.result) in seen:
            continue
        seen.add(id(r.result))
        for call in r.result.calls:
            if call.cached:
                hits += call.share
            else:
                calls += call.share
                latencies.append(call.latency_s)
            tokens += call.usage.total_tokens * call.share
            cost += call.cost if not call.cached else 0.0
    totals.steps += 1
    totals.cost += cost
    totals.judge_calls += round(calls)
    totals.completions += len(records)
    m = {"judge_calls": float(calls), "cache_hits": float(hits),
         "unique_frac": (len(seen) if unique is None else unique) / len(records), "tokens": float(tokens),
         "cost": cost, "cost_total": totals.cost}
    if latencies:
        m["latency_p50_s"] = quantile(latencies, 0.5)
        m["latency_p95_s"] = quantile(latencies, 0.95)
        m["latency_p99_s"] = quantile(latencies, 0.99)
        m["latency_max_s"] = max(latencies)
    return m


def _spread_figures(records: Sequence[RewardRecord], lengths: Sequence[int],
                    prompt_keys: Sequence[str]) -> dict[str, float]:
    """What GRPO learns from: the reward's rank correlation with length, and the share of prompt groups whose
    rewards do not differ (no advantage)."""
    m: dict[str, float] = {}
    rewards = [r.reward for r in records]
    pairs = [(r.reward, float(ln)) for r, ln in zip(records, lengths, strict=True) if r.reward is not None]
    rho = _spearman([p[0] for p in pairs], [p[1] for p in pairs])
    if rho is not None:
        m["reward_length_spearman"] = rho
    groups = [g for g in _groups(prompt_keys) if len(g) > 1]
    if groups:
        flat = 0
        for g in groups:
            vals = [rewards[i] for i in g if rewards[i] is not None]
            flat += len(vals) < 2 or max(vals) - min(vals) <= _EPS
        m["zero_spread_groups"] = flat / len(groups)
    return m


def _contribution_figures(records: Sequence[RewardRecord], scoring: ScoringConfig, reward_field: str,
                          max_criteria: int) -> dict[str, float]:
    """``contrib/...``: the scored records' mean reward split into terms that sum to ``reward_mean``."""
    from ..arithmetic import score_terms

    scored = [r for r in records if r.reward is not None]
    if not scored:
        return {}
    sums: dict[str, float] = {}
    named: list[str] = []  # criterion names in first-seen order; past max_criteria they go to _other
    for r in scored:
        terms = None
        if r.guard is None and r.result is not None and r.rubric is not None:
            terms = score_terms(r.rubric, r.result.verdicts, scoring, reward_field)
        if terms is None:
            terms = {"_guard": float(r.reward)}
        if r.penalty:
            terms["_length_penalty"] = -r.penalty
        for name, value in terms.items():
            if not name.startswith("_"):
                if name not in named:
                    named.append(name)
                if named.index(name) >= max_criteria:
                    name = "_other"
            key = f"contrib/{_UNSAFE.sub('_', name)}"
            sums[key] = sums.get(key, 0.0) + value
    return {k: v / len(scored) for k, v in sums.items()}
