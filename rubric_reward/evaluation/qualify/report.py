"""``card.md`` and its one plot (``card.png``), from a card's ``card.json`` data."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import BANDS

__all__ = ["card_markdown", "plot_card"]

_DO = {
    "ok": "train on it",
    "unscorable": "read the failures (judge errors, answers off the menu) or why the judge abstains; fix the "
                  "endpoint or rewrite the criterion",
    "noisy": "rewrite the criterion (one checkable statement), add few-shot exemplars, or use a stronger judge",
    "position_bias": "keep option shuffling on, use logprob verdicts or an ensemble, or a stronger judge",
    "sign_blind": "phrase the penalty as a positive criterion (RubricHub: positive-only weights train better)",
    "disagrees": "compare the judge's verdicts with the gold labels: rewrite the criterion or change the judge",
    "persuadable": "keep the guard on (injection: screen), and prefer a judge that ignores text to the grader",
}


def _f(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _ci(iv: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not iv or iv.get("estimate") is None:
        return "n/a"
    if iv.get("low") is None:
        return _f(iv["estimate"], digits)
    return f"{iv['estimate']:.{digits}f} [{iv['low']:.{digits}f}, {iv['high']:.{digits}f}]"


def _status(c: Mapping[str, Any]) -> str:
    s = c.get("status", "ok")
    return s if isinstance(s, str) else ", ".join(s)


def _criteria_table(data: Mapping[str, Any]) -> list[str]:
    lines = ["| criterion | weight | status | variance (band) | lean to a position | failed / abstained | "
             "kappa vs gold | persuaded |", "|---|---|---|---|---|---|---|---|"]
    for name, c in data["criteria"].items():
        if not c.get("judged", True):
            lines.append(f"| {name} | {c['weight']:g} | {_status(c)} | programmatic check: not judged | | | | |")
            continue
        cons, pos, agr = c.get("consistency") or {}, c.get("position") or {}, c.get("agreement") or {}
        pers = c.get("persuasion") or {}
        weight = f"{c['weight']:g}" + (" (monitor)" if c.get("monitor") else "")
        lines.append(
            f"| {name} | {weight} | **{_status(c)}** | {_f(cons.get('variance'))} ({cons.get('band') or 'n/a'}) | "
            f"{_ci(pos.get('lean'), 2)} | {_f(c.get('failure_rate'), 2)} / {_f(c.get('abstention_rate'), 2)} | "
            f"{_ci(agr.get('kappa_ci'), 2) if agr.get('kappa_ci') else _f(agr.get('kappa'), 2)} | "
            f"{_f(pers.get('persuaded'), 2)} |")
    return lines


def _reward_lines(data: Mapping[str, Any]) -> list[str]:
    lines = ["| reward | test-retest (ICC) | judge noise share of within-group variance | flat groups | "
             "unscored | mean |", "|---|---|---|---|---|---|"]
    for which, r in data["reward"].items():
        if r is None:
            lines.append(f"| {which} | nothing left to score | | | | |")
            continue
        lines.append(f"| {which} | {_ci(r.get('test_retest'), 2)} | {_ci(r.get('noise_share'), 2)} | "
                     f"{_f(r.get('flat_groups'), 2)} | {_f(r.get('unscored_rate'), 2)} | {_f(r.get('mean_reward'))} |")
    return lines


def card_markdown(data: Mapping[str, Any], *, plot: str | None = "card.png") -> str:
    """The card as Markdown: the verdict, the criteria table, the reward's reliability, the cost, what to do."""
    s, cost = data["settings"], data["cost"]
    judges = ", ".join(j["name"] for j in data["judge"])
    rubric = data["rubric"] if isinstance(data["rubric"], str) else ", ".join(data["rubric"])
    lines = [f"# Judge card: {judges} on rubric {rubric}", "",
             f"**Overall: {data['overall']}.** {s['responses']} responses in {s['groups']} groups, each judged "
             f"{s['repeats']} times (temperature {', '.join(f'{t:g}' for t in s['temperature'])}); "
             f"{s['gold_responses']} with gold labels; intervals at {s['confidence']:.0%}.", ""]
    lines += _criteria_table(data) + [""]
    if plot:
        lines += [f"![verdict variance per criterion]({plot})", ""]
    by_sign = data.get("agreement_by_sign") or {}
    if any(by_sign.values()):
        lines += ["Agreement with the gold labels by the sign of the weight (consensus verdicts):", ""]
        for sign, a in by_sign.items():
            if a:
                lines.append(f"- {sign}-weight criteria: accuracy {_ci(a.get('accuracy_ci'), 2)}, kappa "
                             f"{_ci(a.get('kappa_ci'), 2) if a.get('kappa_ci') else 'n/a'} (n {a['n']})")
        lines.append("")
    lines += ["## The reward for GRPO", ""] + _reward_lines(data) + [""]
    lines += [f"Per 1,000 rewards: {_f(cost['calls_per_1000'], 0)} judge calls, {_f(cost['tokens_per_1000'], 0)} "
              f"tokens, ${_f(cost['cost_per_1000'], 4)}, {_f(cost['seconds_per_1000'], 1)} s of judging wall time "
              f"(call latency p50 {_f(cost['latency_p50_s'], 3)} s, p95 {_f(cost['latency_p95_s'], 3)} s).", ""]
    lines += ["## What to do", ""]
    seen = [st for c in data["criteria"].values()
            for st in ([c.get("status", "ok")] if isinstance(c.get("status", "ok"), str) else c["status"])]
    for st in dict.fromkeys(seen):
        lines.append(f"- `{st}`: {_DO.get(st, '')}")
    if data["overall"] == "usable_with_changes":
        lines.append("- train on `qualified_rubric.yaml`: the failing criteria are monitors there (judged and logged, "
                     "adding nothing to the reward)")
    elif data["overall"] == "unusable":
        lines.append("- this judge cannot carry this rubric as a reward: change the judge or rewrite the rubric")
    return "\n".join(lines) + "\n"


def plot_card(path: str | Path, data: Mapping[str, Any]) -> Path:
    """``card.png``: each judged criterion's verdict variance over the judgings, against Autorubric's bands,
    coloured by status."""
    from matplotlib.figure import Figure

    judged = [(n, c) for n, c in data["criteria"].items() if c.get("judged", True) and c.get("consistency")]
    fig = Figure(figsize=(max(4.8, 0.55 * len(judged) + 2), 3.8), dpi=100, layout="constrained")
    ax = fig.subplots()
    values = [c["consistency"]["variance"] or 0.0 for _, c in judged]
    colours = ["tab:green" if c.get("status") == "ok" else "tab:red" for _, c in judged]
    ax.bar(range(len(judged)), values, color=colours)
    for upper, name in BANDS[:-1]:
        ax.axhline(upper, linestyle="--", linewidth=0.8, color="grey")
        ax.text(len(judged) - 0.5, upper, f" {name} up to {upper:g}", va="bottom", ha="right", fontsize=7)
    ax.set_xticks(range(len(judged)), [n for n, _ in judged], rotation=45, ha="right", fontsize=8)
    ax.set_ylim(0.0, max(0.26, max(values, default=0.0) * 1.1))
    ax.set_ylabel("verdict variance (0.25: a coin flip)")
    ax.set_title(f"verdict variance over {data['settings']['repeats']} judgings per criterion "
                 "(red: not ok)", fontsize=9)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", metadata={"Software": None})
    tmp.replace(path)
    return path
