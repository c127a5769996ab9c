"""IFEval report: accuracy tables for one system, base-vs-trained statistics for two, and their files.

Accuracies (per system, strict and loose, as the reference evaluator reports them):

* prompt level: share of prompts whose every instruction is followed;
* instruction level: share of all instruction instances followed (micro average);
* per instruction type (``"punctuation:no_comma"``) and per category (``"punctuation"``).

Comparison of two systems on the same prompts (:func:`compare`), strict and loose separately:

* deltas are trained minus base;
* per instruction type (and per category), an exact McNemar test pairs the base and trained outcomes
  of each instance of that type, an instance being one (prompt, position in its instruction list);
  ``b`` counts instances only the base follows, ``c`` those only the trained system follows.
  Holm's adjustment runs across the types (and, separately, across the categories);
* overall, prompt level: exact McNemar on the prompts and a paired bootstrap interval of the
  accuracy difference, resampling prompts; instruction level: a paired bootstrap interval that
  resamples whole prompts (clusters) with all their instructions, plus McNemar on the instances
  (which treats them as independent, so read its p-value with that in mind).

Statistics undefined for the data (too few prompts for an interval) are ``None``.

Writers: ``eval_results_{strict,loose}.jsonl`` rows exactly as the reference evaluator writes them
(its ``OutputExample`` fields in its ``dir()`` order, with ``json.dumps`` defaults), ``summary.json``,
``summary.md``, ``comparison.json``, ``comparison.md`` and a PNG bar chart of per-type deltas.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..checks.ifeval import IFEvalResult, IFEvalSummary, evaluate_row, summarize
from ..util.progress import Progress
from ..stats import holm_adjust, mcnemar_exact, paired_bootstrap_ci
from .formatting import jsonable, markdown_table, pct, pvalue

__all__ = [
    "MODES",
    "REFERENCE_FIELDS",
    "GroupComparison",
    "LevelComparison",
    "ModeComparison",
    "SystemResults",
    "compare",
    "comparison_dict",
    "comparison_markdown",
    "evaluate_system",
    "overall_table",
    "summary_dict",
    "summary_markdown",
    "summary_table",
    "write_comparison",
    "write_delta_chart",
    "write_results_jsonl",
    "write_system",
]

Mode = Literal["strict", "loose"]
MODES: tuple[Mode, Mode] = ("strict", "loose")

# The reference's output row: OutputExample's public fields in dir() (alphabetical) order.
REFERENCE_FIELDS = ("follow_all_instructions", "follow_instruction_list", "instruction_id_list", "prompt", "response")


@dataclass(frozen=True)
class SystemResults:
    """One system's strict and loose results on the same prompts, in the same order.

    ``meta`` (where the responses came from, ...) is copied into the system's summary.
    """

    name: str
    strict: list[IFEvalResult]
    loose: list[IFEvalResult]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.strict or len(self.strict) != len(self.loose):
            raise ValueError(f"system {self.name!r}: strict and loose results must be non-empty and aligned")

    def results(self, mode: Mode) -> list[IFEvalResult]:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        return self.strict if mode == "strict" else self.loose

    def summary(self, mode: Mode) -> IFEvalSummary:
        return summarize(self.results(mode))


def evaluate_system(name: str, pairs: Iterable[tuple[Any, str]], *, meta: Mapping[str, Any] | None = None,
                    progress: bool = False) -> SystemResults:
    """Strict and loose evaluation of ``(row, response)`` pairs (e.g. from ``match_responses``)."""
    pairs = list(pairs)
    strict: list[IFEvalResult] = []
    loose: list[IFEvalResult] = []
    with Progress(f"scoring {name}", len(pairs), enabled=progress) as bar:
        for row, response in pairs:
            strict.append(evaluate_row(row, response))
            loose.append(evaluate_row(row, response, loose=True))
            bar.advance()
    return SystemResults(name, strict, loose, dict(meta or {}))


# --------------------------------------------------------------------------------------------- one system


def _tallies(tallies: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: {"accuracy": t.accuracy, "correct": t.correct, "total": t.total} for k, t in tallies.items()}


def summary_dict(system: SystemResults) -> dict[str, Any]:
    """Prompt/instruction-level accuracy x strict/loose, per-type and per-category tallies, and ``meta``."""
    out: dict[str, Any] = {"system": system.name}
    for mode in MODES:
        s = system.summary(mode)
        out["num_prompts"], out["num_instructions"] = s.prompt_level.total, s.instruction_level.total
        out[mode] = {
            "prompt_level": s.prompt_accuracy,
            "instruction_level": s.instruction_accuracy,
            "prompts_followed": s.prompt_level.correct,
            "instructions_followed": s.instruction_level.correct,
            "per_category": _tallies(s.per_category),
            "per_instruction": _tallies(s.per_instruction),
        }
    return {**out, **system.meta}






def summary_table(summary: Mapping[str, Any]) -> str:
    """The headline table (level x strict/loose, in %) of a :func:`summary_dict`."""
    s, lo = summary["strict"], summary["loose"]
    return markdown_table(["level", "strict %", "loose %", "n"], [
        ["prompt", pct(s["prompt_level"]), pct(lo["prompt_level"]), summary["num_prompts"]],
        ["instruction", pct(s["instruction_level"]), pct(lo["instruction_level"]), summary["num_instructions"]],
    ])


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """``summary.md``: the headline table, then per-category and per-instruction-type tables."""
    s, lo = summary["strict"], summary["loose"]
    parts = [f"# IFEval: {summary['system']}", "", summary_table(summary), ""]
    for title, key in (("Per category", "per_category"), ("Per instruction type", "per_instruction")):
        rows = [[name, t["total"], pct(t["accuracy"]), pct(lo[key][name]["accuracy"])] for name, t in s[key].items()]
        parts += [f"## {title}", "", markdown_table([key.split("_")[1], "n", "strict %", "loose %"], rows), ""]
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class GroupComparison:
    """Base vs trained on the instruction instances of one type (or category).

    ``b``: instances only the base follows; ``c``: only the trained system. ``pvalue`` is the exact
    McNemar p-value, ``pvalue_holm`` its Holm adjustment across the groups of the table.
    """

    name: str
    n: int
    base: float
    trained: float
    delta: float
    b: int
    c: int
    pvalue: float
    pvalue_holm: float


@dataclass(frozen=True)
class LevelComparison:
    """An overall accuracy, base vs trained: delta, its bootstrap interval and McNemar's test."""

    n: int
    base: float
    trained: float
    delta: float
    ci_low: float | None
    ci_high: float | None
    b: int
    c: int
    pvalue: float


@dataclass(frozen=True)
class ModeComparison:
    """Strict or loose comparison: overall levels and per-type/per-category tables."""

    mode: str
    prompt_level: LevelComparison
    instruction_level: LevelComparison
    per_instruction: list[GroupComparison]
    per_category: list[GroupComparison]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _prompt_id(result: IFEvalResult) -> Any:
    return result.key if result.key is not None else result.prompt


def _aligned(base: Sequence[IFEvalResult], trained: Sequence[IFEvalResult]) -> list[tuple[IFEvalResult, IFEvalResult]]:
    """Pair results of the same prompt (by key, else prompt text); both sides must cover the same prompts."""
    by_id = {_prompt_id(r): r for r in trained}
    base_ids = [_prompt_id(r) for r in base]
    only_base = [i for i in base_ids if i not in by_id]
    in_base = set(base_ids)
    only_trained = sorted((i for i in by_id if i not in in_base),  # keys as numbers, prompts after them
                          key=lambda i: (isinstance(i, str), i if isinstance(i, int) else 0, str(i)))
    if only_base or only_trained or len(by_id) != len(trained) or len(set(base_ids)) != len(base_ids):
        raise ValueError(
            "base and trained results must cover the same prompts once each: "
            f"{len(only_base)} only in base (e.g. {only_base[:3]}), "
            f"{len(only_trained)} only in trained (e.g. {only_trained[:3]})"
        )
    pairs = []
    for r in base:
        t = by_id[_prompt_id(r)]
        if list(t.instruction_id_list) != list(r.instruction_id_list):
            raise ValueError(f"prompt {_prompt_id(r)!r}: base and trained instruction lists differ")
        pairs.append((r, t))
    return pairs


def _groups(pairs: Sequence[tuple[IFEvalResult, IFEvalResult]], group_of: Callable[[str], str],
            ) -> list[GroupComparison]:
    outcomes: dict[str, tuple[list[bool], list[bool]]] = {}
    for base, trained in pairs:
        for instruction_id, fb, ft in zip(base.instruction_id_list, base.follow_instruction_list,
                                          trained.follow_instruction_list, strict=True):
            b_list, t_list = outcomes.setdefault(group_of(instruction_id), ([], []))
            b_list.append(bool(fb))
            t_list.append(bool(ft))
    names = sorted(outcomes)
    tests = [mcnemar_exact(*outcomes[name]) for name in names]
    adjusted = holm_adjust([t.pvalue for t in tests]) if tests else []
    rows = []
    for name, test, p_holm in zip(names, tests, adjusted, strict=True):
        b_list, t_list = outcomes[name]
        base_acc, trained_acc = sum(b_list) / len(b_list), sum(t_list) / len(t_list)
        rows.append(GroupComparison(name, len(b_list), base_acc, trained_acc, trained_acc - base_acc,
                                    test.b, test.c, test.pvalue, p_holm))
    return rows


def _level(base: list[float], trained: list[float], clusters: list[Any] | None, n_resamples: int,
           confidence: float, seed: int) -> LevelComparison:
    test = mcnemar_exact(base, trained)
    ci = paired_bootstrap_ci(trained, base, n_resamples=n_resamples, confidence=confidence, seed=seed,
                             clusters=clusters)
    base_acc, trained_acc = sum(base) / len(base), sum(trained) / len(trained)
    return LevelComparison(len(base), base_acc, trained_acc, trained_acc - base_acc, ci.low, ci.high,
                           test.b, test.c, test.pvalue)


def compare(base: SystemResults, trained: SystemResults, *, n_resamples: int = 10_000, confidence: float = 0.95,
            seed: int = 0) -> dict[str, ModeComparison]:
    """Base vs trained, strict and loose (see the module docstring for every statistic)."""
    out: dict[str, ModeComparison] = {}
    for mode in MODES:
        pairs = _aligned(base.results(mode), trained.results(mode))
        prompt_base = [float(all(b.follow_instruction_list)) for b, _ in pairs]
        prompt_trained = [float(all(t.follow_instruction_list)) for _, t in pairs]
        inst_base, inst_trained, clusters = [], [], []
        for index, (b, t) in enumerate(pairs):
            inst_base += [float(f) for f in b.follow_instruction_list]
            inst_trained += [float(f) for f in t.follow_instruction_list]
            clusters += [index] * len(b.follow_instruction_list)
        out[mode] = ModeComparison(
            mode=mode,
            prompt_level=_level(prompt_base, prompt_trained, None, n_resamples, confidence, seed),
            instruction_level=_level(inst_base, inst_trained, clusters, n_resamples, confidence, seed),
            per_instruction=_groups(pairs, lambda i: i),
            per_category=_groups(pairs, lambda i: i.split(":", 1)[0]),
        )
    return out


def comparison_dict(base: SystemResults, trained: SystemResults, comparison: Mapping[str, ModeComparison], *,
                    n_resamples: int, confidence: float, seed: int) -> dict[str, Any]:
    """``comparison.json``: both summaries, the comparison per mode, and the statistics' settings."""
    return {
        "base": summary_dict(base),
        "trained": summary_dict(trained),
        **{mode: c.to_dict() for mode, c in comparison.items()},
        "settings": {"bootstrap_resamples": n_resamples, "confidence": confidence, "seed": seed,
                     "delta": "trained - base", "multiple_comparisons": "holm"},
    }






def overall_table(comparison: Mapping[str, ModeComparison], *, confidence: float = 0.95) -> str:
    """Prompt- and instruction-level deltas per mode, with bootstrap intervals and McNemar counts."""
    level = int(round(100 * confidence))
    rows = []
    for mode, c in comparison.items():
        for name, lv in (("prompt", c.prompt_level), ("instruction", c.instruction_level)):
            ci = f"[{pct(lv.ci_low, signed=True)}, {pct(lv.ci_high, signed=True)}]"
            rows.append([f"{name} ({mode})", lv.n, pct(lv.base), pct(lv.trained), pct(lv.delta, signed=True), ci,
                         lv.b, lv.c, pvalue(lv.pvalue)])
    return markdown_table(["level", "n", "base %", "trained %", "delta", f"{level}% CI", "b", "c", "p"], rows)


def comparison_markdown(comparison: Mapping[str, ModeComparison], *, confidence: float = 0.95,
                        alpha: float = 0.05) -> str:
    """``comparison.md``: overall deltas with intervals, then per-type and per-category tables."""
    level = int(round(100 * confidence))
    parts = ["# IFEval: base vs trained", "",
             f"Deltas are trained - base, in points. CI: {level}% paired bootstrap (prompts resampled). "
             f"McNemar: exact; b = only base follows, c = only trained follows. "
             f"`*`: Holm-adjusted p < {alpha}.", "", overall_table(comparison, confidence=confidence), ""]
    for mode, c in comparison.items():
        for title, groups in (("instruction type", c.per_instruction), ("category", c.per_category)):
            rows = [[g.name, g.n, pct(g.base), pct(g.trained), pct(g.delta, signed=True), g.b, g.c, pvalue(g.pvalue),
                     pvalue(g.pvalue_holm) + (" *" if g.pvalue_holm < alpha else "")] for g in groups]
            parts += [f"## Per {title} ({mode})", "",
                      markdown_table([title, "n", "base %", "trained %", "delta", "b", "c", "p", "p (Holm)"], rows), ""]
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------- files




def write_results_jsonl(path: str | Path, results: Iterable[IFEvalResult]) -> Path:
    """One reference-format row per result (fields :data:`REFERENCE_FIELDS`, in that order)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for r in results:
            row = {
                "follow_all_instructions": bool(r.follow_all_instructions),
                "follow_instruction_list": [bool(f) for f in r.follow_instruction_list],
                "instruction_id_list": list(r.instruction_id_list),
                "prompt": r.prompt,
                "response": r.response,
            }
            handle.write(json.dumps(row) + "\n")
    return path


def _write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return path


def write_system(out_dir: str | Path, system: SystemResults) -> dict[str, Any]:
    """Write ``eval_results_{strict,loose}.jsonl``, ``summary.json`` and ``summary.md``; return the summary."""
    out = Path(out_dir)
    write_results_jsonl(out / "eval_results_strict.jsonl", system.strict)
    write_results_jsonl(out / "eval_results_loose.jsonl", system.loose)
    summary = summary_dict(system)
    _write_text(out / "summary.json", json.dumps(summary, indent=2))
    _write_text(out / "summary.md", summary_markdown(summary))
    return summary


def write_delta_chart(path: str | Path, comparison: ModeComparison, *, alpha: float = 0.05) -> Path:
    """Horizontal bars of per-type accuracy deltas (points); ``*`` marks Holm-adjusted p < ``alpha``; when no
    type moved, the chart says "no differences" instead."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted(comparison.per_instruction, key=lambda g: g.delta)
    deltas = [100 * g.delta for g in groups]
    nothing = not any(deltas)  # nothing moved: say so instead of an empty chart with a legend of nothing
    fig, ax = plt.subplots(figsize=(8, 2 if nothing else 0.32 * len(groups) + 1.6))
    try:
        if nothing:
            ax.set_axis_off()
            ax.text(0.5, 0.5, f"no differences: all {len(groups)} instruction types unchanged ({comparison.mode})",
                    ha="center", va="center", transform=ax.transAxes)
        else:
            _draw_deltas(ax, comparison, groups, deltas, alpha)
            fig.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", dpi=120)
    finally:
        plt.close(fig)
    return path


FEW_INSTRUCTIONS = 5  # per-type bars from fewer instructions than this are drawn apart and do not set the scale


def _draw_deltas(ax: Any, comparison: ModeComparison, groups: Sequence[GroupComparison], deltas: Sequence[float],
                 alpha: float) -> None:
    """One bar per type, labelled with its n. Types with fewer than :data:`FEW_INSTRUCTIONS` instructions are
    grey and hatched, sorted below the others, and do not set the axis (a one-prompt type moves by 100 points):
    a bar past the axis is clipped at its edge and its value is in its label."""
    from matplotlib.patches import Patch

    order = sorted(range(len(groups)), key=lambda i: (groups[i].n >= FEW_INSTRUCTIONS, deltas[i]))
    groups, deltas = [groups[i] for i in order], [deltas[i] for i in order]
    few = [g.n < FEW_INSTRUCTIONS for g in groups]
    scaled = [abs(d) for d, f in zip(deltas, few) if not f] or [abs(d) for d in deltas]
    span = max(scaled + [1.0])
    shown = [max(-1.08 * span, min(1.08 * span, d)) for d in deltas]
    colors = ["#bdbdbd" if f else "#2e7d32" if d > 0 else "#c62828" if d < 0 else "#9e9e9e"
              for d, f in zip(deltas, few)]
    bars = ax.barh(range(len(groups)), shown, color=colors)
    for bar, f in zip(bars, few):
        if f:
            bar.set_hatch("//")
    ax.set_yticks(range(len(groups)), [f"{g.name} (n={g.n}" + (f", {d:+.0f}" if f else "") + ")"
                                       for g, d, f in zip(groups, deltas, few)], fontsize=7)
    ax.axvline(0, color="black", linewidth=0.8)
    for y, (d, g) in enumerate(zip(shown, groups)):
        if g.pvalue_holm < alpha:
            ax.text(d + (0.02 * span if d >= 0 else -0.02 * span), y, "*", va="center",
                    ha="left" if d >= 0 else "right", fontsize=11, fontweight="bold")
    ax.set_xlim(-1.15 * span, 1.15 * span)
    handles = [Patch(color="#2e7d32", label="trained better"), Patch(color="#c62828", label="trained worse")]
    if any(few):
        handles.append(Patch(facecolor="#bdbdbd", hatch="//", label=f"n < {FEW_INSTRUCTIONS}: too few to read "
                             "(not scaled; value in label)"))
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    pl = comparison.prompt_level
    ci = f"[{pct(pl.ci_low, signed=True)}, {pct(pl.ci_high, signed=True)}]"
    ax.set_xlabel("instruction accuracy delta per type, trained - base (points)")
    ax.set_title(f"IFEval per-type deltas ({comparison.mode}, n = instructions of the type); prompt-level "
                 f"{pct(pl.delta, signed=True)} {ci} on {pl.n} prompts\n"
                 f"* Holm-adjusted McNemar p < {alpha}", fontsize=9)


def write_comparison(out_dir: str | Path, base: SystemResults, trained: SystemResults, *,
                     n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0,
                     alpha: float = 0.05) -> dict[str, ModeComparison]:
    """Compare, then write ``comparison.json``, ``comparison.md`` and ``comparison.png`` (strict deltas)."""
    out = Path(out_dir)
    comparison = compare(base, trained, n_resamples=n_resamples, confidence=confidence, seed=seed)
    data = comparison_dict(base, trained, comparison, n_resamples=n_resamples, confidence=confidence, seed=seed)
    _write_text(out / "comparison.json", json.dumps(jsonable(data), indent=2))
    _write_text(out / "comparison.md", comparison_markdown(comparison, confidence=confidence, alpha=alpha))
    write_delta_chart(out / "comparison.png", comparison["strict"], alpha=alpha)
    return comparison
