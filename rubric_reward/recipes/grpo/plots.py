"""The run's charts: ``monitor.png`` (selection score and length against step) and the report split's score
histograms. Axes never claim more than the data: scores in [0, 1] are drawn on a 0-1 axis (other ranges are
named in the axis label), lengths and counts start at zero."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .comparison import best_record, record_length, score_value

__all__ = ["plot_monitor", "plot_score_distributions"]


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", metadata={"Software": None})
    tmp.replace(path)  # a reader (or a crash) never sees half a PNG
    return path


def _score_axis(ax: Any, values: Sequence[float], label: str) -> None:
    """0-1 when every value lies there; otherwise matplotlib's range, said in the label."""
    if values and min(values) >= 0.0 and max(values) <= 1.0:
        ax.set_ylim(0.0, 1.02)
        ax.set_ylabel(label)
    elif values:
        ax.set_ylabel(f"{label} (axis {min(values):.2f} to {max(values):.2f}, not from 0)")
    else:
        ax.set_ylabel(label)


def plot_monitor(path: str | Path, records: Sequence[Mapping[str, Any]], *, title: str | None = None) -> Path:
    """``monitor.png``: every monitored step's selection mean with its interval (top; the base model as a
    dashed line, the best checkpoint starred; with a second judge, the training judge's score beside it and the
    checkpoints the reward-hacking watch flagged shaded) and mean length in tokens on an axis from zero (bottom).
    Reads the monitor's records (``step``, ``mean``, ``ci_low``, ``ci_high``, ``mean_length_tokens``,
    ``metric``); steps without a mean are named in the title."""
    path = Path(path)
    recs = sorted(records, key=lambda r: int(r["step"]))
    fig = _figure(6.4, 5.2)
    top, bottom = fig.subplots(2, 1, sharex=True)
    metric = next((r.get("metric") for r in recs if r.get("metric")), "score")
    shown = [r for r in recs if r.get("mean") is not None]
    drawn: list[float] = []
    if shown:
        xs = [int(r["step"]) for r in shown]
        ys = [float(r["mean"]) for r in shown]
        lows = [r["ci_low"] if r.get("ci_low") is not None else m for r, m in zip(shown, ys)]
        highs = [r["ci_high"] if r.get("ci_high") is not None else m for r, m in zip(shown, ys)]
        drawn = ys + lows + highs
        second = any(r.get("training_mean") is not None for r in shown)
        top.errorbar(xs, ys, yerr=[[m - lo for m, lo in zip(ys, lows)], [hi - m for m, hi in zip(ys, highs)]],
                     marker="o", capsize=3,
                     label=f"selection mean {metric} (interval)" + (", second judge" if second else ""))
        trained = [(int(r["step"]), float(r["training_mean"])) for r in shown if r.get("training_mean") is not None]
        if trained:  # the watch's other judge: a gain only it sees is coupling to it
            top.plot([s for s, _ in trained], [m for _, m in trained], marker="s", color="#ff7f0e",
                     label="training judge")
            drawn += [m for _, m in trained]
        flagged = [int(r["step"]) for r in shown if r.get("watch")]
        for i, step in enumerate(flagged):  # a checkpoint the reward-hacking watch flagged
            top.axvline(step, color="#d62728", alpha=0.25, linewidth=6,
                        label="flagged by the reward-hacking watch" if i == 0 else None)
        base = next((m for s, m in zip(xs, ys) if s == 0), None)
        if base is not None:
            top.axhline(base, color="grey", linestyle="--", linewidth=1, label="base model")
        best = best_record(shown)
        if best is not None:
            best_step, best_mean = int(best["step"]), float(best["mean"])
            top.plot([best_step], [best_mean], marker="*", markersize=14, color="#d62728", linestyle="none",
                     label=f"best (step {best_step})")
        top.legend(fontsize="small", loc="lower right")
    else:
        top.text(0.5, 0.5, "no scored step yet", ha="center", va="center", transform=top.transAxes)
    _score_axis(top, drawn, metric)
    missing = [int(r["step"]) for r in recs if r.get("mean") is None]
    top.set_title(title or f"selection split: mean {metric} per checkpoint ({len(recs)} monitored steps"
                  + (f"; no score at step {', '.join(map(str, missing))})" if missing else ")"), fontsize=9)
    lengths = [(int(r["step"]), record_length(r)) for r in recs if record_length(r) is not None]
    if lengths:
        bottom.plot([s for s, _ in lengths], [v for _, v in lengths], marker="o", color="#2ca02c",
                    label="mean completion length")
        bottom.legend(fontsize="small", loc="lower right")
        bottom.set_ylim(0, 1.1 * max(max(v for _, v in lengths), 1.0))
    bottom.set_ylabel("mean length (tokens)")
    bottom.set_title("selection split: mean completion length", fontsize=9)
    bottom.set_xlabel("step")
    from matplotlib.ticker import MaxNLocator

    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _save(fig, path)


def plot_score_distributions(path: str | Path, comparisons: Mapping[str, tuple[Sequence[Any], Sequence[Any]]],
                             *, metric: str = "score") -> Path:
    """Histograms of per-prompt scores on 0-1, base vs best, one panel per judge (``{judge: (base, best)}``)."""
    path = Path(path)
    fig = _figure(4.2 * max(1, len(comparisons)), 3.4)
    axes = fig.subplots(1, max(1, len(comparisons)), squeeze=False)[0]
    bins = [i / 10 for i in range(11)]
    for ax, (judge, (base, best)) in zip(axes, comparisons.items()):
        for label, values in (("base", base), ("best", best)):
            kept = [v for v in (score_value(x, metric) for x in values) if v is not None]
            mean = f"{sum(kept) / len(kept):.3f}" if kept else "n/a"
            ax.hist(kept, bins=bins, alpha=0.55, label=f"{label} (n={len(kept)}, mean {mean})")
        ax.set_xlim(0, 1)
        ax.set_xlabel(metric)
        ax.set_ylabel("prompts")
        ax.set_title(f"report split: {metric} per prompt, base vs best\n(scored by {judge})", fontsize=9)
        ax.legend(fontsize="small")
    return _save(fig, path)
