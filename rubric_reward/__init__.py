"""rubric_reward: turn rubrics into rewards.

Per-criterion LLM judging (Autorubric design), pure scoring, reliability statistics, and reward
functions for TRL trainers. Heavy libraries load only when a path needs them.
"""

from __future__ import annotations

from .util.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Rubric": "rubric", "Criterion": "rubric", "Option": "rubric", "RubricError": "rubric",
    "load_rubric": "rubric", "load_rubrics": "rubric",
    "Verdict": "results", "ScoreResult": "results", "JudgeError": "results", "ErrorKind": "results",
    "ScoringConfig": "arithmetic", "Abstention": "arithmetic", "OnFailure": "arithmetic", "score_verdicts": "arithmetic",
    "Item": "items",
    "JudgeConfig": "judges.config", "Judge": "judges.judge",
    "Grader": "grading.grader", "GradingConfig": "grading.grader",
    "Scorer": "scorer",
    "EvalConfig": "evaluation.config", "run_eval": "evaluation.runner", "SQLiteCache": "judges.cache",
}

__all__ = [*_EXPORTS, "__version__"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, ("__version__",))
