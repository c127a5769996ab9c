"""Qualify a judge before training: can this judge carry this rubric as a reward? (``rubric-reward qualify``,
the GRPO recipe's ``qualify:`` gate, docs/qualify.md).

Every response is judged K times (:mod:`.judging`), then measured per criterion and per rubric (:mod:`.measure`:
consistency with Autorubric's bands, position bias, failures and abstentions, agreement with gold labels by the
sign of the weight, persuadability from the red-team through :mod:`.persuasion`; the reward's test-retest
reliability, the judge's share of the within-group variance, flat groups, cost per 1,000 rewards). :mod:`.card`
turns the figures into statuses, a verdict and the qualified rubric (failing criteria demoted to monitors);
:mod:`.report` writes ``card.md`` and its plot. Thresholds live in :mod:`.config`, each with its source.

Imports: the core (rubric, grading, judges, scorer, stats, io, util), and the red-team of this room's parent;
nothing above ``evaluation``. Exports load lazily.
"""

from __future__ import annotations

from ...util.lazy import lazy_exports

_EXPORTS = {
    "QualifyConfig": "config", "THRESHOLDS": "config", "Thresholds": "config", "STATUSES": "config",
    "OVERALL": "config", "BANDS": "config",
    "QualifyRow": "responses", "load_rows": "responses", "match_gold": "responses", "sample_rows": "responses",
    "Judgings": "judging", "run_judgings": "judging",
    "Card": "card", "qualify": "run", "measure_card": "run",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
