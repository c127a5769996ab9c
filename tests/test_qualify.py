"""The judge card (``rubric-reward qualify``) against scripted judges with planted defects, over the real HTTP path.

Each planted defect must be named exactly on the criterion it sits on, and nowhere else; a faithful judge is
``usable``. The defects move between criteria with the seed, and every run is repeated over seeds, so a clean
criterion is never flagged by chance."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import yaml

from rubric_reward.evaluation.qualify import (
    QualifyConfig,
    QualifyRow,
    load_rows,
    qualify,
)
from rubric_reward.evaluation.qualify.measure import _icc, _kappa_codes, _noise_share
from rubric_reward.items import Item
from rubric_reward.rubric import Rubric
from rubric_reward.testing.judge_server import JudgeServer
from rubric_reward.testing.planted import PlantedJudge, corpus, shown_labels

RUBRIC = Rubric.from_obj({"name": "support", "criteria": [
    {"name": "greets", "requirement": "The reply greets the customer by name."},
    {"name": "answers", "requirement": "The reply answers the question asked.", "weight": 2},
    {"name": "cites", "requirement": "The reply links the help-centre article."},
    {"name": "dates", "requirement": "The reply gives a delivery date."},
    {"name": "tone", "requirement": "How warm is the reply?", "kind": "ordinal",
     "options": [{"label": "cold", "value": 0}, {"label": "neutral", "value": 0.5}, {"label": "warm", "value": 1}]},
    {"name": "rambles", "requirement": "The reply rambles.", "weight": -1},
    {"name": "invents", "requirement": "The reply invents a policy.", "weight": -2},
    {"name": "blames", "requirement": "The reply blames the customer.", "weight": -1, "monitor": True},
]})
POSITIVE = ["greets", "answers", "cites", "dates", "tone"]
NEGATIVE = ["rambles", "invents"]
CARD_KEYS = {"version", "overall", "rubric", "judge", "criteria", "agreement_by_sign", "reward", "cost", "settings",
             "thresholds"}


def _rows(seed: int = 0, prompts: int = 12, per_prompt: int = 4) -> tuple[list[QualifyRow], object]:
    rows, truth = corpus(RUBRIC, prompts=prompts, per_prompt=per_prompt, seed=seed)
    return [QualifyRow(RUBRIC, Item(r["response"], r["prompt"]), r["group"], r["labels"]) for r in rows], truth


def _card(judge: PlantedJudge, rows: list[QualifyRow], tmp_path=None, **config):
    config = {"repeats": 5, "persuasion": False, "bootstrap_resamples": 400, **config}
    with JudgeServer(judge) as server:
        return qualify(rows, {"model": "planted", "max_concurrency": 32}, base_url=server.base_url,
                       config=QualifyConfig(**config), out_dir=tmp_path)


def _statuses(card) -> dict[str, set[str]]:
    out = {}
    for name, c in card.data["criteria"].items():
        s = c["status"]
        out[name] = set() if s == "ok" else {s} if isinstance(s, str) else set(s)
    return out


def test_the_planted_judge_reads_the_order_a_request_shows():
    from rubric_reward.grading.criterion_prompt import render_call

    item = Item("A reply.", "A question?")
    for seed in range(6):
        call = render_call(RUBRIC, item, [RUBRIC["greets"], RUBRIC["tone"]], judge="j", seed=seed)
        body = {"messages": list(call.messages)}
        assert shown_labels(body, "greets") == list(call.option_orders[0])
        assert shown_labels(body, "tone") == list(call.option_orders[1])


def test_a_faithful_judge_is_usable_and_the_card_is_written(tmp_path):
    rows, truth = _rows()
    card = _card(PlantedJudge(truth), rows, tmp_path, persuasion=True)
    assert card.overall == "usable" and card.failing() == {}
    assert all(s == set() for s in _statuses(card).values())
    data = json.loads((tmp_path / "card.json").read_text())
    assert set(data) == CARD_KEYS and data["overall"] == "usable"
    greets = data["criteria"]["greets"]
    assert greets["consistency"]["variance"] == 0.0 and greets["consistency"]["band"] == "consistent"
    assert greets["agreement"]["kappa"] == 1.0 and greets["persuasion"]["persuaded"] == 0.0
    assert data["criteria"]["blames"]["monitor"] is True
    reward = data["reward"]["rubric"]
    assert reward["test_retest"]["estimate"] == 1.0 and reward["noise_share"]["estimate"] == 0.0
    assert data["cost"]["calls_per_1000"] == pytest.approx(1000 * len(RUBRIC.judged))
    assert (tmp_path / "card.md").read_text().startswith("# Judge card")
    assert (tmp_path / "card.png").stat().st_size > 0
    assert Rubric.from_obj(yaml.safe_load((tmp_path / "qualified_rubric.yaml").read_text())) == RUBRIC


def _placed(seed: int) -> dict[str, str]:
    """Where each defect sits for this seed: a different positive criterion each time, the sign-blind one on a
    negative criterion."""
    pos = POSITIVE[seed % len(POSITIVE):] + POSITIVE[:seed % len(POSITIVE)]
    return {"noisy": pos[0], "position_bias": pos[1], "persuadable": pos[2], "sign_blind": NEGATIVE[seed % 2]}


def _planted(truth, placed: dict[str, str], which: list[str], seed: int) -> PlantedJudge:
    kw = {"noisy": {placed["noisy"]: 0.5} if "noisy" in which else {},
          "position_biased": {placed["position_bias"]} if "position_bias" in which else set(),
          "persuadable": {placed["persuadable"]} if "persuadable" in which else set(),
          "sign_blind": {placed["sign_blind"]} if "sign_blind" in which else set()}
    return PlantedJudge(truth, seed=seed, **kw)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("defect", ["noisy", "position_bias", "sign_blind"])
def test_one_planted_defect_is_named_on_its_criterion_only(defect, seed):
    rows, truth = _rows(seed)
    placed = _placed(seed)
    card = _card(_planted(truth, placed, [defect], seed), rows, seed=seed)
    want = {name: set() for name in _statuses(card)}
    want[placed[defect]] = {defect}
    assert _statuses(card) == want
    assert card.overall == "usable_with_changes"
    assert set(card.failing()) == {placed[defect]}
    assert card.qualified["support"][placed[defect]].monitor


@pytest.mark.parametrize("seed", [0, 1])
def test_every_planted_defect_at_once(seed, tmp_path):
    rows, truth = _rows(seed)
    placed = _placed(seed)
    judge = _planted(truth, placed, ["noisy", "position_bias", "sign_blind", "persuadable"], seed)
    card = _card(judge, rows, tmp_path, seed=seed, persuasion=True)
    want = {name: set() for name in _statuses(card)}
    for status, name in placed.items():
        want[name] = {status}
    assert _statuses(card) == want
    assert judge.planted == {n: s for n, s in want.items() if s}
    assert card.overall == "usable_with_changes"
    qualified = Rubric.from_obj(yaml.safe_load((tmp_path / "qualified_rubric.yaml").read_text()))
    assert {c.name for c in qualified.criteria if c.monitor} == set(placed.values()) | {"blames"}
    noisy = card.data["criteria"][placed["noisy"]]
    assert noisy["consistency"]["band"] == "unusable" and noisy["persuasion"] is None
    assert card.data["criteria"][placed["position_bias"]]["position"]["lean"]["low"] > 0.3
    persuaded = card.data["criteria"][placed["persuadable"]]["persuasion"]
    assert persuaded["persuaded"] > 0.5 and persuaded["attacks"] > 50
    # the judge's noise is in the rubric's reward, and gone from the qualified one
    reward = card.data["reward"]
    assert reward["rubric"]["noise_share"]["estimate"] > 0.05 and reward["qualified"]["noise_share"]["estimate"] == 0
    assert reward["rubric"]["test_retest"]["estimate"] < 1.0 == reward["qualified"]["test_retest"]["estimate"]
    by_sign = card.data["agreement_by_sign"]
    assert by_sign["positive"]["accuracy"] == 1.0 and by_sign["negative"]["accuracy"] < 0.8


def test_a_judge_noisy_everywhere_is_unusable(tmp_path):
    rows, truth = _rows()
    judge = PlantedJudge(truth, noisy={c.name: 0.6 for c in RUBRIC.judged})
    card = _card(judge, rows, tmp_path)
    assert card.overall == "unusable"
    assert all(s == {"noisy"} for s in _statuses(card).values())
    assert card.data["reward"]["rubric"]["noise_share"]["estimate"] > 0.5
    assert not (tmp_path / "qualified_rubric.yaml").exists()


@pytest.mark.parametrize("mode", ["per_item", "group"])
def test_other_judging_modes(mode):
    rows, truth = _rows(prompts=6)
    with JudgeServer(PlantedJudge(truth)) as server:
        card = qualify(rows, {"model": "planted", "mode": mode}, base_url=server.base_url,
                       config=QualifyConfig(repeats=3, persuasion=False, bootstrap_resamples=200))
    assert card.overall == "usable"
    lean = card.data["criteria"]["greets"]["position"]["lean"]
    assert (lean is None) == (mode == "group")  # a group call's option order is not the grader's per-call one


def test_responses_files_and_gold(tmp_path):
    rows, _ = corpus(RUBRIC, prompts=3, per_prompt=2)
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:4]) +
                    json.dumps({"prompt": "Q?", "responses": ["one", "two"]}) + "\n")
    loaded = load_rows(path, RUBRIC)
    assert [r.group for r in loaded] == ["p0", "p0", "p1", "p1", "line 5", "line 5"]
    assert loaded[0].gold == rows[0]["labels"] and loaded[4].gold == {}


def test_kappa_icc_and_noise_share_arithmetic():
    from rubric_reward.stats import cohen_kappa

    rng = random.Random(0)
    for _ in range(50):
        p = [rng.randrange(3) for _ in range(30)]
        g = [x if rng.random() < 0.6 else rng.randrange(3) for x in p]
        assert _kappa_codes(np.array(p), np.array(g), 3) == pytest.approx(cohen_kappa(p, g, labels=[0, 1, 2]))
    steady = np.array([[0.2] * 4, [0.8] * 4, [0.5] * 4])
    assert _icc(steady) == 1.0
    coin = np.random.default_rng(0).integers(0, 2, size=(200, 5)).astype(float)
    assert abs(_icc(coin)) < 0.1
    sums = np.array([[1.0, 10, 2.0, 19], [0.0, 10, 0.0, 19]])  # (noise SS, df, total SS, df) of two groups
    assert _noise_share(sums) == pytest.approx((1 / 20) / (2 / 38))


def test_the_command_line(tmp_path):
    from rubric_reward.cli.main import main

    rows, truth = corpus(RUBRIC, prompts=6, per_prompt=3, seed=4)
    (tmp_path / "rubric.yaml").write_text(yaml.safe_dump(RUBRIC.to_dict()))
    (tmp_path / "responses.jsonl").write_text("".join(
        json.dumps({k: r[k] for k in ("prompt", "response")}) + "\n" for r in rows))
    (tmp_path / "gold.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["qualify", "--rubric", str(tmp_path / "rubric.yaml"), "--responses", str(tmp_path / "responses.jsonl"),
            "--gold", str(tmp_path / "gold.jsonl"), "--repeats", "3", "--judge", "planted", "--no-persuasion",
            "--quiet"]
    with JudgeServer(PlantedJudge(truth)) as server:
        assert main(args + ["--base-url", server.base_url, "--out", str(tmp_path / "faithful")]) == 0
    with JudgeServer(PlantedJudge(truth, noisy={"dates": 0.5})) as server:
        assert main(args + ["--base-url", server.base_url, "--out", str(tmp_path / "noisy")]) == 1
    data = json.loads((tmp_path / "noisy" / "card.json").read_text())
    assert data["overall"] == "usable_with_changes" and data["criteria"]["dates"]["status"] == "noisy"
    assert data["settings"]["gold_responses"] == len(rows)
    assert main(["qualify", "--rubric", str(tmp_path / "rubric.yaml"), "--responses", str(tmp_path / "nope.jsonl"),
                 "--judge", "x", "--quiet"]) == 2


def test_a_wrong_judge_disagrees_and_a_failing_one_is_unscorable():
    from rubric_reward.testing.judge_server import ScriptedJudge

    rows, truth = _rows(seed=5)
    flipped = {"MET": "UNMET", "UNMET": "MET"}
    wrong = PlantedJudge(lambda c, r: flipped[truth(c, r)] if c == "dates" and truth(c, r) else truth(c, r))
    assert _statuses(_card(wrong, rows)) == {n: {"disagrees"} if n == "dates" else set() for n in _statuses(
        _card(PlantedJudge(truth), rows))}
    scripts = {c.name: (lambda r, b, n=c.name: truth(n, r) or "UNMET") for c in RUBRIC.judged}
    failing = ScriptedJudge({**scripts, "greets": "NOT A LABEL"})
    card = _card(failing, rows)
    assert _statuses(card) == {n: {"unscorable"} if n == "greets" else set() for n in _statuses(card)}
    assert card.data["criteria"]["greets"]["failure_rate"] == 1.0
    assert card.data["reward"]["rubric"]["unscored_rate"] == 1.0 and card.data["reward"]["qualified"]["unscored_rate"] == 0


def test_a_judge_blind_to_order_never_leans_on_a_small_set():
    """Four responses judged three times: a judge whose verdict ignores the order shows no lean at all."""
    rows, truth = _rows(prompts=1, per_prompt=4)
    card = _card(PlantedJudge(truth), rows, repeats=3)
    assert all(c["position"]["lean"]["estimate"] == 0.0 for c in card.data["criteria"].values() if c["position"]["lean"])
    assert card.overall == "usable"


def test_responses_sampled_from_a_policy(tiny_model):
    """``--responses POLICY``: completions sampled per prompt (seeded: the same seed, the same texts)."""
    from rubric_reward.evaluation.qualify import sample_rows

    prompts = [{"id": "a", "prompt": "Say hi."}, {"id": "b", "prompt": [{"role": "user", "content": "Count."}]}]
    rows = sample_rows(prompts, RUBRIC, policy=str(tiny_model), per_prompt=3, max_new_tokens=6, progress=False)
    assert [r.group for r in rows] == ["a"] * 3 + ["b"] * 3 and all(r.rubric is RUBRIC for r in rows)
    again = sample_rows(prompts, RUBRIC, policy=str(tiny_model), per_prompt=3, max_new_tokens=6, progress=False)
    assert [r.item.response for r in rows] == [r.item.response for r in again]
    assert len({r.item.response for r in rows[:3]}) > 1  # a group of different completions, not three greedy copies


def test_a_judge_that_says_met_to_everything_is_sign_blind_on_every_penalty():
    """MET on every criterion, positives included: the penalties are named sign_blind (their disagreements are all
    the penalty given where the gold says it does not apply), the positive criteria disagrees."""
    rows, truth = _rows(seed=7)
    best = {"tone": "warm"}
    card = _card(PlantedJudge(lambda c, r: best.get(c, "MET")), rows)
    statuses = _statuses(card)
    assert all(statuses[n] == {"sign_blind"} for n in NEGATIVE), statuses
    assert all(statuses[n] == {"disagrees"} for n in POSITIVE if n != "tone"), statuses
    assert card.data["overall"] == "unusable"
