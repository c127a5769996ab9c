"""Run reports: ``report.md`` and a self-contained ``report.html`` with PNG plots in ``plots/``.

The report is built once as a list of blocks (headings, paragraphs, tables, images) and rendered to
Markdown (images referenced relatively) and HTML (images embedded as base64). Plots use matplotlib's
object API on the Agg canvas (no pyplot global state), imported only here. Undefined statistics
print as "n/a".
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..io.journal import write_atomic
from .formatting import ci_text, fmt, markdown_table
from .run_metrics import RunData, compute_metrics, item_scores, load_run

__all__ = ["Block", "Heading", "Image", "Para", "Table", "build_report", "rebuild_report", "render_html",
           "render_markdown", "write_report"]

MAX_PLOTTED = 40  # criteria in the bar chart and with a confusion plot (the most-labelled ones)


# ---------------------------------------------------------------------------- blocks
@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True, slots=True)
class Para:
    text: str


@dataclass(frozen=True, slots=True)
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]


@dataclass(frozen=True, slots=True)
class Image:
    path: str  # relative to the run folder
    alt: str


Block = Heading | Para | Table | Image


def _test(t: Mapping[str, Any] | None) -> str:
    return "n/a" if not t else f"{fmt(t['statistic'])} (p={fmt(t['pvalue'])}, n={t['n']})"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "criterion"


# ---------------------------------------------------------------------------- plots
def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})


def _plot_confusion(c: Mapping[str, Any], path: Path) -> None:
    import numpy as np

    labels = c["confusion"]["labels"]
    matrix = np.asarray(c["confusion"]["matrix"])
    fig = _figure(1.2 + 0.8 * len(labels), 1.0 + 0.7 * len(labels))
    ax = fig.subplots()
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("judge")
    ax.set_ylabel("human")
    ax.set_title(f"{c['name']} (n={c['n']})")
    top = matrix.max() if matrix.size else 0
    for (i, j), v in np.ndenumerate(matrix):
        ax.text(j, i, str(v), ha="center", va="center", color="white" if top and v > top / 2 else "black")
    _save(fig, path)


def _plot_bars(criteria: Sequence[Mapping[str, Any]], path: Path) -> None:
    import numpy as np

    names = [c["name"] for c in criteria]
    x = np.arange(len(names))
    acc = [c["exact"] if c["exact"] is not None else np.nan for c in criteria]
    kappa = [c["kappa"] if c["kappa"] is not None else np.nan for c in criteria]
    fig = _figure(max(4.0, 1.0 + 0.9 * len(names)), 3.6)
    ax = fig.subplots()
    ax.bar(x - 0.2, acc, 0.4, label="exact accuracy")
    ax.bar(x + 0.2, kappa, 0.4, label="Cohen's kappa")
    for i, c in enumerate(criteria):
        ci = c.get("exact_ci") or {}
        if ci.get("low") is not None:
            ax.plot([i - 0.2, i - 0.2], [ci["low"], ci["high"]], color="black", linewidth=1)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylim(min(-0.1, np.nanmin(kappa) - 0.05 if not np.all(np.isnan(kappa)) else -0.1), 1.05)
    ax.set_ylabel("agreement with human labels")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, fontsize="small", frameon=False)
    _save(fig, path)


def _plot_scatter(pairs: Sequence[tuple[float, float]], path: Path) -> None:
    fig = _figure(4.2, 4.0)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="judge = human")
    ax.scatter([h for _, h in pairs], [j for j, _ in pairs], alpha=0.6, s=24)
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("human score")
    ax.set_ylabel("judge score")
    ax.set_title(f"item scores (n={len(pairs)})")
    ax.legend(loc="upper left", fontsize="small")
    _save(fig, path)


def _plot_hist(judge: Sequence[float], human: Sequence[float], path: Path) -> None:
    fig = _figure(5.0, 3.4)
    ax = fig.subplots()
    bins = [i / 10 for i in range(11)]
    ax.hist(judge, bins=bins, alpha=0.6, label=f"judge (n={len(judge)})")
    if human:
        ax.hist(human, bins=bins, alpha=0.6, label=f"human (n={len(human)})")
    ax.set_xlabel("score")
    ax.set_ylabel("items")
    ax.legend(fontsize="small")
    _save(fig, path)


# ---------------------------------------------------------------------------- content
def build_report(run_dir: str | Path, metrics: Mapping[str, Any], run: RunData) -> list[Block]:
    """Write the plots under ``run_dir/plots`` and return the report's blocks."""
    run_dir = Path(run_dir)
    plots = run_dir / "plots"
    if plots.exists():
        for old in plots.glob("*.png"):
            old.unlink()
    blocks = _header(run_dir, metrics, run.manifest)
    blocks += _overall(metrics["overall"])
    blocks += _scores(metrics["scores"], run, plots)
    blocks += _criteria(metrics["criteria"], run_dir, plots)
    blocks += _failed(run.records)
    return blocks


def _header(run_dir: Path, m: Mapping[str, Any], man: Mapping[str, Any]) -> list[Block]:
    """The title, what was judged and what it cost, and the run's identity."""
    blocks: list[Block] = [Heading(1, f"Evaluation report: {man.get('data', run_dir.name)}")]
    judges = ", ".join(
        f"{j['name']} ({j['model']}" + (f" @ {', '.join(j['endpoints'])}" if j.get("endpoints") else "") + ")"
        for j in man.get("judges") or ()
    ) or "n/a"
    items = m["items"]
    counts = man.get("counts") or {}
    status = man.get("status", "n/a")
    blocks.append(Para(
        f"Status: **{status}**. Items: {items['n']} judged of {counts.get('items', man.get('n_items', 'n/a'))} "
        f"({items['ok']} ok, {items['failed']} failed, {items['scored']} scored, {items['labelled']} with human "
        f"labels, {items['groups']} groups). Cost of these results: ${m['cost']:.4f}; spent over all invocations: "
        f"${man.get('spent_total', 0.0):.4f}."
    ))
    if status == "stopped_by_budget":
        blocks.append(Para("The run stopped at its cost cap; rerun the same command to continue. "
                           "Statistics below cover the items judged so far."))
    blocks.append(Para(
        f"Judges: {judges}. Run {man.get('run', 'n/a')}, rubric-reward {man.get('version', 'n/a')}, "
        f"prompt templates {man.get('template_hash', 'n/a')}, seed {man.get('seed', 'n/a')}."
    ))
    return blocks


def _overall(o: Mapping[str, Any]) -> list[Block]:
    """Agreement with the human labels over every labelled decision."""
    return [
        Heading(2, "Overall agreement with human labels"),
        Table(["statistic", "value"], [
            ["decisions (item x criterion with a human label)", fmt(o["n_decisions"])],
            ["failed judge verdicts (excluded)", fmt(o["n_failed"])],
            [f"exact accuracy [95% CI, clusters: {o['ci_clusters']}]", ci_text(o["exact_ci"])],
            ["Cohen's kappa, binary criteria pooled", fmt(o["kappa_binary_pooled"])],
            ["mean exact accuracy over criteria", fmt(o["macro_exact"])],
            ["mean Cohen's kappa over criteria", fmt(o["macro_kappa"])],
            ["mean adjacent accuracy (ordinal)", fmt(o["macro_adjacent"])],
            ["mean quadratic-weighted kappa (ordinal)", fmt(o["macro_qwk"])],
            ["judge abstention rate", fmt(o["judge_abstain_rate"])],
            ["inter-judge Krippendorff's alpha (mean over criteria)", fmt(o["krippendorff_alpha_mean"])],
        ]),
    ]


def _scores(s: Mapping[str, Any], run: RunData, plots: Path) -> list[Block]:
    """Judge scores against the human labels' scores, with their scatter and histograms."""
    blocks: list[Block] = [
        Heading(2, "Scores: judge vs human"),
        Para("The human score is the score of the human labels under the same rubric and scoring."),
        Table(["pairs", "judge mean", "human mean", "mean bias (judge - human) [95% CI]", "Spearman rho",
               "Kendall tau", "EMD"],
              [[fmt(s["n_pairs"]), fmt(s["judge_mean"]), fmt(s["human_mean"]), ci_text(s["mean_bias_ci"]),
                _test(s["spearman"]), _test(s["kendall"]), fmt(s["emd"])]]),
    ]
    pairs = item_scores(run.records, run.rubrics, run.scoring)
    both = [(j, h) for j, h in pairs if j is not None and h is not None]
    judge_scores = [j for j, _ in pairs if j is not None]
    if both:
        _plot_scatter(both, plots / "score_scatter.png")
        blocks.append(Image("plots/score_scatter.png", "judge score vs human score, with the diagonal"))
    if judge_scores:
        _plot_hist(judge_scores, [h for _, h in pairs if h is not None], plots / "score_hist.png")
        blocks.append(Image("plots/score_hist.png", "score histograms"))
    return blocks


def _criteria(crit: Sequence[Mapping[str, Any]], run_dir: Path, plots: Path) -> list[Block]:
    """Per criterion: agreement, per-option precision and recall, confusion matrices (plotted for the
    ``MAX_PLOTTED`` criteria with the most labelled decisions)."""
    blocks: list[Block] = [
        Heading(2, "Per criterion"),
        Table(["criterion", "kind", "weight", "n", "failed", "judge abstained", "exact [95% CI]", "adjacent",
               "kappa", "QWK", "Spearman", "Kendall", "mean bias", "EMD", "judges' alpha"],
              [[c["name"], c["kind"], fmt(c["weight"], 2), fmt(c["n"]), fmt(c["n_failed"]),
                fmt(c["n_judge_abstained"]), ci_text(c["exact_ci"]), fmt(c["adjacent"]), fmt(c["kappa"]),
                fmt(c["qwk"]), _test(c["spearman"]), _test(c["kendall"]), fmt(c["mean_bias"]), fmt(c["emd"]),
                fmt((c["krippendorff_alpha"] or {}).get("alpha"))] for c in crit]),
    ]
    labelled = [c for c in crit if c["n"]]
    plotted = labelled
    if len(labelled) > MAX_PLOTTED:
        keep = {id(c) for c in sorted(labelled, key=lambda c: -c["n"])[:MAX_PLOTTED]}
        plotted = [c for c in labelled if id(c) in keep]
        blocks.append(Para(f"Plots show the {MAX_PLOTTED} criteria with the most labelled decisions "
                           f"(of {len(labelled)})."))
    if plotted:
        _plot_bars(plotted, plots / "criteria_accuracy_kappa.png")
        blocks.append(Image("plots/criteria_accuracy_kappa.png", "per-criterion exact accuracy and kappa"))

    rows = [
        [c["name"], label, fmt(po["support"]), fmt(po["precision"]), fmt(po["recall"])]
        for c in labelled for label, po in c["per_option"].items()
    ]
    if rows:
        blocks += [Heading(2, "Per-option precision and recall"),
                   Para("Recall of an option: of the decisions humans gave this label, the share the judge "
                        "gave it too; precision: of the judge's uses of the label, the share humans agree with."),
                   Table(["criterion", "option", "human support", "precision", "recall"], rows)]

    with_matrix = [c for c in plotted if c.get("confusion")]
    if with_matrix:
        blocks.append(Heading(2, "Confusion matrices (rows: human, columns: judge)"))
        for c in with_matrix:
            name = f"plots/confusion_{_slug(c['name'])}.png"
            _plot_confusion(c, run_dir / name)
            labels, matrix = c["confusion"]["labels"], c["confusion"]["matrix"]
            blocks += [Heading(3, c["name"]),
                       Table(["human \\ judge", *labels],
                             [[lab, *map(str, row)] for lab, row in zip(labels, matrix, strict=True)]),
                       Image(name, f"confusion matrix for {c['name']}")]
    return blocks


def _failed(records: Sequence[Mapping[str, Any]]) -> list[Block]:
    """The items whose judging failed (a rerun retries them)."""
    failed = [r for r in records if r.get("status") == "failed"]
    if not failed:
        return []
    return [Heading(2, f"Failed items ({len(failed)}; rerun the same command to retry them)"),
            Table(["id", "key", "error"], [
                [str(r.get("id")), r["key"][:12], str((r.get("result") or {}).get("error") or "")[:200]]
                for r in failed[:50]
            ])]


# ---------------------------------------------------------------------------- rendering
def render_markdown(blocks: Sequence[Block]) -> str:
    out = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * b.level} {b.text}")
        elif isinstance(b, Para):
            out.append(b.text)
        elif isinstance(b, Table):
            out.append(markdown_table(b.headers, b.rows))
        elif isinstance(b, Image):
            out.append(f"![{b.alt}]({b.path})")
    return "\n\n".join(out) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}
th{background:#f3f3f3}img{max-width:100%;display:block;margin:1em 0}"""


def render_html(blocks: Sequence[Block], run_dir: Path) -> str:
    def inline(text: str) -> str:
        return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(text))

    body = []
    title = "Evaluation report"
    for b in blocks:
        if isinstance(b, Heading):
            if b.level == 1:
                title = b.text
            body.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            body.append(f"<p>{inline(b.text)}</p>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in b.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(b, Image):
            data = base64.b64encode((run_dir / b.path).read_bytes()).decode()
            body.append(f'<img alt="{html.escape(b.alt)}" src="data:image/png;base64,{data}">')
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_report(run_dir: str | Path, *, metrics: Mapping[str, Any] | None = None,
                 run: RunData | None = None) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and ``plots/*.png``; returns their paths."""
    run_dir = Path(run_dir)
    run = run if run is not None else load_run(run_dir)
    if metrics is None:
        metrics = compute_metrics(run.records, run.rubrics, scoring=run.scoring)
    blocks = build_report(run_dir, metrics, run)
    write_atomic(run_dir / "report.md", render_markdown(blocks))
    write_atomic(run_dir / "report.html", render_html(blocks, run_dir))
    paths = {"markdown": run_dir / "report.md", "html": run_dir / "report.html"}
    paths.update({p.stem: p for p in sorted((run_dir / "plots").glob("*.png"))})
    return paths


def rebuild_report(run_dir: str | Path) -> dict[str, Path]:
    """Recompute ``metrics.json`` from the run folder's files and rewrite the report."""
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    metrics = compute_metrics(run.records, run.rubrics, scoring=run.scoring)
    write_atomic(run_dir / "metrics.json", json.dumps(metrics, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    paths = write_report(run_dir, metrics=metrics, run=run)
    return {"metrics": run_dir / "metrics.json", **paths}
