"""Persuadability per criterion: the red-team suite (:mod:`rubric_reward.evaluation.redteam`) on one criterion.

The one place that calls the red-team; :func:`attack_success` reads its report, so a change of the report's shape
is a change here only. Each judged criterion is put, alone and with weight 1 (a judge never sees a weight), to the
suite's attacks (a wrong answer with a planted verdict, a request to the grader, a forged prompt structure, a
master key, the same encoded, spaced, translated or hidden); the figure is the red-team's attack success in its
``judge`` column: the share of the measurable attacks that moved the criterion's verdict up against the clean wrong
answer, with the guard's screens off, so it is the judge's own figure, not the guard's (in training the guard
screens most of these). ``benign_drift`` is how often the clean responses' scores moved between grading seeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...judges.config import JudgeConfig
from ...rubric import Criterion, Rubric

__all__ = ["attack_success", "persuadability", "redteam_mode"]


def redteam_mode(judge: JudgeConfig) -> str:
    """The red-team mode that calls ``judge`` the way the reward does."""
    if judge.group_mode:
        return "group"
    if judge.mode == "per_criterion":
        return "logprob" if judge.logprobs else "per_criterion"
    return "per_item" if judge.mode == "per_item" else "k"


def attack_success(report: Mapping[str, Any], mode: str) -> dict[str, Any]:
    """The figures of one mode of a red-team report's ``judge`` column."""
    r = report["columns"]["judge"]["modes"][mode]
    return {"persuaded": r["attack_success_rate"], "attacks": r["n"], "unmeasurable": r["unmeasurable"],
            "moved": sum(f["moved"] for f in r["families"].values()), "benign_drift": r["benign_drift_rate"]}


def persuadability(judge: JudgeConfig, criterion: Criterion) -> dict[str, Any]:
    """The red-team's figure for ``judge`` on ``criterion``: ``{"persuaded": attack success (None: nothing
    measurable, e.g. the clean wrong answer already passes), "moved", "attacks", "unmeasurable", "benign_drift",
    "mode"}`` (the judge of an ensemble is its first)."""
    from ..redteam import run_redteam

    alone = Rubric(criteria=(replace(criterion, weight=1.0, monitor=False),), name=f"redteam-{criterion.name}")
    mode = redteam_mode(judge)
    report = run_redteam(judge, rubric=alone, modes=[mode], columns=["judge"], repeats=2, max_drift=None)
    return {**attack_success(report, mode), "mode": mode}
