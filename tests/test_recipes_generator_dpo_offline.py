"""The offline default, shortened (same code path as `rubric-reward dpo-loop --config configs/dpo/offline_default.yaml`):
SmolLM2 writes rubrics with [check] lines, the outcome meta-judge ranks them by agreement with the labelled pairs,
DPO trains, and the held-out file's numbers match a recomputation from its per-pair outcomes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[1]


def _shortened(tmp_path: Path) -> Path:
    data = yaml.safe_load((ROOT / "configs" / "dpo" / "offline_default.yaml").read_text())
    data["max_steps"] = 2
    data["loop"].update(limit=3, iterations=1, out_dir=str(tmp_path / "loop"),
                        preferences={**data["loop"]["preferences"], "k": 3, "m": 3})
    data["loop"]["heldout"] = {**data["loop"]["heldout"], "limit": 4, "n_resamples": 500}
    path = tmp_path / "offline_short.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_offline_default_shortened(tmp_path):
    from scipy.stats import binomtest

    from rubric_reward.checks import run_check
    from rubric_reward.generation import GenerationConfig, parse_rubric
    from rubric_reward.recipes.generator_dpo.labelled_pairs import load_labelled
    from rubric_reward.rubric import Rubric

    out = tmp_path / "loop"
    cmd = [sys.executable, "-m", "rubric_reward.cli", "dpo-loop", "--config", str(_shortened(tmp_path)), "--quiet"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1450,
                          env={**__import__("os").environ, "OMP_NUM_THREADS": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Held-out evaluation" in proc.stdout and "| base |" in proc.stdout and "| iter_1 |" in proc.stdout

    # the labelled pairs: the training prompts are the train side, with their labels
    train = {r.id: r for r in load_labelled("train")}
    rows = [json.loads(x) for x in (out / "prompts.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["labels"] == [dict(p) for p in train[r["id"]].labels] for r in rows)

    # outcome preferences: a candidate's score is its agreement with its prompt's labels
    prefs = out / "iter_1" / "preferences"
    cands = [json.loads(x) for x in (prefs / "candidates.jsonl").read_text().splitlines()]
    judged = [json.loads(x) for x in (prefs / "transcripts.jsonl").read_text().splitlines()]
    assert judged and all(j["mode"] == "outcome" for j in judged)
    for j in judged:
        for side in ("a", "b"):
            d = j["details"][side]
            if d["score"] is None:
                continue
            credits = [p["credit"] for p in d["details"]["pairs"] if p["credit"] is not None]
            assert d["score"] == pytest.approx(sum(credits) / len(credits))
            for p in d["details"]["pairs"]:
                if p["credit"] is not None:
                    pick = "A" if p["score_a"] > p["score_b"] else "B" if p["score_b"] > p["score_a"] else None
                    assert p["credit"] == (0.5 if pick is None else float(pick == p["label"]))
    # check lines: every candidate rubric that has one round-trips through the list format
    cfg = GenerationConfig(format="list", checks=True, min_criteria=1, max_criteria=6)
    with_checks = [c for c in cands if c["ok"] and any("check" in k for k in c["rubric"]["criteria"])]
    for c in with_checks:
        assert parse_rubric(c["text"], config=cfg)[0].to_dict()["criteria"] == c["rubric"]["criteria"]
    adapter = json.loads((out / "iter_1" / "adapter.done.json").read_text())
    assert adapter["global_step"] >= 1

    # the held-out file, recomputed from the per-pair outcomes it was made from
    held = json.loads((out / "heldout.json").read_text())
    assert held == json.loads((out / "iter_1" / "heldout.json").read_text())
    base = json.loads((out / "heldout" / "base" / "outcomes.json").read_text())
    trained = json.loads((out / "iter_1" / "heldout" / "outcomes.json").read_text())
    heldout_rows = {r.id: r for r in load_labelled("heldout")[:4]}
    for outcomes in (base, trained):
        rubrics = {r["id"]: r for r in outcomes["rubrics"]}
        for p in outcomes["pairs"]:
            if p.get("no_rubric"):
                assert p["credit"] == 0.5 and not rubrics[p["id"]]["ok"]
                continue
            rubric = Rubric.from_obj(rubrics[p["id"]]["rubric"])
            if all(c.check and c.weight > 0 for c in rubric.criteria):  # checks only: the scores are the checks' own
                pair = heldout_rows[p["id"]].labels[p["pair"]]
                prompt = heldout_rows[p["id"]].prompt
                def score(text: str) -> float:
                    met = [run_check(c.check, text, c.kwargs, prompt) for c in rubric.criteria]
                    pos = sum(c.weight for c in rubric.criteria if c.weight > 0)
                    return sum(c.weight for c, m in zip(rubric.criteria, met) if m and c.weight > 0) / pos
                assert p["score_a"] == pytest.approx(score(pair["response_a"]))
                assert p["score_b"] == pytest.approx(score(pair["response_b"]))
    b = {(p["id"], p["pair"]): p["credit"] for p in base["pairs"]}
    t = {(p["id"], p["pair"]): p["credit"] for p in trained["pairs"]}
    keys = [k for k in sorted(b) if b[k] is not None and t.get(k) is not None]
    bv, tv = np.array([b[k] for k in keys]), np.array([t[k] for k in keys])
    assert held["n_pairs"] == len(keys) == sum(len(r.labels) for r in heldout_rows.values())
    assert held["base"]["agreement"] == pytest.approx(bv.mean())
    assert held["trained"]["agreement"] == pytest.approx(tv.mean())
    assert held["difference"]["estimate"] == pytest.approx((tv - bv).mean())
    better, worse = int((tv > bv).sum()), int((tv < bv).sum())
    assert held["discordant"] == {"trained_better": better, "base_better": worse}
    assert held["pvalue"] == pytest.approx(1.0 if better + worse == 0 else binomtest(better, better + worse).pvalue)
    lo, hi = held["difference"]["low"], held["difference"]["high"]
    assert lo <= held["difference"]["estimate"] <= hi
    valid = [r for r in base["rubrics"] if r["ok"]]
    assert held["base"]["validity"] == pytest.approx(len(valid) / len(base["rubrics"]))
    if valid:
        assert held["base"]["exploitable_share"] == pytest.approx(sum(r["exploitable"] for r in valid) / len(valid))
        assert held["base"]["checkable_share"] == pytest.approx(sum(r["n_checks"] for r in valid)
                                                                / sum(r["n_criteria"] for r in valid))
    assert "verdict" in held and (out / "summary.md").read_text().startswith("# Held-out evaluation")
