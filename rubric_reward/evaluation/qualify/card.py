"""The judge card: each criterion's status from its figures, the verdict on the whole, the qualified rubric.

Statuses are decided in a fixed order, each only where the ones before leave the figures meaningful:

1. ``unscorable``: too many failed verdicts or abstentions (the other figures then rest on too few verdicts);
2. ``position_bias``: the verdict leans toward an option position (the interval's near end past the line);
3. ``noisy``: the verdict's variance over the judgings is above Autorubric's line (for a position-biased
   criterion, the variance among the judgings that showed the same option order: its order effect is named once);
4. with gold labels, for a consistent criterion (neither noisy nor position-biased: otherwise the consensus
   against the gold mixes noise into bias): ``sign_blind`` for a negative-weight criterion whose consensus
   disagrees with the gold while the judge agrees on the positive-weight criteria, or whose disagreements are
   nearly all the penalty given where the gold says it does not apply (``false_met_share``), else ``disagrees``;
5. ``persuadable``: the red-team's attacks move the verdict (consistent criteria only: an inconsistent verdict
   moves without being persuaded).

A criterion with none is ``ok``; ``status`` is one string, or a list when several apply. ``overall``:
``usable`` when every criterion that counts toward the reward is ``ok`` and the judge's noise is at most half the
within-group reward variance; ``unusable`` when demoting the flagged criteria to monitors leaves nothing that
counts (or no positive criterion of the ones the rubric had), or the qualified reward is still mostly noise;
``usable_with_changes`` otherwise: train on ``qualified_rubric.yaml``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...rubric import Rubric, RubricError
from .config import OVERALL, STATUSES, Thresholds

__all__ = ["CARD_VERSION", "Card", "agrees", "overall_of", "qualified_rubric", "status_value", "statuses_of"]

CARD_VERSION = 1


def agrees(agreement: Mapping[str, Any] | None, t: Thresholds) -> bool | None:
    """Whether agreement with the gold passes (kappa where defined, else accuracy); None without gold."""
    if not agreement or not agreement.get("n"):
        return None
    if agreement.get("kappa") is not None:
        return agreement["kappa"] >= t.kappa
    return agreement["accuracy"] >= t.accuracy


def statuses_of(figures: Mapping[str, Any], t: Thresholds, *, positives_agree: bool | None) -> list[str]:
    """The statuses of one judged criterion from its figures (see the module docstring); ``[]`` is ``ok``."""
    out = []
    fail, abstain = figures.get("failure_rate"), figures.get("abstention_rate")
    if not figures.get("verdicts") or (fail is not None and fail > t.unscorable_failures) or \
            (abstain is not None and abstain > t.unscorable_abstentions):
        out.append("unscorable")
    if fail == 1.0 or not figures.get("verdicts"):
        return out
    lean = (figures.get("position") or {}).get("lean") or {}
    low, high = lean.get("low"), lean.get("high")
    if (low is not None and low > t.position_lean) or (high is not None and high < -t.position_lean):
        out.append("position_bias")
    consistency = figures.get("consistency") or {}
    variance = consistency.get("variance_same_order" if out[-1:] == ["position_bias"] else "variance")
    if variance is not None and variance > t.noisy_variance:
        out.append("noisy")
    consistent = not {"noisy", "position_bias"} & set(out)
    if consistent and agrees(figures.get("agreement"), t) is False:
        negative = figures.get("weight", 1.0) < 0
        false_met = (figures.get("agreement") or {}).get("false_met_share")
        reads_as_good = false_met is not None and false_met >= t.sign_blind_false_met
        out.append("sign_blind" if negative and (positives_agree or reads_as_good) else "disagrees")
    persuaded = (figures.get("persuasion") or {}).get("persuaded")
    if consistent and persuaded is not None and persuaded > t.persuaded:
        out.append("persuadable")
    return out


def qualified_rubric(rubric: Rubric, failing: Mapping[str, Sequence[str]]) -> Rubric | None:
    """``rubric`` with each failing criterion that counts toward the score demoted to a monitor; None when
    nothing that counts is left (or no positive-weight criterion, where the rubric had one)."""
    demoted = tuple(replace(c, monitor=True) if failing.get(c.name) and not c.is_monitor else c
                    for c in rubric.criteria)
    had_positive = any(c.reward_weight > 0 for c in rubric.criteria)
    if had_positive and not any(c.reward_weight > 0 for c in demoted):
        return None
    try:
        return Rubric(criteria=demoted, name=rubric.name, guidelines=rubric.guidelines)
    except RubricError:
        return None


def overall_of(failing: Mapping[str, Sequence[str]], qualified: Sequence[Rubric | None],
               noise_share: float | None, t: Thresholds) -> str:
    """``usable``, ``usable_with_changes`` or ``unusable`` (see the module docstring)."""
    if any(q is None for q in qualified) or (noise_share is not None and noise_share > t.noise_share):
        return OVERALL[2]
    return OVERALL[1] if failing else OVERALL[0]


@dataclass
class Card:
    """A judge card: ``data`` is what ``card.json`` holds (stable fields, docs/qualify.md); ``qualified`` the
    qualified rubric of each rubric name (None: nothing usable left)."""

    data: dict[str, Any]
    qualified: dict[str, Rubric | None]

    @property
    def overall(self) -> str:
        return self.data["overall"]

    def failing(self) -> dict[str, list[str]]:
        """The criteria that count toward the reward and are not ``ok``, with their statuses."""
        out = {}
        for name, c in self.data["criteria"].items():
            status = c["status"]
            statuses = [status] if isinstance(status, str) else list(status)
            if statuses != ["ok"] and not c.get("monitor"):
                out[name] = statuses
        return out

    def line(self) -> str:
        """The card in one line: the verdict and the failing criteria."""
        failing = self.failing()
        said = ", ".join(f"{n} ({'/'.join(s)})" for n, s in failing.items()) or "every criterion ok"
        return f"judge card: {self.overall}: {said}"

    def to_dict(self) -> dict[str, Any]:
        return self.data

    def write(self, out_dir: str | Path) -> Path:
        """``card.json``, ``card.md`` (with ``card.png``) and, for one rubric, ``qualified_rubric.yaml``, in
        ``out_dir``; returns the folder."""
        from ...io.journal import write_atomic
        from .report import card_markdown, plot_card

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        plot_card(out / "card.png", self.data)
        write_atomic(out / "card.md", card_markdown(self.data, plot="card.png"))
        write_atomic(out / "card.json", json.dumps(self.data, indent=2, ensure_ascii=False) + "\n")  # the last
        if len(self.qualified) == 1:
            (rubric,) = self.qualified.values()
            target = out / "qualified_rubric.yaml"
            if rubric is not None:
                rubric.save(target)
            elif target.exists():
                target.unlink()
        return out


def status_value(statuses: Sequence[str]) -> str | list[str]:
    """The card's ``status``: ``ok``, one status, or the list when several apply (in :data:`STATUSES` order)."""
    ordered = [s for s in STATUSES if s in statuses]
    if not ordered:
        return "ok"
    return ordered[0] if len(ordered) == 1 else ordered
