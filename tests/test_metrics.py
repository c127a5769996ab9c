"""Agreement metrics from run records, checked against scipy / scikit-learn / krippendorff and by hand."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import accuracy_score, cohen_kappa_score, confusion_matrix, precision_score, recall_score

from rubric_reward import stats
from rubric_reward.evaluation.run_metrics import compute_metrics, human_score
from rubric_reward.rubric import Rubric
from rubric_reward.arithmetic import Abstention, ScoringConfig

RUBRIC = Rubric.from_obj({
    "name": "r",
    "criteria": [
        {"name": "a", "requirement": "A holds.", "weight": 10},
        {"name": "b", "requirement": "B holds.", "weight": 5},
        {"name": "neg", "requirement": "A flaw is present.", "weight": -5},
        {"name": "ord", "requirement": "Quality?", "weight": 8, "allow_abstain": True, "options": [
            {"label": "low", "value": 0.0}, {"label": "mid", "value": 0.5}, {"label": "high", "value": 1.0}]},
    ],
})
FP = RUBRIC.fingerprint()
RUBRICS = {FP: RUBRIC}
VALUES = {"MET": 1.0, "UNMET": 0.0, "low": 0.0, "mid": 0.5, "high": 1.0}


def verdict(criterion, label, *, error=False, votes=()):
    if error:
        return {"criterion": criterion, "label": None, "value": None, "reason": "", "abstained": False,
                "error": {"kind": "server", "message": "HTTP 500", "status": 500}}
    abstained = label in ("CANNOT_ASSESS", "N/A")
    d = {"criterion": criterion, "label": label, "value": None if abstained else VALUES[label], "reason": "",
         "abstained": abstained, "error": None}
    if votes:
        d["votes"] = [verdict(criterion, v) for v in votes]
    return d


def record(i, judge, human, *, group=None, score=None, errors=(), votes=None):
    verdicts = [verdict(c, lab, error=c in errors, votes=(votes or {}).get(c, ())) for c, lab in judge.items()]
    return {"key": f"k{i}", "id": f"i{i}", "row": i, "group": group, "rubric_fingerprint": FP,
            "labels": human, "status": "failed" if errors else "ok", "score": score, "cost": 0.01,
            "result": {"verdicts": verdicts}}


def synthetic(n=40, seed=0):
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        human = {"a": rng.choice(["MET", "UNMET"]), "b": rng.choice(["MET", "UNMET"]),
                 "neg": rng.choice(["MET", "UNMET"], p=[0.3, 0.7]), "ord": rng.choice(["low", "mid", "high"])}
        options = {"ord": ["low", "mid", "high"]}
        judge = {k: (v if rng.random() < 0.75 else rng.choice(options.get(k, ["MET", "UNMET"])))
                 for k, v in human.items()}
        human = {k: str(v) for k, v in human.items()}
        judge = {k: str(v) for k, v in judge.items()}
        records.append(record(i, judge, human, group=f"s{i % 8}", score=float(rng.random())))
    return records


def criterion(metrics, name):
    return next(c for c in metrics["criteria"] if c["name"] == name)


def test_per_criterion_metrics_match_scikit_learn_and_scipy():
    records = synthetic()
    m = compute_metrics(records, RUBRICS)
    json.dumps(m, allow_nan=False)  # plain JSON, no NaN
    for name in ("a", "b", "neg", "ord"):
        pred = [r["result"]["verdicts"][["a", "b", "neg", "ord"].index(name)]["label"] for r in records]
        gold = [r["labels"][name] for r in records]
        c = criterion(m, name)
        labels = ["MET", "UNMET"] if name != "ord" else ["low", "mid", "high"]
        assert c["n"] == 40 and c["exact"] == pytest.approx(accuracy_score(gold, pred))
        assert c["kappa"] == pytest.approx(cohen_kappa_score(gold, pred))
        assert c["confusion"]["matrix"] == confusion_matrix(gold, pred, labels=labels).tolist()
        for lab in labels:
            po = c["per_option"][lab]
            assert po["precision"] == pytest.approx(precision_score(gold, pred, labels=[lab], average="macro"))
            assert po["recall"] == pytest.approx(recall_score(gold, pred, labels=[lab], average="macro"))
            assert po["support"] == gold.count(lab)
        jv, hv = [VALUES[p] for p in pred], [VALUES[g] for g in gold]
        assert c["mean_bias"] == pytest.approx(np.mean(np.subtract(jv, hv)))
        assert c["emd"] == pytest.approx(sps.wasserstein_distance(jv, hv))
        if name == "ord":
            rank = {"low": 0, "mid": 1, "high": 2}
            rp, rg = [rank[p] for p in pred], [rank[g] for g in gold]
            assert c["qwk"] == pytest.approx(cohen_kappa_score(rg, rp, weights="quadratic"))
            assert c["adjacent"] == pytest.approx(np.mean(np.abs(np.subtract(rp, rg)) <= 1))
            assert c["spearman"]["statistic"] == pytest.approx(sps.spearmanr(jv, hv).statistic)
            assert c["kendall"]["statistic"] == pytest.approx(sps.kendalltau(jv, hv).statistic)
        else:
            assert c["qwk"] is None and c["adjacent"] is None and c["spearman"] is None
        # Per-criterion CI resamples students (groups) when the data has them.
        correct = [float(p == g) for p, g in zip(pred, gold)]
        want = stats.bootstrap_ci(correct, clusters=[r["group"] for r in records], n_resamples=2000, seed=0)
        assert c["exact_ci"] == want.to_dict()


def test_pooled_and_score_level_metrics():
    records = synthetic()
    m = compute_metrics(records, RUBRICS)
    o = m["overall"]
    pred = [v["label"] for r in records for v in r["result"]["verdicts"]]
    gold = [r["labels"][v["criterion"]] for r in records for v in r["result"]["verdicts"]]
    assert o["n_decisions"] == 160 and o["exact"] == pytest.approx(accuracy_score(gold, pred))
    assert o["ci_clusters"] == "group"
    assert o["exact_ci"]["low"] < o["exact"] < o["exact_ci"]["high"]
    binary = [(p, g) for p, g, v in zip(pred, gold, [v for r in records for v in r["result"]["verdicts"]])
              if v["criterion"] != "ord"]
    assert o["kappa_binary_pooled"] == pytest.approx(cohen_kappa_score([g for _, g in binary], [p for p, _ in binary]))
    assert o["macro_kappa"] == pytest.approx(np.mean([criterion(m, c)["kappa"] for c in ("a", "b", "neg", "ord")]))

    judge = [r["score"] for r in records]
    human = [human_score(r, RUBRIC) for r in records]
    s = m["scores"]
    assert s["n_pairs"] == 40
    assert s["spearman"]["statistic"] == pytest.approx(sps.spearmanr(judge, human).statistic)
    assert s["kendall"]["statistic"] == pytest.approx(sps.kendalltau(judge, human).statistic)
    assert s["mean_bias"] == pytest.approx(np.mean(np.subtract(judge, human)))
    assert s["emd"] == pytest.approx(sps.wasserstein_distance(judge, human))


def test_human_score_follows_the_worked_example():
    # NOTES section 4: a +10, b +5, neg -5, ord +8; b abstains.
    labels = {"a": "MET", "b": "CANNOT_ASSESS", "neg": "UNMET", "ord": "mid"}
    rec = record(0, {}, labels)
    assert human_score(rec, RUBRIC, ScoringConfig(abstention=Abstention.SKIP)) == pytest.approx(14 / 18)
    assert human_score(rec, RUBRIC, ScoringConfig(abstention=Abstention.ZERO)) == pytest.approx(14 / 23)
    assert human_score(record(0, {}, {"a": "MET"}), RUBRIC) is None  # incomplete labels: no human score


def test_hand_computed_binary_case():
    judge = ["MET", "MET", "UNMET", "UNMET"]
    human = ["MET", "UNMET", "UNMET", "UNMET"]
    records = [record(i, {"a": j}, {"a": h}) for i, (j, h) in enumerate(zip(judge, human))]
    c = criterion(compute_metrics(records, RUBRICS), "a")
    # p_o = 3/4; p_e = P(judge MET) P(human MET) + P(judge UNMET) P(human UNMET) = 1/2*1/4 + 1/2*3/4 = 1/2
    assert c["exact"] == 0.75 and c["kappa"] == pytest.approx(0.5)
    assert c["per_option"]["MET"] == {"precision": 0.5, "recall": 1.0, "support": 1}
    assert c["per_option"]["UNMET"] == {"precision": 1.0, "recall": pytest.approx(2 / 3), "support": 3}
    assert c["mean_bias"] == pytest.approx(0.25)


def test_one_class_only_gives_undefined_kappa_not_nan():
    records = [record(i, {"a": "MET", "ord": "high"}, {"a": "MET", "ord": "high"}) for i in range(5)]
    m = compute_metrics(records, RUBRICS)
    a, o = criterion(m, "a"), criterion(m, "ord")
    assert a["exact"] == 1.0 and a["kappa"] is None
    assert o["exact"] == 1.0 and o["adjacent"] == 1.0 and o["qwk"] is None and o["spearman"] is None
    assert a["exact_ci"]["low"] == a["exact_ci"]["high"] == 1.0
    json.dumps(m, allow_nan=False)


def test_all_abstained():
    records = [record(i, {"a": "CANNOT_ASSESS", "ord": "N/A"}, {"a": lab, "ord": "mid"}, score=None)
               for i, lab in enumerate(["MET", "UNMET", "MET"])]
    m = compute_metrics(records, RUBRICS)
    a, o = criterion(m, "a"), criterion(m, "ord")
    # An abstention is its own label: it disagrees with every human verdict here.
    assert a["n"] == 3 and a["exact"] == 0.0 and a["n_judge_abstained"] == 3
    assert "CANNOT_ASSESS" in a["labels"] and a["per_option"]["CANNOT_ASSESS"]["precision"] == 0.0
    assert a["per_option"]["MET"]["recall"] == 0.0 and a["per_option"]["MET"]["precision"] is None
    # Ordinal statistics need both sides to choose an option: none left.
    assert o["adjacent"] is None and o["qwk"] is None and o["spearman"] is None and o["mean_bias"] is None
    assert m["overall"]["judge_abstain_rate"] == 1.0
    assert m["scores"]["n_pairs"] == 0 and m["scores"]["spearman"] is None and m["scores"]["judge_mean"] is None
    json.dumps(m, allow_nan=False)


def test_failed_verdicts_are_excluded_and_counted():
    records = [
        record(0, {"a": "MET"}, {"a": "MET"}),
        record(1, {"a": "MET"}, {"a": "UNMET"}, errors=("a",)),
        record(2, {"a": "UNMET"}, {"a": "UNMET"}),
    ]
    c = criterion(compute_metrics(records, RUBRICS), "a")
    assert c["n"] == 2 and c["n_failed"] == 1 and c["exact"] == 1.0


def test_no_labels_at_all():
    records = [record(i, {"a": "MET"}, {}, score=0.5) for i in range(3)]
    m = compute_metrics(records, RUBRICS)
    assert m["overall"]["exact"] is None and m["overall"]["exact_ci"] is None
    assert all(c["n"] == 0 and c["kappa"] is None for c in m["criteria"])
    assert m["scores"]["judge_mean"] == 0.5 and m["scores"]["human_mean"] is None
    json.dumps(m, allow_nan=False)


def test_pooled_interval_resamples_items_without_groups():
    records = synthetic(20)
    for r in records:
        r["group"] = None
    m = compute_metrics(records, RUBRICS)
    correct = [float(v["label"] == r["labels"][v["criterion"]]) for r in records for v in r["result"]["verdicts"]]
    clusters = [r["key"] for r in records for _ in r["result"]["verdicts"]]
    assert m["overall"]["ci_clusters"] == "item"
    assert m["overall"]["exact_ci"] == stats.bootstrap_ci(correct, clusters=clusters, seed=0).to_dict()


def test_krippendorff_alpha_over_ensemble_votes():
    rng = np.random.default_rng(3)
    table = []  # 3 voters x 12 items
    records = []
    for i in range(12):
        votes = [str(rng.choice(["MET", "UNMET"])) for _ in range(3)]
        table.append(votes)
        majority = max(set(votes), key=votes.count)
        records.append(record(i, {"a": majority}, {"a": "MET"}, votes={"a": votes}))
    c = criterion(compute_metrics(records, RUBRICS), "a")
    coded = np.array([[1.0 if v == "MET" else 0.0 for v in row] for row in table]).T
    want = krippendorff.alpha(reliability_data=coded, level_of_measurement="nominal")
    assert c["krippendorff_alpha"]["alpha"] == pytest.approx(want)
    assert c["krippendorff_alpha"]["raters"] == 3
    assert criterion(compute_metrics(synthetic(5), RUBRICS), "a")["krippendorff_alpha"] is None


# ---------------------------------------------------------------------------- comparing runs
def _run(records):
    from rubric_reward.evaluation.run_metrics import RunData

    return RunData(records, RUBRICS, {})


def test_compare_runs_pairs_items_and_matches_the_stats_module():
    from rubric_reward.evaluation.compare import compare_many, compare_runs

    a_records, b_records = synthetic(30, seed=1), synthetic(30, seed=1)
    rng = np.random.default_rng(9)
    for r in b_records:  # B: same items, scores shifted down, some verdicts changed
        r["score"] = max(0.0, r["score"] - 0.1 * rng.random())
        if rng.random() < 0.3:
            v = r["result"]["verdicts"][0]
            v["label"] = "UNMET" if v["label"] == "MET" else "MET"
    b_records.reverse()  # pairing is by id, not by position
    out = compare_runs(_run(a_records), _run(b_records))
    sa = [r["score"] for r in a_records]
    sb = [r["score"] for r in sorted(b_records, key=lambda r: r["row"])]
    s = out["scores"]
    assert out["n_shared"] == 30 and s["n"] == 30
    assert s["permutation"] == stats.paired_permutation_test(sa, sb, seed=0).to_dict()
    assert s["wilcoxon"]["pvalue"] == pytest.approx(sps.wilcoxon(np.subtract(sa, sb)).pvalue)
    assert s["cohens_d"] == pytest.approx(np.mean(np.subtract(sa, sb)) / np.std(np.subtract(sa, sb), ddof=1))
    assert s["difference"]["estimate"] == pytest.approx(np.mean(np.subtract(sa, sb)))
    acc = out["accuracy"]
    assert acc["n_decisions"] == 120 and acc["mcnemar"]["b"] + acc["mcnemar"]["c"] > 0

    many = compare_many(_run(b_records), {"ckpt1": _run(a_records), "ckpt2": _run(synthetic(30, seed=1))})
    p1 = many["comparisons"]["ckpt1"]["scores"]["permutation"]["pvalue"]
    p2 = many["comparisons"]["ckpt2"]["scores"]["permutation"]["pvalue"]
    assert [many["comparisons"][n]["scores"]["permutation_pvalue_holm"] for n in ("ckpt1", "ckpt2")] == \
        pytest.approx(stats.holm_adjust([p1, p2]))
