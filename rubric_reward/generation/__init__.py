"""The rubric-generator library: generation, a meta-judge, Bradley-Terry ranking, preference pairs (lazy imports).

* :mod:`.config`, :mod:`.templates`, :mod:`.parsing`, :mod:`.generator`: how a rubric is asked for, what the
  generator is shown, how its answer becomes a validated rubric, and the generator itself;
* :mod:`.generate`: ``rubric-reward generate``, training-free rubrics for a file of prompts (resumable);
* :mod:`.metajudge`: rubric quality, pairwise (both orders), pointwise (the Scorer with a meta-rubric) or
  outcome (agreement with labelled response pairs);
* :mod:`.bradley_terry`: strengths from pairwise credits, with a prior so unbeaten candidates stay finite;
* :mod:`.preferences`: K candidates -> M judged pairs -> strengths -> chosen/rejected rows (a ``datasets`` dataset);
* :mod:`.human_data`, :mod:`.pair_judge`: MT-Bench / HelpSteer2 rows and the pairwise judge that reads them.

The DPO loop and ``eval-generator`` built on this library are a recipe: :mod:`rubric_reward.recipes.generator_dpo`.

Nothing heavy is imported until a name is used.
"""

from __future__ import annotations

from ..util.lazy import lazy_exports

_EXPORTS = {
    "GenerationConfig": "config",
    "RUBRIC_SCHEMA": "templates", "generation_messages": "templates", "task_text": "templates",
    "parse_rubric": "parsing", "rubric_text": "parsing", "parse_check_spec": "parsing",
    "GeneratedRubric": "generator", "RubricGenerator": "generator", "default_generator": "generator",
    "PromptRow": "prompt_rows", "load_prompts": "prompt_rows",
    "GenerateSummary": "generate", "generate_rubrics": "generate",
    "MetaJudge": "metajudge", "MetaJudgeConfig": "metajudge", "PairJudgement": "metajudge",
    "PointJudgement": "metajudge", "OutcomeResult": "metajudge", "aoutcome_agreement": "metajudge",
    "load_meta_rubric": "metajudge",
    "BTResult": "bradley_terry", "bradley_terry": "bradley_terry", "win_probability": "bradley_terry",
    "PreferenceConfig": "preferences", "PreferenceSummary": "preferences", "build_preferences": "preferences",
    "select_pairs": "preferences", "choose_pair": "preferences", "choose_pairs": "preferences",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
