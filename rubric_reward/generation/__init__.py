"""Rubric generation, a meta-judge, Bradley-Terry ranking and preference pairs (lazy imports).

* :mod:`.generate`: training-free rubric generation (instance- or dataset-level) with any judge backend;
* :mod:`.metajudge`: rubric quality, pairwise (both orders) or pointwise (the Scorer with a meta-rubric),
  plus an optional outcome signal (agreement with human pairwise labels);
* :mod:`.bradley_terry`: strengths from pairwise credits, with a prior so unbeaten candidates stay finite;
* :mod:`.preferences`: K candidates -> M judged pairs -> strengths -> chosen/rejected rows (a ``datasets`` dataset).

Nothing heavy is imported until a name is used.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "GenerationConfig": "generate", "GeneratedRubric": "generate", "RubricGenerator": "generate",
    "generate_rubrics": "generate", "load_prompts": "generate", "parse_rubric": "generate",
    "generation_messages": "generate", "rubric_text": "generate", "RUBRIC_SCHEMA": "generate",
    "PromptRow": "generate", "default_generator": "generate",
    "MetaJudge": "metajudge", "MetaJudgeConfig": "metajudge", "PairJudgement": "metajudge",
    "PointJudgement": "metajudge", "OutcomeResult": "metajudge", "aoutcome_agreement": "metajudge",
    "load_meta_rubric": "metajudge",
    "BTResult": "bradley_terry", "bradley_terry": "bradley_terry", "win_probability": "bradley_terry",
    "PreferenceConfig": "preferences", "PreferenceSummary": "preferences", "build_preferences": "preferences",
    "select_pairs": "preferences", "choose_pair": "preferences",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
