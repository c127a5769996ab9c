"""``qualify(rows, judge)``: judge the responses K times, measure, decide, and return the judge card."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...arithmetic import ScoringConfig, score_verdicts
from ...grading.grader import GradingConfig
from ...rubric import Rubric
from .card import (
    CARD_VERSION,
    Card,
    agrees,
    overall_of,
    qualified_rubric,
    status_value,
    statuses_of,
)
from .config import THRESHOLDS, QualifyConfig, Thresholds
from .judging import Judgings, judge_configs, run_judgings
from .measure import (
    agreement,
    consistency,
    cost,
    failures,
    pooled_agreement,
    position,
    reliability,
    verdicts_of,
)
from .responses import QualifyRow

__all__ = ["REWARD_SCORING", "measure_card", "qualify"]

#: The reward's scoring defaults (``RewardConfig``: an abstention counts zero, a failure unscores)
REWARD_SCORING = ScoringConfig(abstention="zero")


def qualify(rows: Sequence[QualifyRow], judge: Any, *, base_url: str | None = None,
            config: QualifyConfig = QualifyConfig(), scoring: ScoringConfig = REWARD_SCORING,
            grading: GradingConfig = GradingConfig(), field: str = "score", thresholds: Thresholds = THRESHOLDS,
            examples: Sequence[Any] | None = None, out_dir: str | Path | None = None,
            on_result: Callable[[int, Any], Any] | None = None,
            say: Callable[[str], Any] | None = None) -> Card:
    """The judge card of ``judge`` (a model string, a JudgeConfig or its mapping, a judge YAML, or a list: an
    ensemble) on ``rows``: ``config.repeats`` judgings of every response, the figures, the statuses, the verdict,
    and the qualified rubric; written to ``out_dir`` when given. ``scoring``, ``grading`` and ``field`` are the
    reward's (default: the reward's, abstentions counting zero; ``field``: which score is the reward); ``examples``: labelled examples for few-shot exemplars."""
    from ...util.loop import LoopThread

    configs = judge_configs(judge, base_url)
    loop = LoopThread("rubric-reward-qualify")
    try:
        judgings = loop.run(run_judgings(rows, configs, config=config, scoring=scoring, grading=grading,
                                         examples=examples, on_result=on_result))
    finally:
        loop.close()
    card = measure_card(judgings, config=config, scoring=scoring, field=field, thresholds=thresholds, say=say)
    if out_dir is not None:
        card.write(out_dir)
    return card


def _names(rows: Sequence[QualifyRow]) -> list[str]:
    return list(dict.fromkeys(c.name for r in rows for c in r.rubric.criteria))


def _criterion(row_rubrics: Sequence[Rubric], name: str) -> Any:
    return next(r[name] for r in row_rubrics if any(c.name == name for c in r.criteria))


def measure_card(j: Judgings, *, config: QualifyConfig, scoring: ScoringConfig = REWARD_SCORING,
                 field: str = "score", thresholds: Thresholds = THRESHOLDS,
                 say: Callable[[str], Any] | None = None) -> Card:
    """The card of finished judgings (the persuasion runs happen here, per consistent criterion)."""
    rubrics = list({id(r.rubric): r.rubric for r in j.rows}.values())
    criteria: dict[str, dict[str, Any]] = {}
    tables = {}
    for name in _names(j.rows):
        c = _criterion(rubrics, name)
        fig: dict[str, Any] = {"kind": c.kind.value, "weight": c.weight, "monitor": c.is_monitor,
                               "judged": c.is_judged}
        v = verdicts_of(j, name) if c.is_judged else None
        if v is not None:
            tables[name] = v
            fig |= failures(v) | {"consistency": consistency(v), "position": position(v, j, config),
                                  "agreement": agreement(v, j, config)}
        criteria[name] = fig
    early = {n: statuses_of(criteria[n], thresholds, positives_agree=None) for n in tables}
    if config.persuasion:
        _persuade(j, tables, criteria, early, say)
    consistent_positive = [(tables[n], tables[n].criterion) for n in tables
                           if criteria[n]["weight"] > 0 and not {"noisy", "position_bias"} & set(early[n])]
    by_sign = {"positive": pooled_agreement(consistent_positive, j, config),
               "negative": pooled_agreement([(tables[n], tables[n].criterion) for n in tables
                                             if criteria[n]["weight"] < 0], j, config)}
    positives_agree = agrees(by_sign["positive"], thresholds)
    for name, fig in criteria.items():
        found = statuses_of(fig, thresholds, positives_agree=positives_agree) if name in tables else []
        fig["status"] = status_value(found)
    failing = {n: s for n, s in ((n, f["status"]) for n, f in criteria.items()) if s != "ok"}
    failing = {n: [s] if isinstance(s, str) else s for n, s in failing.items() if not criteria[n]["monitor"]}
    qualified = {r.name: qualified_rubric(r, failing) for r in rubrics}
    reward = {"rubric": reliability(j, config, _reader(j, None, scoring, field)),
              "qualified": None if all(q is None for q in qualified.values())
              else reliability(j, config, _reader(j, qualified, scoring, field))}
    noise = ((reward["qualified"] or {}).get("noise_share") or {}).get("estimate")
    data = {
        "version": CARD_VERSION, "overall": overall_of(failing, list(qualified.values()), noise, thresholds),
        "rubric": rubrics[0].name if len(rubrics) == 1 else [r.name for r in rubrics],
        "judge": [{"name": c.name, "model": c.model, "mode": c.mode, "samples": c.samples} for c in j.judges],
        "criteria": criteria, "agreement_by_sign": by_sign, "reward": reward, "cost": cost(j),
        "settings": {"repeats": j.repeats, "temperature": list(j.temperatures), "seed": config.seed,
                     "responses": len(j.rows), "groups": len({r.group for r in j.rows}),
                     "gold_responses": sum(1 for r in j.rows if r.gold), "persuasion": config.persuasion,
                     "confidence": config.confidence, "reward_field": field},
        "thresholds": {k: getattr(thresholds, k) for k in thresholds.__dataclass_fields__},
    }
    return Card(data, qualified)


def _persuade(j: Judgings, tables: Mapping[str, Any], criteria: dict[str, dict[str, Any]],
              early: Mapping[str, list[str]], say: Callable[[str], Any] | None) -> None:
    """The red-team's figure for each criterion the judgings found consistent (the first judge of an ensemble)."""
    from .persuasion import persuadability

    for name, v in tables.items():
        if {"noisy", "position_bias", "unscorable"} & set(early[name]):
            criteria[name]["persuasion"] = None
            continue
        if say is not None:
            say(f"qualify: red-team on criterion {name!r}")
        criteria[name]["persuasion"] = persuadability(j.judges[0], v.criterion)


def _reader(j: Judgings, qualified: Mapping[str, Rubric | None] | None, scoring: ScoringConfig,
            field: str) -> Callable[[int, Any], float | None]:
    """Reads row ``i``'s result as its reward: ``field``, or the qualified rubric's score of the same verdicts
    (a response a guard screened keeps its score)."""

    def read(i: int, result: Any) -> float | None:
        rubric = j.rows[i].rubric
        if qualified is None or result.metadata.get("screened"):
            return getattr(result, field) if result.score is not None else None
        target = qualified.get(rubric.name)
        if target is None:
            return None
        rescored = score_verdicts(target, result.verdicts, scoring)
        return getattr(rescored, field) if rescored.score is not None else None

    return read
