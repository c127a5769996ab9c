"""One GRPO run's summary: what summary.json / summary.md / summary.html hold, how they are written and rebuilt.

The report stage (:mod:`.report_stage`) hands :func:`write_summary` the report split's rows (:func:`report_row`,
base vs best checkpoint, judged on a split never used for picking); it writes ``summary.md``, ``summary.json``
and ``summary.html`` (plots embedded) plus PNG plots into the run folder. ``summary.md`` opens with one sentence a
newcomer can read (:func:`headline`: what was trained, the report-split change with its interval and p-value,
what got significantly worse, the IFEval change, and whether each is distinguishable from zero), a line with the
run's conditions (seed, torch threads, dtype, bfloat16 kernels, CPU model, torch / transformers / trl / peft
versions: ``environment`` in summary.json), then:

* **Report split** (the final test; never used for selection): per judge, base and best means with bootstrap
  intervals, the paired interval of the difference, the paired Wilcoxon test (the variant that ran is named),
  better / worse / tied pairs under the tie rule of :mod:`rubric_reward.recipes.grpo.comparison`, per instruction type
  (the split's strata; Holm across types), per criterion (pass rates base -> best, exact McNemar, Holm across
  criteria: which criteria drove the change), and the reward-hacking indicators of
  :mod:`rubric_reward.recipes.grpo.hacks`. The best checkpoint
  was picked on the selection split, so this p-value needs no adjustment; the bound ``min(1, m x p)`` for the
  ``m`` checkpoints looked at is printed beside it.
* **Selection split**: every checkpoint looked at against the base, with Holm-adjusted p-values.
* **IFEval transfer** (optional): ``rubric_reward.evaluation.ifeval_report``'s comparison, per instruction type.

Its input is the rows of ``report_completions.jsonl``, so :func:`rebuild_summary` (and
``python -m rubric_reward.recipes.grpo.summary RUN_DIR``) writes the same summary again from the run folder. The
statistics' settings (:class:`SummarySettings`) are made once and recorded under ``settings``. Undefined
statistics are ``None`` in JSON and "n/a" in Markdown, never NaN. Tables over several seeds: :mod:`.seeds`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...evaluation import ci_text, fmt, jsonable
from ...evaluation import pvalue as _p
from .comparison import compare_paired, load_selection_scores, record_length, selection_table
from .hacks import hack_indicators
from .plots import plot_monitor, plot_score_distributions

__all__ = ["REPORT_FILE", "SummarySettings", "build_summary", "ci_bounds", "criterion_table", "environment_line",
           "headline", "judge_comparison", "judge_tables", "read_report_rows", "read_summary", "rebuild_summary",
           "regression_clause", "regressions", "report_judges", "report_row", "signed", "write_summary"]

REPORT_FILE = "report_completions.jsonl"
SUMMARY_FILE = "summary.json"
SYSTEMS = ("base", "best")


@dataclass(frozen=True)
class SummarySettings:
    """The statistics' settings of one summary, made once: the ``confidence`` of every interval, the bootstrap
    ``resamples`` and its ``seed``; ``alpha`` (1 - confidence: what a test's p must stay under) and ``level``
    (the confidence in whole percent, as the Markdown says it) are derived here only."""

    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0

    @property
    def alpha(self) -> float:
        return 1 - self.confidence

    @property
    def level(self) -> int:
        return round(100 * self.confidence)

    @classmethod
    def of(cls, summary: Mapping[str, Any]) -> SummarySettings:
        """The settings a summary (or a seed's row) recorded under ``settings``; the defaults for what it lacks."""
        recorded = summary.get("settings") or {}
        return cls(confidence=recorded.get("confidence", 0.95), resamples=recorded.get("bootstrap_resamples", 2000),
                   seed=recorded.get("seed", 0))

    def numbers(self) -> dict[str, Any]:
        """The settings as ``summary.json`` records them."""
        return {"bootstrap_resamples": self.resamples, "confidence": self.confidence, "seed": self.seed}


# ------------------------------------------------------------------------------------------- report rows
def report_row(row: Mapping[str, Any], completions: Mapping[str, str], tokens: Mapping[str, int | None],
               scores: Mapping[str, Mapping[str, float | None]],
               perfect: Mapping[str, Mapping[str, bool | None]] | None = None,
               criteria: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None) -> dict[str, Any]:
    """One line of ``report_completions.jsonl``: the prompt's ``id``, ``benchmark`` (stratum) and ``prompt``;
    ``completions``/``tokens`` per system (``base``, ``best``); ``scores`` per judge and system (the metric's
    value, None = unscored); ``perfect`` per judge and system (plain score 1) when known; ``criteria`` per judge
    and criterion name: ``{"kind": "check" | "judged", "base": passed, "best": passed}`` (None = unknown: the
    completion was unscored), when known."""
    return {"id": row.get("id"), "benchmark": row.get("benchmark"), "prompt": row.get("prompt"),
            "completions": {s: completions[s] for s in SYSTEMS}, "tokens": {s: tokens.get(s) for s in SYSTEMS},
            "scores": {j: {s: v[s] for s in SYSTEMS} for j, v in scores.items()},
            "perfect": {j: {s: v.get(s) for s in SYSTEMS} for j, v in (perfect or {}).items()},
            "criteria": {j: {name: {"kind": c.get("kind"), **{s: c.get(s) for s in SYSTEMS}}
                             for name, c in per.items()} for j, per in (criteria or {}).items()}}


def read_report_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``report_completions.jsonl`` (a bad line is a one-line DataError naming it)."""
    from ...io.rows import DataError, numbered_jsonl_rows

    rows = []
    for n, row in numbered_jsonl_rows(Path(path)):
        if not isinstance(row.get("scores"), Mapping) or not isinstance(row.get("completions"), Mapping):
            raise DataError(f"{path}: line {n}: needs 'scores' and 'completions' mappings (written by report_row)")
        rows.append(dict(row))
    return rows


def read_summary(run_dir: str | Path) -> dict[str, Any]:
    """A run folder's ``summary.json`` ({} when there is none)."""
    path = Path(run_dir) / SUMMARY_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def report_judges(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The judges that scored the rows, in order of first appearance (the first is the training judge)."""
    judges: list[str] = []
    for r in rows:
        judges += [j for j in r["scores"] if j not in judges]
    return judges


def _column(rows: Sequence[Mapping[str, Any]], *keys: str) -> list[Any]:
    out = []
    for r in rows:
        value: Any = r
        for k in keys:
            value = value.get(k) if isinstance(value, Mapping) else None
        out.append(value)
    return out


# ------------------------------------------------------------------------------------------- the numbers
def judge_comparison(rows: Sequence[Mapping[str, Any]], judge: str, metric: str,
                     settings: SummarySettings) -> dict[str, Any]:
    """One judge's base vs best on the rows (:func:`~.comparison.compare_paired`), with the perfect counts of the
    plain score when the rows carry them."""
    c = compare_paired(_column(rows, "scores", judge, "base"), _column(rows, "scores", judge, "best"),
                       metric=metric, base_lengths=_column(rows, "tokens", "base"),
                       best_lengths=_column(rows, "tokens", "best"),
                       base_texts=_column(rows, "completions", "base"), best_texts=_column(rows, "completions", "best"),
                       n_resamples=settings.resamples, confidence=settings.confidence, seed=settings.seed)
    for system in SYSTEMS:
        flags = _column(rows, "perfect", judge, system)
        if any(f is not None for f in flags):  # the plain score's perfect count (metric may be expected_score)
            c[system]["perfect"] = sum(1 for f in flags if f)
    return c


def _strata(rows: Sequence[Mapping[str, Any]], judge: str, metric: str, settings: SummarySettings
            ) -> list[dict[str, Any]]:
    """Per benchmark (instruction type): base and best means, the difference and better/worse/tied."""
    names = sorted({str(r.get("benchmark")) for r in rows if r.get("benchmark") is not None})
    per_type = replace(settings, resamples=1000)  # many small tables: fewer resamples than the headline's
    out = []
    for name in names if len(names) > 1 else []:
        part = [r for r in rows if str(r.get("benchmark")) == name]
        c = judge_comparison(part, judge, metric, per_type)
        out.append({"benchmark": name, "n": c["n"], "base": c["base"]["mean"], "best": c["best"]["mean"],
                    "difference": c["difference"], "improved": c["improved"], "worse": c["worse"],
                    "tied": c["tied"], "pvalue": (c["wilcoxon"] or {}).get("pvalue"), "pvalue_holm": None})
    _holm(out)
    return out


def _holm(entries: list[dict[str, Any]]) -> None:
    """Fill each entry's ``pvalue_holm``: Holm across the entries that have a p-value."""
    from ...stats import holm_adjust

    tested = [e for e in entries if e.get("pvalue") is not None]
    for e, p in zip(tested, holm_adjust([e["pvalue"] for e in tested]) if tested else []):
        e["pvalue_holm"] = p


def criterion_table(rows: Sequence[Mapping[str, Any]], judge: str) -> list[dict[str, Any]]:
    """Per criterion (in order of first appearance): pass counts base and best over the prompts whose rubric
    has it and where both verdicts are known, the exact McNemar test (``b`` = passed by base only, ``c`` = by
    best only) and the Holm adjustment across criteria. Identical completions count as the same verdict (the
    tie rule). Empty when the rows carry no per-criterion verdicts."""
    from ...stats import mcnemar_exact

    names: dict[str, str | None] = {}
    for r in rows:
        for name, c in ((r.get("criteria") or {}).get(judge) or {}).items():
            names.setdefault(name, c.get("kind") if isinstance(c, Mapping) else None)
    out = []
    for name, kind in names.items():
        base, best = [], []
        for r in rows:
            c = ((r.get("criteria") or {}).get(judge) or {}).get(name)
            if not isinstance(c, Mapping) or c.get("base") is None or c.get("best") is None:
                continue
            texts = r.get("completions") or {}
            same = texts.get("base") is not None and texts.get("base") == texts.get("best")
            base.append(bool(c["base"]))
            best.append(bool(c["base"]) if same else bool(c["best"]))
        test = mcnemar_exact(base, best) if base else None
        out.append({"criterion": name, "kind": kind, "n": len(base), "base_passed": sum(base),
                    "best_passed": sum(best), "base_rate": sum(base) / len(base) if base else None,
                    "best_rate": sum(best) / len(best) if best else None,
                    "b": None if test is None else test.b, "c": None if test is None else test.c,
                    "pvalue": None if test is None else test.pvalue, "pvalue_holm": None})
    _holm(out)
    return out


def judge_tables(rows: Sequence[Mapping[str, Any]], judge: str, metric: str,
                 settings: SummarySettings) -> dict[str, Any]:
    """The training judge's tables, as ``summary.json`` keys: ``report_by_type`` (per instruction type, Holm
    across types), ``report_by_criterion`` (:func:`criterion_table`) and ``hacking`` (the reward-hacking
    indicators of :func:`~.hacks.hack_indicators`)."""
    return {"report_by_type": _strata(rows, judge, metric, settings),
            "report_by_criterion": criterion_table(rows, judge),
            "hacking": hack_indicators(_column(rows, "prompt"), _column(rows, "completions", "base"),
                                       _column(rows, "completions", "best"),
                                       best_scores=_column(rows, "scores", judge, "best"),
                                       base_lengths=_column(rows, "tokens", "base"),
                                       best_lengths=_column(rows, "tokens", "best"))}


def regressions(summary: Mapping[str, Any], settings: SummarySettings | None = None
                ) -> dict[str, list[dict[str, Any]]]:
    """What got significantly worse on the report split: instruction types whose mean difference is negative
    with a Holm-adjusted (across types) Wilcoxon p below 1 - confidence, and criteria whose pass count fell
    with a Holm-adjusted (across criteria) McNemar p below it. ``settings``: the summary's own by default."""
    alpha = (settings or SummarySettings.of(summary)).alpha
    types = [s for s in summary.get("report_by_type") or []
             if (s.get("difference") or {}).get("estimate") is not None and s["difference"]["estimate"] < 0
             and s.get("pvalue_holm") is not None and s["pvalue_holm"] < alpha]
    criteria = [c for c in summary.get("report_by_criterion") or []
                if c.get("pvalue_holm") is not None and c["pvalue_holm"] < alpha
                and c["best_passed"] < c["base_passed"]]
    return {"types": types, "criteria": criteria}


def build_summary(run_dir: Path, rows: Sequence[Mapping[str, Any]], *, monitor: Sequence[Mapping[str, Any]],
                  best: Mapping[str, Any] | None, metric: str, looked_at: int | None,
                  ifeval: Mapping[str, Any] | None, splits: Mapping[str, int] | None, settings: SummarySettings,
                  meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """``summary.json``'s content (everything the Markdown says, as numbers)."""
    judges = report_judges(rows)
    comparisons = {j: judge_comparison(rows, j, metric, settings) for j in judges}
    selection = selection_table(monitor, load_selection_scores(run_dir, monitor))
    m = looked_at if looked_at is not None else selection["looked_at"]
    for c in comparisons.values():
        p = (c["wilcoxon"] or {}).get("pvalue")
        c["pvalue_bound_over_looked_at"] = None if p is None or not m else min(1.0, m * p)
    summary = {
        "metric": metric, "best": dict(best or {"step": selection["best_step"]}), "splits": dict(splits or {}),
        "report": comparisons, **judge_tables(rows, judges[0], metric, settings),
        "checkpoints_looked_at": m, "selection": selection,
        "ifeval": _ifeval(run_dir, ifeval, settings) if ifeval else None,
        "settings": {**settings.numbers(),
                     "difference": "best - base", "selection_adjustment": "holm",
                     "ties": "identical completions, or scores within 1e-9; differences in exact arithmetic",
                     "by_type_adjustment": "holm across types", "by_criterion_test": "exact McNemar, holm across "
                                                                                     "criteria"},
        "meta": dict(meta or {}),
        "environment": dict((meta or {}).get("environment") or {}),
    }
    summary["regressions"] = regressions(summary, settings)
    summary["headline"] = headline(summary)
    return summary


def _distinguishable(ci: Mapping[str, Any] | None, p: float | None, alpha: float) -> bool:
    if not ci or ci.get("low") is None or p is None:
        return False
    return (ci["low"] > 0 or ci["high"] < 0) and p < alpha


def headline(summary: Mapping[str, Any]) -> str:
    """The summary's first sentence: what was trained, the report-split change (interval, p-value) and the
    IFEval change, each said to be distinguishable from zero or not."""
    meta, splits, metric = summary.get("meta") or {}, summary.get("splits") or {}, summary["metric"]
    settings = SummarySettings.of(summary)
    level, alpha = settings.level, settings.alpha
    steps = f" for {meta['max_steps']} steps" if meta.get("max_steps") else ""
    data = f" on {splits['train']} training prompts" if splits.get("train") else ""
    data += f" ({meta['dataset']})" if meta.get("dataset") else ""
    text = f"GRPO trained {meta.get('model', 'the model')}{steps}{data}. "
    c = next(iter(summary["report"].values()))
    ci, p = c["difference"], (c["wilcoxon"] or {}).get("pvalue")
    if ci is None or ci.get("estimate") is None:
        text += f"On the {c['n']} held-out report prompts nothing could be compared (no prompt scored for both)."
    else:
        verdict = "a difference distinguishable from zero" if _distinguishable(ci, p, alpha) \
            else "not distinguishable from zero"
        text += (f"On the {c['n']} held-out report prompts its mean {metric} went from {_fmt(c['base']['mean'])} "
                 f"to {_fmt(c['best']['mean'])} ({signed(ci['estimate'])}, {level}% CI {ci_bounds(ci)}, "
                 f"Wilcoxon p = {_p(p)}: {verdict}; {c['improved']} better, {c['worse']} worse, {c['tied']} tied)"
                 f"{regression_clause(summary)}.")
    ifeval = summary.get("ifeval")
    if ifeval and "strict" in ifeval.get("overall", {}):
        lv = ifeval["overall"]["strict"]["prompt_level"]
        pts = {"estimate": 100 * lv["delta"], "low": None if lv["ci_low"] is None else 100 * lv["ci_low"],
               "high": None if lv["ci_high"] is None else 100 * lv["ci_high"]}
        verdict = "distinguishable from zero" if _distinguishable(pts, lv["pvalue"], alpha) \
            else "not distinguishable from zero"
        text += (f" On {ifeval.get('num_prompts', 'n/a')} IFEval prompts, strict prompt-level accuracy went from "
                 f"{100 * lv['base']:.1f}% to {100 * lv['trained']:.1f}% ({pts['estimate']:+.1f} points, "
                 f"{level}% CI {ci_bounds(pts, 1)}: {verdict}).")
    flags = (summary.get("hacking") or {}).get("flags") or []
    if flags:
        text += " Caution, signs of reward hacking: " + "; ".join(flags) + "."
    return text


def regression_clause(summary: Mapping[str, Any]) -> str:
    """``", but bullets got worse: -0.344 [-0.52, -0.17] (Holm p 0.003)"`` for what :func:`regressions`
    found (types first, then criteria), or ``""``."""
    found = summary.get("regressions") or regressions(summary)
    parts = [f"{s['benchmark']} got worse: {signed(s['difference']['estimate'])} {ci_bounds(s['difference'])} "
             f"(Holm p {_p(s['pvalue_holm'])})" for s in found["types"]]
    parts += [f"criterion {c['criterion']} got worse: passed {c['base_passed']}/{c['n']} -> "
              f"{c['best_passed']}/{c['n']} (McNemar, Holm p {_p(c['pvalue_holm'])})" for c in found["criteria"]]
    return ", but " + "; ".join(parts) if parts else ""


# ------------------------------------------------------------------------------------------- IFEval
def _ifeval(out: Path, ifeval: Mapping[str, Any], settings: SummarySettings) -> dict[str, Any]:
    """The IFEval input as comparison.json's content plus where its files are, and per-type counts."""
    from ...evaluation import write_comparison

    if "comparison" not in ifeval and {"base", "trained"} <= set(ifeval):
        folder = out / "ifeval"
        write_comparison(folder, ifeval["base"], ifeval["trained"], n_resamples=settings.resamples,
                         confidence=settings.confidence, seed=settings.seed)
        data = json.loads((folder / "comparison.json").read_text(encoding="utf-8"))
        info = {"dir": str(folder), "num_prompts": ifeval["base"].summary("strict").prompt_level.total,
                "seed": settings.seed}
    elif "comparison" in ifeval:
        data, info = ifeval["comparison"], {k: v for k, v in ifeval.items() if k != "comparison"}
    else:
        raise ValueError("ifeval: expected {'comparison': ...} (comparison.json) or {'base': ..., 'trained': ...}")
    folder = Path(info["dir"]) if info.get("dir") else None
    chart = None
    if folder is not None and (folder / "comparison.png").is_file():
        try:
            chart = str((folder / "comparison.png").resolve().relative_to(out.resolve()))
        except ValueError:
            chart = None
    modes = {mode: data[mode] for mode in ("strict", "loose") if mode in data}
    types = modes.get("strict", {}).get("per_instruction", [])
    return {**info, "chart": chart, "modes": modes,
            "overall": {mode: {lv: c[lv] for lv in ("prompt_level", "instruction_level")} for mode, c in modes.items()},
            "types": len(types), "types_up": sum(1 for g in types if g["delta"] > 0),
            "types_down": sum(1 for g in types if g["delta"] < 0),
            "types_unchanged": sum(1 for g in types if g["delta"] == 0),
            "types_significant_holm": sum(1 for g in types if g["pvalue_holm"] < 0.05)}


def _ifeval_blocks(data: Mapping[str, Any], confidence: float, B: Any) -> list[Any]:
    from ...evaluation import GroupComparison, LevelComparison, ModeComparison, overall_table

    modes = {mode: ModeComparison(mode, LevelComparison(**c["prompt_level"]), LevelComparison(**c["instruction_level"]),
                                  [GroupComparison(**g) for g in c["per_instruction"]],
                                  [GroupComparison(**g) for g in c["per_category"]])
             for mode, c in data["modes"].items()}
    moved = (f"Of {data['types']} instruction types (strict), {data['types_up']} moved up, {data['types_down']} "
             f"moved down and {data['types_unchanged']} are unchanged; {data['types_significant_holm']} changed "
             "significantly after Holm (p < 0.05).")
    blocks = [B.Heading(2, "IFEval transfer: base vs best"),
              B.Para(f"{data.get('num_prompts', 'n/a')} IFEval prompts (seed {data.get('seed', 'n/a')}"
                     + (f"; chosen to contain {', '.join(data['types_wanted'])}" if data.get("types_wanted") else "")
                     + "); deltas are best - base in points; exact McNemar; per-type p-values Holm-adjusted across "
                     f"types. {moved}" + (f" Files: {data['dir']}." if data.get("dir") else ""))]
    # overall_table renders its own markdown; split it back into rows for our renderer.
    lines = overall_table(modes, confidence=confidence).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    blocks.append(B.Table(header, [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]))
    if "strict" in modes:
        rows = [[g.name, str(g.n), f"{100 * g.base:.1f}", f"{100 * g.trained:.1f}",
                 "unchanged" if g.delta == 0 else f"{100 * g.delta:+.1f}", str(g.b), str(g.c), _p(g.pvalue),
                 _p(g.pvalue_holm)] for g in modes["strict"].per_instruction]
        blocks += [B.Heading(3, "Per instruction type (strict)"),
                   B.Table(["type", "n", "base %", "best %", "delta", "b", "c", "p", "p (Holm)"], rows)]
    if data.get("chart"):
        blocks.append(B.Image(data["chart"], "IFEval per-type deltas"))
    return blocks


# ------------------------------------------------------------------------------------------- Markdown
def _fmt(x: Any, digits: int = 3) -> str:
    return fmt(x, digits)


def signed(v: float | None, digits: int = 3) -> str:
    """A number with its sign (``+0.125``), "n/a" for None."""
    return fmt(v, digits, signed=True)


def ci_bounds(ci: Mapping[str, Any], digits: int = 3) -> str:
    """An interval's bounds, signed: ``[-0.052, +0.170]``, or ``[n/a]``."""
    return "[n/a]" if ci.get("low") is None else \
        f"[{fmt(ci['low'], digits, signed=True)}, {fmt(ci['high'], digits, signed=True)}]"


def _ci_text(ci: Mapping[str, Any] | None, signed: bool = False) -> str:
    return ci_text(ci, signed=signed)


def _perfect(rec: Mapping[str, Any]) -> str:
    if rec.get("perfect") is None:
        return "n/a"
    return f"{rec['perfect']}/{rec['n']}" if rec.get("n") is not None else str(rec["perfect"])


def _report_blocks(summary: Mapping[str, Any], settings: SummarySettings, plots: Mapping[str, str],
                   B: Any) -> list[Any]:
    metric, m = summary["metric"], summary["checkpoints_looked_at"]
    comparisons = summary["report"]
    first = next(iter(comparisons.values()))
    variant = (first["wilcoxon"] or {}).get("variant", "Wilcoxon signed-rank: not run (no complete pairs)")
    blocks = [B.Heading(2, "Report split: base vs best"), B.Para(
        f"The report split was never used to pick the checkpoint, so its p-value needs no correction for the pick. "
        f"Scores are the reward's `{metric}` per prompt (greedy completions); difference = best - base over prompts "
        f"both systems got scored; {settings.level}% bootstrap intervals ({settings.resamples} resamples, "
        f"seed {settings.seed}). Ties: identical completions, or scores within 1e-9. Test: {variant}. \"bound\" = "
        f"min(1, {m} x p), what Holm would give the smallest of {m} p-values: the correction the result would "
        "need had the checkpoint been picked on this split.")]
    rows = []
    for judge, c in comparisons.items():
        rows.append([judge, str(c["pairs"]), _ci_text(c["base"]["ci"]), _ci_text(c["best"]["ci"]),
                     _ci_text(c["difference"], signed=True), _p((c["wilcoxon"] or {}).get("pvalue")),
                     _p(c["pvalue_bound_over_looked_at"]),
                     f"{c['base']['perfect']}/{c['n']} -> {c['best']['perfect']}/{c['n']}",
                     f"{c['improved']}/{c['worse']}/{c['tied']}", str(c["identical"]),
                     f"{c['base']['unscored']}/{c['best']['unscored']}"])
    blocks.append(B.Table(["judge", "pairs", "base mean", "best mean", "difference", "Wilcoxon p", "bound",
                           "perfect", "better/worse/tied", "identical completions", "unscored base/best"], rows))
    if len(comparisons) > 1:
        gaps = {j: (c["difference"] or {}).get("estimate") for j, c in comparisons.items()}
        blocks.append(B.Para("Judges on the same completions: " + ", ".join(
            f"`{j}` sees {signed(g)}" for j, g in gaps.items()) + ". A gain that only the training judge sees is "
            "coupling to that judge."))
    strata = summary.get("report_by_type") or []
    if strata:
        blocks += [B.Heading(3, "Per instruction type (report split)"), B.Para(
            f"Training judge; p (Holm): the Wilcoxon p-values adjusted across the {len(strata)} types."), B.Table(
            ["type", "n", "base", "best", "difference", "better/worse/tied", "Wilcoxon p", "p (Holm)"],
            [[s["benchmark"], str(s["n"]), _fmt(s["base"]), _fmt(s["best"]), _ci_text(s["difference"], signed=True),
              f"{s['improved']}/{s['worse']}/{s['tied']}", _p(s["pvalue"]), _p(s.get("pvalue_holm"))]
             for s in strata])]
    blocks += _criterion_blocks(summary, settings, B)
    blocks += _hack_blocks(summary["hacking"], first["n"], B)
    blocks.append(B.Image(plots["scores"], "report-split score distributions, base vs best"))
    return blocks


def _criterion_blocks(summary: Mapping[str, Any], settings: SummarySettings, B: Any) -> list[Any]:
    table = summary.get("report_by_criterion") or []
    if not table:
        return []
    alpha = settings.alpha
    moved = [c for c in table if c["pvalue_holm"] is not None and c["pvalue_holm"] < alpha and c["b"] != c["c"]]
    drivers = ("Changed significantly after Holm: " + ", ".join(
        f"{c['criterion']} {'up' if c['c'] > c['b'] else 'down'} ({c['base_passed']} -> {c['best_passed']} of "
        f"{c['n']})" for c in moved) + ".") if moved else \
        f"No criterion changed significantly after Holm (p < {alpha:g})."
    return [B.Heading(3, "Per criterion (report split)"), B.Para(
        "Which criteria drove the change: the training judge's verdict per criterion (checks and judged criteria "
        "alike), pass rate base -> best over the prompts whose rubric has the criterion; a penalty passes when its "
        "flaw is absent. b = passed by base only, c = by best only; exact McNemar on b vs c, Holm across the "
        f"{len(table)} criteria; identical completions count as the same verdict. {drivers}"),
        B.Table(["criterion", "kind", "n", "base pass", "best pass", "b/c", "McNemar p", "p (Holm)"],
                [[c["criterion"], str(c["kind"] or "n/a"), str(c["n"]), _rate(c["base_passed"], c["n"]),
                  _rate(c["best_passed"], c["n"]), "n/a" if c["b"] is None else f"{c['b']}/{c['c']}",
                  _p(c["pvalue"]), _p(c["pvalue_holm"])] for c in table])]


def _rate(k: int, n: int) -> str:
    return "n/a" if not n else f"{k}/{n} ({100 * k / n:.0f}%)"


def _hack_blocks(h: Mapping[str, Any], n: int, B: Any) -> list[Any]:
    length, rho = h["length"], h["correlation"]["rho"]
    lines = [["mean length (tokens)", f"{_fmt(length['base_mean'], 1)} -> {_fmt(length['best_mean'], 1)}",
              "falls by more than half"],
             ["completions repeated across prompts", f"{h['base']['repeated']}/{n} -> {h['repeated']['count']}/{n}",
              "over 10%"],
             ["empty or contained in their prompt", f"{h['base']['contained']}/{n} -> {h['contained']['count']}/{n}",
              "over 10%"],
             ["completions that repeat themselves",
              f"{h['base']['repetitive']}/{n} -> {h['repetitive']['count']}/{n}", "over 10%"],
             ["score-length correlation (best, Spearman)", "n/a" if rho is None else f"{rho:+.2f}", "|rho| over 0.5"]]
    verdict = ("None of these indicators fired." if not h["flags"] else
               "**Signs of reward hacking:** " + "; ".join(h["flags"]) + ".")
    return [B.Heading(3, "Does the gain look like reward hacking?"),
            B.Para(f"Base -> best on the report split's completions. {verdict}"),
            B.Table(["indicator", "base -> best", "flagged when"], lines)]


def _selection_blocks(summary: Mapping[str, Any], settings: SummarySettings, monitor: Sequence[Mapping[str, Any]],
                      plots: Mapping[str, str], B: Any) -> list[Any]:
    selection = summary["selection"]
    base_rec = selection["base"]
    blocks = [B.Heading(2, "Selection split: checkpoints looked at"), B.Para(
        "Each checkpoint against the base model on the selection split, where the best one was picked: the "
        "highest mean among the checkpoints the reward-hacking watch did not flag (among all when it flagged every "
        "one). "
        f"p: paired Wilcoxon vs the base (same tie rule); Holm: adjusted across the {selection['tested']} "
        "checkpoints tested. The best checkpoint's nominal p is optimistic (it won a contest on this split); the "
        "report split above is the honest test." + ("" if base_rec else " No base-model record (step 0): no deltas "
                                                                         "or tests."))]
    table = []
    if base_rec:
        table.append(["0 (base)", _ci_text({"estimate": base_rec.get("mean"), "low": base_rec.get("ci_low"),
                                            "high": base_rec.get("ci_high")}), "", _perfect(base_rec),
                      _fmt(record_length(base_rec), 1), str(base_rec.get("unscored", "")), "", ""])
    for r in selection["rows"]:
        table.append([f"{r['step']}" + (" (best)" if r["best"] else "") + (" (flagged)" if r.get("flagged") else ""),
                      _ci_text({"estimate": r["mean"], "low": r["ci_low"], "high": r["ci_high"]}),
                      signed(r["delta"]), _perfect(r), _fmt(r["mean_length"], 1),
                      str(r["unscored"] if r["unscored"] is not None else ""), _p(r["pvalue"]), _p(r["pvalue_holm"])])
    blocks.append(B.Table(["step", f"mean [{settings.level}% CI]", "delta", "perfect", "mean length", "unscored", "p",
                           "p (Holm)"], table))
    from .watch import watch_lines

    watched = watch_lines(monitor)
    if watched:
        blocks += [B.Heading(2, "Reward-hacking watch"), B.Para(" ".join(watched))]
    if "monitor" in plots:
        blocks.append(B.Image(plots["monitor"], "selection score and length against step"))
    return blocks


def environment_line(env: Mapping[str, Any]) -> str:
    """The run's conditions in one line: seed, torch threads, dtype and bfloat16 kernels, CPU, versions."""
    kernels = env.get("bf16_kernels_used")
    bf16 = "n/a" if kernels is None else ("used" if kernels else "not used") + (
        "" if env.get("bf16_kernels_available") is None else
        f", {'available' if env['bf16_kernels_available'] else 'not available'} on this CPU")
    versions = ", ".join(f"{k} {v}" for k, v in (env.get("versions") or {}).items())
    return ("Run: " + (f"seed {env['seed']}; " if "seed" in env else "")
            + f"torch threads {env.get('torch_threads', 'n/a')}; dtype "
            f"{env.get('dtype', 'n/a')}" + (" with bf16 autocast" if env.get("bf16_autocast") else "")
            + (f", evaluation {env['eval_dtype']}" if env.get("eval_dtype") else "")
            + f" (bfloat16 kernels {bf16}); CPU {env.get('cpu') or 'n/a'}" + (f"; {versions}" if versions else "")
            + ".")


def _facts(summary: Mapping[str, Any]) -> str:
    meta, splits = summary.get("meta") or {}, summary.get("splits") or {}
    best_step = summary["best"].get("step")
    facts = [f"model {meta['model']}" if meta.get("model") else None,
             f"data {meta['dataset']}" if meta.get("dataset") else None,
             ("splits " + ", ".join(f"{k} {v}" for k, v in splits.items())) if splits else None,
             f"best checkpoint: step {best_step}" if best_step is not None else "best checkpoint: n/a",
             f"{summary['checkpoints_looked_at']} checkpoints looked at on the selection split",
             f"training {meta['train_seconds']:.0f} s" if isinstance(meta.get("train_seconds"), int | float) else None]
    return "; ".join(f for f in facts if f) + "."


# ------------------------------------------------------------------------------------------- writing
def write_summary(run_dir: str | Path, *, report_rows: Sequence[Mapping[str, Any]],
                  monitor: Sequence[Mapping[str, Any]] = (), best: Mapping[str, Any] | None = None,
                  metric: str = "score", looked_at: int | None = None, ifeval: Mapping[str, Any] | None = None,
                  splits: Mapping[str, int] | None = None, n_resamples: int = 2000, confidence: float = 0.95,
                  seed: int = 0, meta: Mapping[str, Any] | None = None) -> Path:
    """Write ``summary.md``, ``summary.json``, ``summary.html`` and plots in ``run_dir``; return summary.md's path.

    ``report_rows``: the report split's rows (:func:`report_row`; what ``report_completions.jsonl`` holds), the
    first judge in their ``scores`` being the primary one. ``monitor``: the monitor's records (step 0 is the base
    model); their ``completions`` files (relative to ``run_dir``) give the per-checkpoint paired tests. ``best``:
    the picked checkpoint (``step``, ...). ``looked_at``: checkpoints looked at (default: the monitor's records
    past step 0). ``ifeval``: ``{"dir", "num_prompts", "seed", "comparison": comparison.json's content}`` or
    ``{"base": SystemResults, "trained": SystemResults}`` (then compared and written to ``run_dir/ifeval``).
    ``splits``: rows per split. ``meta``: anything JSON-able to record (model, dataset, max_steps, timings).
    """
    from ... import evaluation as B
    from ...io.journal import write_atomic

    out = Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = list(report_rows)
    if not rows or not any(r.get("scores") for r in rows):
        raise ValueError("write_summary: no report rows with scores (no judge scored the report split)")
    monitor = list(monitor)
    settings = SummarySettings(confidence=confidence, resamples=n_resamples, seed=seed)
    summary = build_summary(out, rows, monitor=monitor, best=best, metric=metric, looked_at=looked_at,
                            ifeval=ifeval, splits=splits, settings=settings, meta=meta)
    plots = {"scores": str(plot_score_distributions(
        out / "plots" / "report_scores.png", {j: (_column(rows, "scores", j, "base"), _column(rows, "scores", j, "best"))
                                              for j in summary["report"]}, metric=metric).relative_to(out))}
    if monitor:
        plots["monitor"] = str(plot_monitor(out / "monitor.png", monitor).relative_to(out))
    ifeval_data = summary["ifeval"]
    if ifeval_data and ifeval_data.get("chart"):
        plots["ifeval"] = ifeval_data["chart"]
    summary["plots"] = plots
    saved = {**summary, "ifeval": None if ifeval_data is None else {k: v for k, v in ifeval_data.items()
                                                                    if k != "modes"}}
    write_atomic(out / SUMMARY_FILE, json.dumps(jsonable(saved), indent=2, ensure_ascii=False,
                                                   allow_nan=False) + "\n")
    blocks: list[Any] = [B.Heading(1, "Rubric-reward training: summary"), B.Para(summary["headline"])]
    if summary["environment"]:
        blocks.append(B.Para(environment_line(summary["environment"])))
    blocks.append(B.Para(_facts(summary)))
    blocks += _report_blocks(summary, settings, plots, B)
    blocks += _selection_blocks(summary, settings, monitor, plots, B)
    if ifeval_data is not None:
        blocks += _ifeval_blocks(ifeval_data, settings.confidence, B)
    write_atomic(out / "summary.md", B.render_markdown(blocks))
    write_atomic(out / "summary.html", B.render_html(blocks, out))
    return out / "summary.md"


def rebuild_summary(run_dir: str | Path, *, n_resamples: int | None = None) -> Path:
    """Write the summary again from a run folder's files (after an interrupted report, or to change settings).

    Reads ``report_completions.jsonl``, ``monitor.jsonl``, ``best/best.json``, ``ifeval/comparison.json`` when
    present, and the previous ``summary.json`` for ``metric``, ``splits``, ``meta`` and the statistics' settings.
    ``python -m rubric_reward.recipes.grpo.summary RUN_DIR`` does the same.
    """
    from .monitor import BEST_DIR, BEST_FILE, read_records

    out = Path(run_dir)
    path = out / REPORT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no report completions to rebuild the summary from")
    rows = read_report_rows(path)
    previous = read_summary(out)
    settings = SummarySettings.of(previous)
    best_file = out / BEST_DIR / BEST_FILE
    best = json.loads(best_file.read_text()) if best_file.is_file() else previous.get("best")
    ifeval = None
    if (out / "ifeval" / "comparison.json").is_file():
        prev = previous.get("ifeval") or {}
        ifeval = {"dir": str(out / "ifeval"), "num_prompts": prev.get("num_prompts"), "seed": prev.get("seed"),
                  "types_wanted": prev.get("types_wanted"),
                  "comparison": json.loads((out / "ifeval" / "comparison.json").read_text(encoding="utf-8"))}
    return write_summary(out, report_rows=rows, monitor=read_records(out / "monitor.jsonl"), best=best,
                         metric=previous.get("metric", "score"), splits=previous.get("splits"), ifeval=ifeval,
                         n_resamples=n_resamples or settings.resamples, confidence=settings.confidence,
                         seed=settings.seed,
                         looked_at=previous.get("checkpoints_looked_at"), meta=previous.get("meta"))


def _main(argv: Sequence[str] | None = None) -> int:
    """``python -m rubric_reward.recipes.grpo.summary RUN_DIR [--bootstrap-resamples N]``: :func:`rebuild_summary`."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m rubric_reward.recipes.grpo.summary",
                                     description="Rebuild summary.md / summary.json of a training run folder.")
    parser.add_argument("run_dir")
    parser.add_argument("--bootstrap-resamples", type=int)
    args = parser.parse_args(argv)
    try:
        path = rebuild_summary(args.run_dir, n_resamples=args.bootstrap_resamples)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
