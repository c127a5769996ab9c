"""The final report of a rubric-reward RL run: base vs best checkpoint, judged on a split never used for picking.

:func:`write_summary` writes ``summary.md``, ``summary.json`` and ``summary.html`` (plots embedded) plus PNG
plots into the run folder:

* **Report split** (the final test; never used for selection): per judge, the mean score of the base model
  and of the best checkpoint on the same prompts with bootstrap intervals, the paired bootstrap interval of
  the difference (best - base), the paired Wilcoxon signed-rank test, perfect-score counts and (when given)
  mean completion lengths. Because the best checkpoint was picked on the selection split, the report split's
  p-value needs no adjustment for the pick; the conservative bound ``min(1, m x p)`` for ``m`` checkpoints
  looked at (what Holm gives the smallest of ``m`` p-values) is printed beside it, for readers who want it.
* **A second judge** (optional): the same completions scored by another judge; the gap between the judges
  shows how much of the gain is coupling to the training judge.
* **Selection split** (the monitor's records): every checkpoint looked at against the base model, with the
  paired Wilcoxon p-value per checkpoint and its Holm adjustment across all checkpoints looked at. This is the
  Autorubric paper's situation (best of ten on one split): the nominal p-value of the best one is optimistic.
* **IFEval transfer** (optional): ``rubric_reward.evaluation.ifeval_report``'s comparison (strict/loose, prompt and
  instruction level with bootstrap intervals and McNemar, per-type deltas with Holm).

:func:`plot_monitor` draws ``monitor.png`` (selection score with its interval, and mean length, against step);
the checkpoint monitor calls it after every save. Statistics come from ``rubric_reward.stats``; an undefined one
is ``None`` in JSON and "n/a" in Markdown, never NaN.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..evaluation import ci_text as _ci_text
from ..evaluation import fmt as _fmt
from ..evaluation import interval_dict as _interval
from ..evaluation import jsonable as _jsonable
from ..evaluation import pvalue as _p

__all__ = ["compare_paired", "load_selection_scores", "plot_monitor", "plot_score_distributions",
           "rebuild_summary", "selection_table", "write_summary"]

PERFECT = 1.0 - 1e-9


# ------------------------------------------------------------------------------------------- statistics
def _value(x: Any, metric: str = "score") -> float | None:
    """A per-prompt value as float or None (unscored).

    Numbers (None/NaN = unscored) are taken as they are. A ``ScoreResult`` gives its ``metric`` attribute
    (``score``, ``expected_score`` or ``raw_score``; the plain score when that one is missing). A reward record
    (``.result``, ``.reward``, ``.guard``) gives its result's value, or the reward a guard gave it.
    """
    if x is None or isinstance(x, numbers.Real):
        return _finite(x)
    if hasattr(x, "verdicts"):  # ScoreResult
        value = getattr(x, metric, None)
        return _finite(x.score if value is None else value)
    if hasattr(x, "result"):  # RewardRecord
        if x.result is not None:
            return _value(x.result, metric)
        return _finite(x.reward) if getattr(x, "guard", None) else None
    raise TypeError(f"cannot read a score from a {type(x).__name__}")


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None




def compare_paired(base: Sequence[Any], best: Sequence[Any], *, metric: str = "score",
                   base_lengths: Sequence[float | None] | None = None,
                   best_lengths: Sequence[float | None] | None = None, n_resamples: int = 2000,
                   confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Base vs best on the same prompts: aligned lists of numbers (None = unscored), ``ScoreResult`` s or
    reward records (``.result``, ``.reward``, ``.guard``): their ``metric`` value is compared (the plain
    score where that is missing; a guarded record's reward).

    Returns a JSON-able dict: ``n`` prompts, ``pairs`` (both scored), per system ``mean`` with a bootstrap
    interval, ``perfect`` (plain score 1; for numbers, value 1) and ``unscored`` counts and ``mean_length``;
    ``difference`` (best - base: paired bootstrap interval of the mean difference over complete pairs),
    ``wilcoxon`` (statistic, pvalue, n) and ``improved``/``worse``/``tied`` pair counts. Undefined values are None.
    """
    from ..stats import bootstrap_ci, paired_bootstrap_ci, wilcoxon_signed_rank

    base, best = list(base), list(best)
    a = [_value(x, metric) for x in base]
    b = [_value(x, metric) for x in best]
    if len(a) != len(b):
        raise ValueError(f"base and best score lists differ in length ({len(a)} != {len(b)}): they must hold the "
                         "same prompts in the same order")
    if not a:
        raise ValueError("no scores to compare")

    def system(raw: list[Any], values: list[float | None], lengths: Sequence[float | None] | None
               ) -> dict[str, Any]:
        kept = [v for v in values if v is not None]
        plain = [_value(x, "score") for x in raw]
        ci = bootstrap_ci(kept, n_resamples=n_resamples, confidence=confidence, seed=seed) if kept else None
        return {"mean": _mean(values), "ci": None if ci is None else _interval(ci),
                "perfect": sum(1 for v in plain if v is not None and v >= PERFECT), "scored": len(kept),
                "unscored": len(values) - len(kept),
                "mean_length": None if lengths is None else _mean([None if x is None else float(x) for x in lengths])}

    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    out: dict[str, Any] = {"n": len(a), "pairs": len(pairs), "base": system(base, a, base_lengths),
                           "best": system(best, b, best_lengths), "difference": None, "wilcoxon": None,
                           "improved": sum(1 for x, y in pairs if y > x), "worse": sum(1 for x, y in pairs if y < x),
                           "tied": sum(1 for x, y in pairs if y == x), "confidence": confidence}
    if pairs:
        xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
        out["difference"] = _interval(paired_bootstrap_ci(ys, xs, n_resamples=n_resamples, confidence=confidence,
                                                          seed=seed))
        test = wilcoxon_signed_rank(ys, xs)
        out["wilcoxon"] = None if test is None else {"statistic": test.statistic, "pvalue": test.pvalue, "n": test.n}
    return out


def load_selection_scores(run_dir: str | Path, records: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per monitored step, ``{prompt id: value}`` read from the record's ``completions`` file (relative to
    ``run_dir``; rows with ``id`` and ``value``). Steps whose file is missing are left out."""
    out: dict[int, dict[str, Any]] = {}
    for rec in records:
        name = rec.get("completions")
        if not name:
            continue
        path = Path(run_dir) / name
        if not path.is_file():
            continue
        values: dict[str, Any] = {}
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line after a crash
            values[str(row.get("id", n))] = _value(row.get("value", row.get("score")))
        out[int(rec["step"])] = values
    return out


def selection_table(records: Sequence[Mapping[str, Any]], scores: Mapping[int, Mapping[str, Any]] | None = None,
                    ) -> dict[str, Any]:
    """Every checkpoint looked at (step > 0) against the base (step 0) on the selection split.

    ``scores``: per step ``{prompt id: value}`` (:func:`load_selection_scores`); with them each checkpoint gets
    a paired Wilcoxon p-value against the base and the Holm adjustment across all checkpoints looked at.
    Returns ``{"rows": [...], "looked_at": m, "best_step": s, "base": record or None}``.
    """
    from ..stats import holm_adjust, wilcoxon_signed_rank

    scores = scores or {}
    base = next((r for r in records if int(r["step"]) == 0), None)
    checkpoints = [r for r in records if int(r["step"]) > 0]
    best = max((r for r in checkpoints if r.get("mean") is not None), key=lambda r: (r["mean"], -int(r["step"])),
               default=None)
    base_scores = scores.get(0)
    rows = []
    for rec in checkpoints:
        step = int(rec["step"])
        pvalue = None
        mine = scores.get(step)
        if base_scores and mine:
            common = [k for k in base_scores if k in mine]
            if common:
                test = wilcoxon_signed_rank([mine[k] for k in common], [base_scores[k] for k in common])
                pvalue = None if test is None else test.pvalue
        delta = None if rec.get("mean") is None or base is None or base.get("mean") is None \
            else rec["mean"] - base["mean"]
        rows.append({"step": step, "mean": rec.get("mean"), "ci_low": rec.get("ci_low"),
                     "ci_high": rec.get("ci_high"), "delta": delta, "perfect": rec.get("perfect"),
                     "n": rec.get("n"), "unscored": rec.get("unscored"), "mean_length": _length(rec),
                     "judge_cost": rec.get("judge_cost"), "pvalue": pvalue, "pvalue_holm": None,
                     "best": best is not None and step == int(best["step"])})
    tested = [i for i, r in enumerate(rows) if r["pvalue"] is not None]
    if tested:
        for i, p in zip(tested, holm_adjust([rows[i]["pvalue"] for i in tested])):
            rows[i]["pvalue_holm"] = p
    return {"rows": rows, "looked_at": len(checkpoints), "tested": len(tested),
            "best_step": None if best is None else int(best["step"]), "base": None if base is None else dict(base)}


def _length(rec: Mapping[str, Any]) -> float | None:
    value = rec.get("mean_length_tokens", rec.get("mean_length"))
    return None if value is None else float(value)


# ------------------------------------------------------------------------------------------- plots
def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", metadata={"Software": None})
    tmp.replace(path)  # a reader (or a crash) never sees half a PNG
    return path


def plot_monitor(path: str | Path, records: Sequence[Mapping[str, Any]], *, title: str | None = None) -> Path:
    """``monitor.png``: selection mean score with its interval (top) and mean length in tokens (bottom) against
    step; the base model (step 0) as a dashed line, the best checkpoint starred; with a second judge, the
    training judge's score beside it and the checkpoints the reward-hacking watch flagged shaded. Reads the monitor's records
    (``step``, ``mean``, ``ci_low``, ``ci_high``, ``mean_length_tokens``, ``metric``); records without a mean
    are drawn as gaps."""
    path = Path(path)
    recs = sorted(records, key=lambda r: int(r["step"]))
    fig = _figure(6.4, 5.2)
    top, bottom = fig.subplots(2, 1, sharex=True)
    steps = [int(r["step"]) for r in recs]
    means = [r.get("mean") for r in recs]
    metric = next((r.get("metric") for r in recs if r.get("metric")), "score")
    shown = [(s, m, r) for s, m, r in zip(steps, means, recs) if m is not None]
    if shown:
        xs = [s for s, _, _ in shown]
        ys = [m for _, m, _ in shown]
        lows = [m - r["ci_low"] if r.get("ci_low") is not None else 0.0 for _, m, r in shown]
        highs = [r["ci_high"] - m if r.get("ci_high") is not None else 0.0 for _, m, r in shown]
        second = any(r.get("training_mean") is not None for _, _, r in shown)
        top.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=3,
                     label=f"selection mean {metric}" + (" (second judge)" if second else ""))
        trained = [(s, r["training_mean"]) for s, _, r in shown if r.get("training_mean") is not None]
        if trained:  # the watch's other judge: a gain only it sees is coupling to it
            top.plot([s for s, _ in trained], [m for _, m in trained], marker="s", color="#ff7f0e",
                     label="training judge")
        for s_, _, r in shown:
            if r.get("watch"):
                top.axvline(s_, color="#d62728", alpha=0.25, linewidth=6)
        base = next((m for s, m, _ in shown if s == 0), None)
        if base is not None:
            top.axhline(base, color="grey", linestyle="--", linewidth=1, label="base model")
        checkpoints = [(s, m) for s, m, _ in shown if s > 0]
        if checkpoints:
            best_step, best_mean = max(checkpoints, key=lambda t: (t[1], -t[0]))
            top.plot([best_step], [best_mean], marker="*", markersize=14, color="#d62728", linestyle="none",
                     label=f"best (step {best_step})")
        top.legend(fontsize="small", loc="best")
    top.set_ylabel(metric)
    top.set_title(title or f"checkpoint monitor ({len(recs)} points)")
    lengths = [(s, _length(r)) for s, r in zip(steps, recs) if _length(r) is not None]
    if lengths:
        bottom.plot([s for s, _ in lengths], [v for _, v in lengths], marker="o", color="#2ca02c")
    bottom.set_ylabel("mean length (tokens)")
    bottom.set_xlabel("step")
    from matplotlib.ticker import MaxNLocator

    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _save(fig, path)


def plot_score_distributions(path: str | Path, comparisons: Mapping[str, tuple[Sequence[Any], Sequence[Any]]],
                             *, metric: str = "score") -> Path:
    """Histograms of per-prompt scores, base vs best, one panel per judge (``{judge: (base, best)}``)."""
    path = Path(path)
    fig = _figure(4.2 * max(1, len(comparisons)), 3.4)
    axes = fig.subplots(1, max(1, len(comparisons)), squeeze=False)[0]
    bins = [i / 10 for i in range(11)]
    for ax, (judge, (base, best)) in zip(axes, comparisons.items()):
        for label, values in (("base", base), ("best", best)):
            kept = [v for v in (_value(x, metric) for x in values) if v is not None]
            ax.hist(kept, bins=bins, alpha=0.55, label=f"{label} (n={len(kept)}, mean "
                                                      f"{_fmt(_mean(kept))})")
        ax.set_xlabel("score")
        ax.set_ylabel("prompts")
        ax.set_title(judge)
        ax.legend(fontsize="small")
    return _save(fig, path)


# ------------------------------------------------------------------------------------------- summary






def write_summary(
    run_dir: str | Path,
    *,
    report_scores: Mapping[str, Mapping[str, Sequence[Any]]],
    monitor: Sequence[Mapping[str, Any]] = (),
    best: Mapping[str, Any] | None = None,
    metric: str = "score",
    looked_at: int | None = None,
    report_lengths: Mapping[str, Sequence[float | None]] | None = None,
    ifeval: Mapping[str, Any] | None = None,
    splits: Mapping[str, int] | None = None,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``summary.md``, ``summary.json``, ``summary.html`` and plots in ``run_dir``; return summary.md's path.

    ``report_scores``: ``{judge name: {"base": [...], "best": [...]}}`` per-prompt scores on the report split
    (numbers, ``ScoreResult`` s or reward records: pass the records to count perfect scores on the plain score
    when ``metric`` is ``expected_score``), the same prompts in the same order for both systems (the first judge is the primary one, e.g. ``"judge"``;
    a second, e.g. ``"second_judge"``, scores the same completions). ``monitor``: the monitor's records (step 0
    is the base model); their ``completions`` files (relative to ``run_dir``) give the per-checkpoint paired
    tests. ``best``: the picked checkpoint (``step``, ...). ``looked_at``: checkpoints looked at (default: the
    monitor's records past step 0). ``report_lengths``: ``{"base": [...], "best": [...]}`` completion lengths in
    tokens. ``ifeval``: ``{"dir", "num_prompts", "seed", "comparison": comparison.json's content}`` or
    ``{"base": SystemResults, "trained": SystemResults}`` (then compared and written to ``run_dir/ifeval``).
    ``splits``: rows per split. ``meta``: anything JSON-able to record (model, dataset, timings).
    """
    from ..journal import write_atomic
    from ..evaluation import Heading, Image, Para, Table, render_html, render_markdown

    out = Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not report_scores:
        raise ValueError("write_summary: report_scores is empty (no judge scored the report split)")
    lengths = report_lengths or {}
    comparisons = {}
    for judge, systems in report_scores.items():
        missing = {"base", "best"} - set(systems)
        if missing:
            raise ValueError(f"write_summary: report_scores[{judge!r}] lacks {sorted(missing)}")
        comparisons[judge] = compare_paired(systems["base"], systems["best"], metric=metric,
                                            base_lengths=lengths.get("base"),
                                            best_lengths=lengths.get("best"), n_resamples=n_resamples,
                                            confidence=confidence, seed=seed)
    monitor = list(monitor)
    selection = selection_table(monitor, load_selection_scores(out, monitor))
    m = looked_at if looked_at is not None else selection["looked_at"]
    for c in comparisons.values():
        p = (c["wilcoxon"] or {}).get("pvalue")
        c["pvalue_bound_over_looked_at"] = None if p is None or not m else min(1.0, m * p)
    ifeval_data = _ifeval(out, ifeval, n_resamples, confidence, seed) if ifeval else None

    plots: dict[str, str] = {}
    plots["scores"] = str(plot_score_distributions(
        out / "plots" / "report_scores.png",
        {j: (s["base"], s["best"]) for j, s in report_scores.items()}, metric=metric).relative_to(out))
    if monitor:
        plots["monitor"] = str(plot_monitor(out / "monitor.png", monitor).relative_to(out))
    if ifeval_data and ifeval_data.get("chart"):
        plots["ifeval"] = ifeval_data["chart"]

    best_step = (best or {}).get("step", selection["best_step"])
    summary = {
        "metric": metric, "best": dict(best or {"step": best_step}), "splits": dict(splits or {}),
        "report": comparisons, "checkpoints_looked_at": m, "selection": selection,
        "ifeval": None if ifeval_data is None else {k: v for k, v in ifeval_data.items() if k != "modes"},
        "plots": plots, "settings": {"bootstrap_resamples": n_resamples, "confidence": confidence, "seed": seed,
                                     "difference": "best - base", "selection_adjustment": "holm"},
        "meta": dict(meta or {}),
    }
    write_atomic(out / "summary.json", json.dumps(_jsonable(summary), indent=2, ensure_ascii=False,
                                                   allow_nan=False) + "\n")

    level = int(round(100 * confidence))
    blocks: list[Any] = [Heading(1, "Rubric-reward training: summary")]
    meta = dict(meta or {})
    facts = [f"model {meta['model']}" if meta.get("model") else None,
             f"data {meta['dataset']}" if meta.get("dataset") else None,
             ("splits " + ", ".join(f"{k} {v}" for k, v in splits.items())) if splits else None,
             f"best checkpoint: step {best_step}" if best_step is not None else "best checkpoint: n/a",
             f"{m} checkpoints looked at on the selection split",
             f"training {meta['train_seconds']:.0f} s" if isinstance(meta.get("train_seconds"), int | float) else None]
    blocks.append(Para("; ".join(f for f in facts if f) + "."))

    blocks.append(Heading(2, "Report split: base vs best"))
    blocks.append(Para(
        f"The report split was never used to pick the checkpoint, so its p-value needs no correction for the pick. "
        f"Scores are the reward's `{metric}` per prompt; difference = best - base over prompts both systems got "
        f"scored; {level}% bootstrap intervals ({n_resamples} resamples, seed {seed}); Wilcoxon signed-rank, "
        f"two-sided. \"bound\" = min(1, {m} x p), what Holm would give the smallest of {m} p-values: the "
        "correction the result would need had the checkpoint been picked on this split."))
    rows = []
    for judge, c in comparisons.items():
        w = c["wilcoxon"] or {}
        rows.append([judge, str(c["pairs"]), _ci_text(c["base"]["ci"]), _ci_text(c["best"]["ci"]),
                     _ci_text(c["difference"], signed=True), _p(w.get("pvalue")),
                     _p(c["pvalue_bound_over_looked_at"]),
                     f"{c['base']['perfect']}/{c['n']} -> {c['best']['perfect']}/{c['n']}",
                     f"{c['improved']}/{c['worse']}/{c['tied']}",
                     f"{c['base']['unscored']}/{c['best']['unscored']}"])
    blocks.append(Table(["judge", "pairs", "base mean", "best mean", "difference", "Wilcoxon p", "bound",
                         "perfect", "better/worse/tied", "unscored base/best"], rows))
    first = next(iter(comparisons.values()))
    if first["base"]["mean_length"] is not None or first["best"]["mean_length"] is not None:
        blocks.append(Para(f"Mean completion length on the report split: base {_fmt(first['base']['mean_length'], 1)}"
                           f" -> best {_fmt(first['best']['mean_length'], 1)} tokens."))
    if len(comparisons) > 1:
        names = list(comparisons)
        gaps = [comparisons[j]["difference"]["estimate"] if comparisons[j]["difference"] else None for j in names]
        blocks.append(Para(
            f"Judges: `{names[0]}` sees a difference of {_fmt(gaps[0])}, " + ", ".join(
                f"`{j}` {_fmt(g)}" for j, g in zip(names[1:], gaps[1:])) +
            " on the same completions. A gain that only the training judge sees is coupling to that judge."))
    blocks.append(Image(plots["scores"], "report-split score distributions, base vs best"))

    blocks.append(Heading(2, "Selection split: checkpoints looked at"))
    base_rec = selection["base"]
    blocks.append(Para(
        "Each checkpoint against the base model on the selection split, where the best one was picked. "
        f"p: paired Wilcoxon vs the base; Holm: adjusted across the {selection['tested']} checkpoints tested. "
        "The best checkpoint's nominal p is optimistic (it won a contest on this split); the report split above "
        "is the honest test." + ("" if base_rec else " No base-model record (step 0): no deltas or tests.")))
    table = []
    if base_rec:
        table.append(["0 (base)", _ci_text({"estimate": base_rec.get("mean"), "low": base_rec.get("ci_low"),
                                            "high": base_rec.get("ci_high")}), "", _perfect(base_rec),
                      _fmt(_length(base_rec), 1), str(base_rec.get("unscored", "")), "", ""])
    for r in selection["rows"]:
        table.append([f"{r['step']}" + (" (best)" if r["best"] else ""),
                      _ci_text({"estimate": r["mean"], "low": r["ci_low"], "high": r["ci_high"]}),
                      "n/a" if r["delta"] is None else f"{r['delta']:+.3f}", _perfect(r), _fmt(r["mean_length"], 1),
                      str(r["unscored"] if r["unscored"] is not None else ""), _p(r["pvalue"]), _p(r["pvalue_holm"])])
    blocks.append(Table(["step", f"mean [{level}% CI]", "delta", "perfect", "mean length", "unscored", "p",
                         "p (Holm)"], table))
    from .watch import watch_lines

    watched = watch_lines(monitor)
    if watched:
        blocks.append(Heading(2, "Reward-hacking watch"))
        blocks.append(Para(" ".join(watched)))
    if "monitor" in plots:
        blocks.append(Image(plots["monitor"], "selection score and length against step"))

    if ifeval_data is not None:
        blocks.extend(_ifeval_blocks(ifeval_data, confidence, Heading, Para, Table, Image))

    write_atomic(out / "summary.md", render_markdown(blocks))
    write_atomic(out / "summary.html", render_html(blocks, out))
    return out / "summary.md"


def _perfect(rec: Mapping[str, Any]) -> str:
    if rec.get("perfect") is None:
        return "n/a"
    return f"{rec['perfect']}/{rec['n']}" if rec.get("n") is not None else str(rec["perfect"])


def _ifeval(out: Path, ifeval: Mapping[str, Any], n_resamples: int, confidence: float, seed: int) -> dict[str, Any]:
    """Normalise the IFEval input to the comparison dict (comparison.json's content) plus where its files are."""
    from ..evaluation import write_comparison

    if "comparison" not in ifeval and {"base", "trained"} <= set(ifeval):
        folder = out / "ifeval"
        write_comparison(folder, ifeval["base"], ifeval["trained"], n_resamples=n_resamples, confidence=confidence,
                         seed=seed)
        data = json.loads((folder / "comparison.json").read_text(encoding="utf-8"))
        info = {"dir": str(folder), "num_prompts": ifeval["base"].summary("strict").prompt_level.total, "seed": seed}
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
    strict = modes.get("strict", {})
    types = strict.get("per_instruction", [])
    return {**info, "chart": chart, "modes": modes,
            "overall": {mode: {lv: c[lv] for lv in ("prompt_level", "instruction_level")} for mode, c in modes.items()},
            "types": len(types), "types_non_negative": sum(1 for g in types if g["delta"] >= 0),
            "types_significant_holm": sum(1 for g in types if g["pvalue_holm"] < 0.05)}


def _ifeval_blocks(data: Mapping[str, Any], confidence: float, Heading: Any, Para: Any, Table: Any,
                   Image: Any) -> list[Any]:
    from ..evaluation import GroupComparison, LevelComparison, ModeComparison, overall_table

    modes = {mode: ModeComparison(mode, LevelComparison(**c["prompt_level"]), LevelComparison(**c["instruction_level"]),
                                  [GroupComparison(**g) for g in c["per_instruction"]],
                                  [GroupComparison(**g) for g in c["per_category"]])
             for mode, c in data["modes"].items()}
    blocks = [Heading(2, "IFEval transfer: base vs best"),
              Para(f"{data.get('num_prompts', 'n/a')} IFEval prompts (seed {data.get('seed', 'n/a')}); deltas are "
                   "best - base in points; exact McNemar; per-type p-values Holm-adjusted across types. "
                   f"{data['types_non_negative']} of {data['types']} instruction types (strict) moved non-negatively; "
                   f"{data['types_significant_holm']} significantly after Holm (p < 0.05)."
                   + (f" Files: {data['dir']}." if data.get("dir") else ""))]
    # overall_table renders its own markdown; split it back into rows for our renderer.
    lines = overall_table(modes, confidence=confidence).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    body = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    blocks.append(Table(header, body))
    if "strict" in modes:
        rows = [[g.name, str(g.n), f"{100 * g.base:.1f}", f"{100 * g.trained:.1f}", f"{100 * g.delta:+.1f}",
                 str(g.b), str(g.c), _p(g.pvalue), _p(g.pvalue_holm)] for g in modes["strict"].per_instruction]
        blocks += [Heading(3, "Per instruction type (strict)"),
                   Table(["type", "n", "base %", "best %", "delta", "b", "c", "p", "p (Holm)"], rows)]
    if data.get("chart"):
        blocks.append(Image(data["chart"], "IFEval per-type deltas"))
    return blocks


def rebuild_summary(run_dir: str | Path, *, n_resamples: int | None = None) -> Path:
    """Write the summary again from a run folder's files (after an interrupted report, or to change settings).

    Reads ``report_completions.jsonl`` (one row per report prompt with ``<judge>_base`` / ``<judge>_best``
    values), ``monitor.jsonl``, ``best/best.json``, ``ifeval/comparison.json`` when present, and the previous
    ``summary.json`` for ``metric``, ``splits``, ``meta`` and the statistics' settings.
    ``python -m rubric_reward.rl.report RUN_DIR`` does the same.
    """
    out = Path(run_dir)
    path = out / "report_completions.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no report completions to rebuild the summary from")
    scores: dict[str, dict[str, list[Any]]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {n + 1}: not valid JSON: {exc.msg}") from None
        for key, value in row.items():
            judge, _, system = key.rpartition("_")
            if judge and system in ("base", "best") and (value is None or isinstance(value, int | float)):
                scores.setdefault(judge, {"base": [], "best": []})[system].append(value)
    if not scores:
        raise ValueError(f"{path}: no <judge>_base / <judge>_best columns")
    previous: dict[str, Any] = {}
    if (out / "summary.json").is_file():
        previous = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    settings = previous.get("settings", {})
    monitor: list[dict[str, Any]] = []
    if (out / "monitor.jsonl").is_file():
        by_step = {}
        for line in (out / "monitor.jsonl").read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                by_step[int(rec["step"])] = rec
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line
        monitor = [by_step[k] for k in sorted(by_step)]
    best = json.loads((out / "best" / "best.json").read_text()) if (out / "best" / "best.json").is_file() \
        else previous.get("best")
    ifeval = None
    if (out / "ifeval" / "comparison.json").is_file():
        prev = previous.get("ifeval") or {}
        ifeval = {"dir": str(out / "ifeval"), "num_prompts": prev.get("num_prompts"), "seed": prev.get("seed"),
                  "comparison": json.loads((out / "ifeval" / "comparison.json").read_text(encoding="utf-8"))}
    return write_summary(out, report_scores=scores, monitor=monitor, best=best,
                         metric=previous.get("metric", "score"), splits=previous.get("splits"), ifeval=ifeval,
                         n_resamples=n_resamples or settings.get("bootstrap_resamples", 2000),
                         confidence=settings.get("confidence", 0.95), seed=settings.get("seed", 0),
                         meta=previous.get("meta"))


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m rubric_reward.rl.report",
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
