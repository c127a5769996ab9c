"""K independent judgings of every response: what the card measures.

Judging ``k`` is a fresh :class:`~rubric_reward.Scorer` over the same responses with each judge's sampling seed and
the option-order seed moved on by ``k`` (so each judging samples anew, shows the options in a new order and, with
few-shot examples, draws new exemplars), at the judge's temperature, or ``temperature`` where the judge's is 0.
The judgings run one after another (a local judge is loaded once at a time); inside each, every response is judged
concurrently within the judge's limits. Beside every verdict the option order each of its votes was shown is kept
(:meth:`~rubric_reward.grading.grader.Grader.shown_order`), for position bias.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...arithmetic import ScoringConfig
from ...grading.grader import GradingConfig
from ...judges.config import JudgeConfig, load_judges
from ...results import ScoreResult, Verdict
from .config import QualifyConfig
from .responses import QualifyRow

__all__ = ["Judgings", "Shown", "judge_configs", "run_judgings"]

#: Per vote of a verdict: (its label, or None when it failed; the option order it was shown, or None when unknown:
#: a group call)
Shown = tuple[tuple[str | None, tuple[str, ...] | None], ...]


@dataclass(frozen=True)
class Judgings:
    """``results[k][i]``: judging ``k`` of row ``i``; ``shown[k][i][criterion]``: its votes and their orders."""

    rows: Sequence[QualifyRow]
    results: Sequence[Sequence[ScoreResult]]
    shown: Sequence[Sequence[Mapping[str, Shown]]]
    judges: Sequence[JudgeConfig]
    temperatures: Sequence[float]
    seconds: float

    @property
    def repeats(self) -> int:
        return len(self.results)


def judge_configs(judge: Any, base_url: str | None = None) -> list[JudgeConfig]:
    """The judge configs of ``judge`` (a model string, a JudgeConfig, its mapping, a judge YAML or a list: an
    ensemble); built judges are refused, since each judging needs its own seed."""
    from ...judges.judge import Judge

    items = judge if isinstance(judge, list | tuple) else [judge]
    if any(isinstance(j, Judge) for j in items):
        raise ValueError("qualify: pass judge configs (a model string, a JudgeConfig, a judge YAML), not built "
                         "judges: every judging needs its own sampling seed")
    return load_judges(judge, base_url=base_url)


def _repeat_judges(configs: Sequence[JudgeConfig], k: int, stride: int, config: QualifyConfig) -> list[JudgeConfig]:
    return [replace(c, seed=(c.seed or 0) + config.seed + k * stride,
                    temperature=c.temperature if c.temperature > 0 else config.temperature) for c in configs]


def _shown(grader: Any, row: QualifyRow, verdict: Verdict, group_mode: Mapping[str, bool]) -> Shown:
    """Each vote of ``verdict`` with the option order it was shown (the i-th vote of a judge is its sample i)."""
    try:
        criterion = row.rubric[verdict.criterion]
    except KeyError:
        return ()
    if not criterion.is_judged or verdict.judge in ("screen", "check"):
        return ()
    votes = verdict.votes or (verdict,)
    seen: dict[str, int] = {}
    out = []
    for vote in votes:
        sample = seen.get(vote.judge, 0)
        seen[vote.judge] = sample + 1
        order = None if group_mode.get(vote.judge, False) else grader.shown_order(criterion, row.item, vote.judge,
                                                                                   sample)
        out.append((None if vote.error is not None else vote.label, order))
    return tuple(out)


async def run_judgings(rows: Sequence[QualifyRow], configs: Sequence[JudgeConfig], *, config: QualifyConfig,
                       scoring: ScoringConfig = ScoringConfig(), grading: GradingConfig = GradingConfig(),
                       examples: Sequence[Any] | None = None, fewshot_k: int = 4,
                       on_result: Callable[[int, ScoreResult], Any] | None = None) -> Judgings:
    """``config.repeats`` judgings of ``rows`` by the judge ``configs`` (see the module docstring); ``examples``:
    labelled examples for few-shot exemplars (redrawn per judging); ``on_result`` reports progress."""
    from ...grading.fewshot import FewShotSampler
    from ...scorer import Scorer

    if not rows:
        raise ValueError("qualify: no responses to judge")
    stride = max(c.samples for c in configs)
    results: list[list[ScoreResult]] = []
    shown: list[list[dict[str, Shown]]] = []
    temperatures: list[float] = []
    start = time.perf_counter()
    for k in range(config.repeats):
        judges = _repeat_judges(configs, k, stride, config)
        temperatures = [j.temperature for j in judges]
        exemplars = FewShotSampler(examples, k=fewshot_k, seed=config.seed + k) if examples else None
        scorer = Scorer(None, judges, scoring=scoring, exemplars=exemplars,
                        grading=replace(grading, seed=grading.seed + config.seed + k * stride, shuffle=True))
        try:
            got = await scorer.ascore_pairs([(r.rubric, r.item) for r in rows], on_result=on_result)
        finally:
            await scorer.aclose()
        group_mode = {j.name: j.group_mode for j in judges}
        results.append(list(got))
        shown.append([{v.criterion: _shown(scorer.grader, row, v, group_mode) for v in result.verdicts}
                      for row, result in zip(rows, got, strict=True)])
    return Judgings(rows, results, shown, list(configs), temperatures, time.perf_counter() - start)
