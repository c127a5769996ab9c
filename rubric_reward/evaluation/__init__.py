"""Evaluation runs and reports: judge a labelled dataset, measure agreement, compare runs, IFEval.

* ``config`` and ``runner``: the resumable, budgeted run (``EvalConfig``, ``run_eval``) that writes a run
  folder;
* ``dataset``: rows with responses, rubrics and human labels as ``EvalItem`` s;
* ``run_metrics``: a run folder's agreement metrics (``metrics.json``);
* ``report``: ``report.md`` / ``report.html`` and plots of a run (and the block model other reports use);
* ``formatting``: numbers, intervals and tables in reports ("n/a" for undefined, never NaN);
* ``compare``: paired comparison of runs on the same items;
* ``ifeval_prompts``: the IFEval prompts, paired with responses, as checks or as a rubric;
* ``ifeval_report``: IFEval strict/loose results of a system and base-vs-trained comparisons;
* ``qualify`` (a subpackage): the judge card, whether a judge can carry a rubric as a reward
  (``rubric-reward qualify``, the GRPO recipe's gate).

Statistics themselves are pure functions in :mod:`rubric_reward.stats`; this package reads results and
writes reports. Exports load lazily.
"""

from __future__ import annotations

from ..util.lazy import lazy_exports

_EXPORTS = {
    "EvalConfig": "config", "RunSummary": "runner", "run_eval": "runner", "arun_eval": "runner",
    "EvalItem": "dataset", "FieldMap": "dataset", "load_items": "dataset", "normalise_label": "dataset",
    "RunData": "run_metrics", "compute_metrics": "run_metrics", "load_run": "run_metrics",
    "write_report": "report", "rebuild_report": "report", "Heading": "report", "Para": "report", "Table": "report",
    "Image": "report", "render_markdown": "report", "render_html": "report",
    "fmt": "formatting", "pct": "formatting", "pvalue": "formatting", "ci_text": "formatting",
    "interval_dict": "formatting", "jsonable": "formatting", "markdown_table": "formatting",
    "compare_runs": "compare", "compare_many": "compare",
    "IFEvalRow": "ifeval_prompts", "load_ifeval": "ifeval_prompts", "match_responses": "ifeval_prompts",
    "ifeval_row_to_rubric": "ifeval_prompts",
    "SystemResults": "ifeval_report", "evaluate_system": "ifeval_report", "write_system": "ifeval_report",
    "write_comparison": "ifeval_report", "overall_table": "ifeval_report", "summary_table": "ifeval_report",
    "ModeComparison": "ifeval_report", "GroupComparison": "ifeval_report", "LevelComparison": "ifeval_report",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
