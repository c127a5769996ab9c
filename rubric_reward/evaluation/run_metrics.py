"""Agreement between a judge and human labels, per criterion and overall, from a run's results.

Conventions (the numbers in ``metrics.json`` mean exactly this):

* A *decision* is one (item, criterion) with a human label. A judge verdict that failed (an error)
  is left out of every statistic and counted in ``n_failed``; it is not a disagreement.
* A judge abstention (CANNOT_ASSESS / N/A) is a label of its own: it agrees only with a human
  abstention. Ordinal statistics (adjacent accuracy, QWK, Spearman, Kendall) use only decisions
  where both sides chose an option.
* Score-level statistics compare the judge's score for an item with the score of the human labels
  under the same rubric and scoring config (``score_verdicts``); an item needs a label for every
  criterion to have a human score.
* Confidence intervals are bootstrap percentile intervals; decisions are resampled in clusters by
  group id when the data has groups (several responses per student), else by item for pooled
  statistics (several criteria per response).
* Undefined statistics are ``None`` (printed "n/a"), never NaN.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import stats
from ..io.journal import Journal
from ..results import Verdict
from ..rubric import Criterion, CriterionKind, Rubric
from ..arithmetic import ScoringConfig, score_verdicts

__all__ = ["RunData", "compute_metrics", "human_score", "item_scores", "load_run"]

Record = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RunData:
    """A run folder read back: its records (last entry per key), rubrics by fingerprint, manifest."""

    records: list[dict[str, Any]]
    rubrics: dict[str, Rubric]
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def scoring(self) -> ScoringConfig:
        raw = ((self.manifest.get("config") or {}).get("scoring")) or {}
        return ScoringConfig(**raw)


def load_run(run_dir: str | Path) -> RunData:
    """Read ``results.jsonl`` (last entry per key, current run fingerprint only), ``rubrics.json``
    and ``manifest.json`` from a run folder."""
    run_dir = Path(run_dir)
    if not (run_dir / "results.jsonl").exists():
        raise ValueError(f"{run_dir}: no results.jsonl; is this a run folder?")
    manifest: dict[str, Any] = {}
    if (run_dir / "manifest.json").exists():
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    run = manifest.get("run")
    records = [e for e in Journal(run_dir / "results.jsonl").latest().values() if run is None or e.get("run") == run]
    rubrics: dict[str, Rubric] = {}
    if (run_dir / "rubrics.json").exists():
        raw = json.loads((run_dir / "rubrics.json").read_text(encoding="utf-8"))
        rubrics = {fp: Rubric.from_obj(d, source=f"rubrics.json[{fp}]") for fp, d in raw.items()}
    missing = {e.get("rubric_fingerprint") for e in records} - set(rubrics)
    if missing:
        raise ValueError(f"{run_dir}: rubrics.json lacks rubric(s) {sorted(map(str, missing))}")
    records.sort(key=lambda e: (e.get("row") is None, e.get("row") or 0))
    return RunData(records, rubrics, manifest)


# ---------------------------------------------------------------------------- helpers
def _verdicts(record: Record) -> dict[str, dict[str, Any]]:
    return {v["criterion"]: v for v in (record.get("result") or {}).get("verdicts") or ()}


def _judge_label(v: Mapping[str, Any] | None) -> str | None:
    """The judge's label, or None when the verdict is missing or failed."""
    if v is None or v.get("error") or v.get("label") is None:
        return None
    return str(v["label"])


def human_score(record: Record, rubric: Rubric, scoring: ScoringConfig = ScoringConfig()) -> float | None:
    """The score of the human labels under the judge's rubric and scoring; None if a label is missing."""
    labels = record.get("labels") or {}
    if not labels:
        return None
    verdicts = []
    for c in rubric.criteria:
        label = labels.get(c.name)
        if label is None:
            return None
        value = c.value_of(label) if c.is_judged else (1.0 if label == "MET" else 0.0)
        verdicts.append(Verdict(c.name, label, value, abstained=value is None, judge="human"))
    return score_verdicts(rubric, verdicts, scoring).score


def item_scores(records: Sequence[Record], rubrics: Mapping[str, Rubric],
                scoring: ScoringConfig = ScoringConfig()) -> list[tuple[float | None, float | None]]:
    """``(judge score, human score)`` per record."""
    return [(r.get("score"), human_score(r, rubrics[r["rubric_fingerprint"]], scoring)) for r in records]


def _order(c: Criterion) -> list[str]:
    """Option labels from lowest to highest value (ties keep the rubric's order)."""
    return [o.label for o in sorted(c.options, key=lambda o: o.value)]


def _ci(values: Sequence[float], clusters: Sequence[str] | None, confidence: float, n_resamples: int,
        seed: int) -> dict[str, Any] | None:
    if not values:
        return None
    return stats.bootstrap_ci(values, clusters=clusters, confidence=confidence, n_resamples=n_resamples,
                              seed=seed).to_dict()


def _test(result: Any) -> dict[str, Any] | None:
    return None if result is None else {"statistic": result.statistic, "pvalue": result.pvalue, "n": result.n}


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


# ---------------------------------------------------------------------------- criteria
@dataclass
class _Group:
    rubric: str
    criterion: Criterion
    pred: list[str | None] = field(default_factory=list)  # judge labels (None = failed)
    gold: list[str] = field(default_factory=list)  # human labels
    clusters: list[str] = field(default_factory=list)  # group id, else the item key
    votes: list[list[str | None]] = field(default_factory=list)
    n_judged: int = 0  # records judged on this criterion, labelled or not
    n_judge_abstained: int = 0


def _groups(records: Sequence[Record], rubrics: Mapping[str, Rubric]) -> dict[str, _Group]:
    raw: dict[tuple[Any, ...], _Group] = {}
    for r in records:
        rubric = rubrics[r["rubric_fingerprint"]]
        verdicts = _verdicts(r)
        labels = r.get("labels") or {}
        for c in rubric.criteria:
            gkey = (rubric.name, c.name, c.kind.value, c.labels)
            g = raw.setdefault(gkey, _Group(rubric.name, c))
            v = verdicts.get(c.name)
            if v is not None and not v.get("error"):
                g.n_judged += 1
                g.n_judge_abstained += bool(v.get("abstained"))
            if c.name not in labels:
                continue
            g.pred.append(_judge_label(v))
            g.gold.append(labels[c.name])
            g.clusters.append(str(r["group"]) if r.get("group") is not None else r["key"])
            g.votes.append([None if (x.get("error") or x.get("abstained")) else x.get("label")
                            for x in (v or {}).get("votes") or ()])
    names = [g.criterion.name for g in raw.values()]
    out: dict[str, _Group] = {}
    for g in raw.values():
        name = g.criterion.name if names.count(g.criterion.name) == 1 else f"{g.rubric}/{g.criterion.name}"
        while name in out:
            name += "'"
        out[name] = g
    return out


def _criterion_metrics(name: str, g: _Group, *, grouped: bool, confidence: float, n_resamples: int,
                       seed: int) -> dict[str, Any]:
    c = g.criterion
    labels = [o.label for o in c.options] if c.is_judged else ["MET", "UNMET"]
    used = {x for x in (*g.pred, *g.gold) if x is not None}
    if c.abstain_label and c.abstain_label in used:  # list the abstention label only if used
        labels.append(c.abstain_label)
    labels += sorted(used - set(labels))  # labels the rubric no longer has: shown, not fatal
    out: dict[str, Any] = {
        "name": name, "criterion": c.name, "rubric": g.rubric, "kind": c.kind.value, "weight": c.weight,
        "labels": labels, "n_labelled": len(g.gold), "n_judged": g.n_judged,
        "n_failed": sum(p is None for p in g.pred), "n_judge_abstained": g.n_judge_abstained,
    }
    complete = [(p, h, cl) for p, h, cl in zip(g.pred, g.gold, g.clusters, strict=True) if p is not None]
    if not g.gold:
        return {**out, "n": 0, "exact": None, "exact_ci": None, "adjacent": None, "kappa": None, "qwk": None,
                "spearman": None, "kendall": None, "mean_bias": None, "emd": None, "per_option": {},
                "confusion": None, "krippendorff_alpha": _alpha(g)}
    pred, gold = g.pred, g.gold
    summary = stats.agreement_summary(pred, gold)
    out.update(n=summary.n, exact=summary.exact, kappa=stats.cohen_kappa(pred, gold, labels=labels))
    correct = [float(p == h) for p, h, _ in complete]
    out["exact_ci"] = _ci(correct, [cl for *_, cl in complete] if grouped else None, confidence, n_resamples, seed)

    # Ordinal statistics over decisions where both sides chose an option (no abstentions).
    out.update(adjacent=None, qwk=None, spearman=None, kendall=None)
    values = {o.label: o.value for o in c.options} if c.is_judged else {"MET": 1.0, "UNMET": 0.0}
    if c.kind is CriterionKind.ORDINAL:
        order = _order(c)
        po = [p if p in values else None for p in pred]
        ho = [h if h in values else None for h in gold]
        if any(p is not None and h is not None for p, h in zip(po, ho, strict=True)):
            out["adjacent"] = stats.adjacent_accuracy(po, ho, order)
            out["qwk"] = stats.quadratic_weighted_kappa(po, ho, order)
        pv = [values.get(p) if p else None for p in po]
        hv = [values.get(h) if h else None for h in ho]
        out["spearman"] = _test(stats.spearman(pv, hv))
        out["kendall"] = _test(stats.kendall(pv, hv))
    jv = [values.get(p) if p is not None else None for p in pred]
    hv = [values.get(h) for h in gold]
    out["mean_bias"] = stats.mean_bias(jv, hv) if any(a is not None and b is not None for a, b in zip(jv, hv)) else None
    out["emd"] = stats.earth_movers_distance(jv, hv) if any(v is not None for v in jv) and any(
        v is not None for v in hv) else None

    per_option = stats.per_option_precision_recall(pred, gold, labels=labels)
    out["per_option"] = {str(k): v.to_dict() for k, v in per_option.items()}
    if complete:
        from sklearn.metrics import confusion_matrix

        matrix = confusion_matrix([h for _, h, _ in complete], [p for p, _, _ in complete], labels=labels)
        out["confusion"] = {"labels": labels, "rows": "human", "columns": "judge", "matrix": matrix.tolist()}
    else:
        out["confusion"] = None
    out["krippendorff_alpha"] = _alpha(g)
    return out


def _alpha(g: _Group) -> dict[str, Any] | None:
    """Inter-judge Krippendorff's alpha over ensemble votes (raters = vote positions)."""
    width = max((len(v) for v in g.votes), default=0)
    if width < 2:
        return None
    table = [[row[i] if i < len(row) else None for row in g.votes] for i in range(width)]
    c = g.criterion
    if c.kind is CriterionKind.ORDINAL:
        alpha = stats.krippendorff_alpha(table, level="ordinal", order=_order(c))
        level = "ordinal"
    else:
        alpha, level = stats.krippendorff_alpha(table, level="nominal"), "nominal"
    return {"alpha": alpha, "level": level, "raters": width, "items": len(g.votes)}


# ---------------------------------------------------------------------------- everything
def compute_metrics(
    records: Sequence[Record],
    rubrics: Mapping[str, Rubric],
    *,
    scoring: ScoringConfig = ScoringConfig(),
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Per-criterion, pooled and score-level agreement for a run (JSON-able; see module doc)."""
    grouped = any(r.get("group") is not None for r in records)
    groups = _groups(records, rubrics)
    criteria = [
        _criterion_metrics(name, g, grouped=grouped, confidence=confidence, n_resamples=n_resamples, seed=seed)
        for name, g in groups.items()
    ]

    # Pooled over every decision, resampled by group (or item).
    correct, clusters, bin_pred, bin_gold = [], [], [], []
    for g in groups.values():
        for p, h, cl in zip(g.pred, g.gold, g.clusters, strict=True):
            if p is None:
                continue
            correct.append(float(p == h))
            clusters.append(cl)
            if g.criterion.kind in (CriterionKind.BINARY, CriterionKind.CHECK):
                bin_pred.append(p)
                bin_gold.append(h)
    labelled = [c for c in criteria if c["n"]]
    overall = {
        "n_decisions": len(correct),
        "n_failed": sum(c["n_failed"] for c in criteria),
        "exact": (sum(correct) / len(correct)) if correct else None,
        "exact_ci": _ci(correct, clusters, confidence, n_resamples, seed),
        "ci_clusters": "group" if grouped else "item",
        "kappa_binary_pooled": stats.cohen_kappa(bin_pred, bin_gold) if bin_pred else None,
        "macro_exact": _mean([c["exact"] for c in labelled]),
        "macro_kappa": _mean([c["kappa"] for c in labelled]),
        "macro_adjacent": _mean([c["adjacent"] for c in labelled]),
        "macro_qwk": _mean([c["qwk"] for c in labelled]),
        "judge_abstain_rate": (sum(c["n_judge_abstained"] for c in criteria) / n_judged
                               if (n_judged := sum(c["n_judged"] for c in criteria)) else None),
        "krippendorff_alpha_mean": _mean([(c["krippendorff_alpha"] or {}).get("alpha") for c in criteria]),
    }
    return {
        "items": {
            "n": len(records),
            "ok": sum(r.get("status") == "ok" for r in records),
            "failed": sum(r.get("status") == "failed" for r in records),
            "scored": sum(r.get("score") is not None for r in records),
            "labelled": sum(bool(r.get("labels")) for r in records),
            "groups": len({r["group"] for r in records if r.get("group") is not None}),
        },
        "cost": sum(float(r.get("cost") or 0.0) for r in records),
        "overall": overall,
        "scores": _score_metrics(records, rubrics, scoring, grouped=grouped, confidence=confidence,
                                 n_resamples=n_resamples, seed=seed),
        "criteria": criteria,
        "conventions": "see rubric_reward.evaluation.run_metrics: failed verdicts excluded; judge abstention is its "
                       "own label; ordinal statistics on non-abstaining pairs; CIs are cluster bootstrap percentile "
                       "intervals",
    }


def _score_metrics(records: Sequence[Record], rubrics: Mapping[str, Rubric], scoring: ScoringConfig, *,
                   grouped: bool, confidence: float, n_resamples: int, seed: int) -> dict[str, Any]:
    pairs = item_scores(records, rubrics, scoring)
    judge = [j for j, _ in pairs]
    human = [h for _, h in pairs]
    both = [(j, h, r) for (j, h), r in zip(pairs, records, strict=True) if j is not None and h is not None]
    out: dict[str, Any] = {
        "n_pairs": len(both),
        "judge_mean": _mean(judge),
        "human_mean": _mean(human),
        "mean_bias": None, "mean_bias_ci": None, "spearman": None, "kendall": None, "emd": None,
    }
    if not both:
        return out
    js, hs = [j for j, _, _ in both], [h for _, h, _ in both]
    out["mean_bias"] = stats.mean_bias(js, hs)
    clusters = [str(r["group"]) if r.get("group") is not None else r["key"] for *_, r in both] if grouped else None
    out["mean_bias_ci"] = stats.paired_bootstrap_ci(js, hs, clusters=clusters, confidence=confidence,
                                                    n_resamples=n_resamples, seed=seed).to_dict()
    out["spearman"] = _test(stats.spearman(js, hs))
    out["kendall"] = _test(stats.kendall(js, hs))
    out["emd"] = stats.earth_movers_distance(js, hs)
    return out
