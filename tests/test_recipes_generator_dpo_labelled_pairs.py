"""The labelled response pairs of the dpo-loop's offline default: a prompt pool of their own, labels that the
package's checks reproduce, the better response known by construction, split by prompt; and the builder."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from rubric_reward.recipes.generator_dpo.labelled_pairs import build_labelled_pairs, label_response, load_labelled
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

DATA = Path(str(resources.files("rubric_reward.data")))


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def test_the_prompt_pool_is_its_own():
    """Disjoint from IFEval and from every other prompt file bundled with the package (the GRPO offline default's)."""
    mine = {_norm(p["prompt"]) for p in _lines(DATA / "labelled" / "prompts.jsonl")}
    assert len(mine) == 60
    others = set()
    for path in DATA.rglob("*.jsonl"):
        if path.parent.name != "labelled":
            others |= {_norm(r["prompt"]) for r in _lines(path) if isinstance(r.get("prompt"), str)}
    assert len(others) > 500  # IFEval's 541 and the offline prompts were read
    assert not mine & others
    assert not any(a in b or b in a for a in mine for b in others if min(len(a), len(b)) > 40)


def test_shipped_pairs_reproduce_their_labels_and_split_by_prompt():
    rows = _lines(DATA / "labelled" / "pairs.jsonl")
    prompts = {p["id"]: p for p in _lines(DATA / "labelled" / "prompts.jsonl")}
    assert [r["id"] for r in rows] == list(prompts)
    sides = {r["split"] for r in rows}
    assert sides == {"train", "heldout"}
    n_pairs = 0
    for row in rows:
        prompt = prompts[row["id"]]
        assert row["instructions"] == prompt["instructions"]
        for resp in row["responses"]:  # every recorded label and gate is what the checks say
            lab = label_response(prompt, resp["text"])
            assert (lab.gate, lab.label, list(lab.passed)) == (resp["gate"], resp["label"], resp["passed"])
        labels = {r["text"]: r for r in row["responses"]}
        for pair in row["labels"]:
            a, b = labels[pair["response_a"]], labels[pair["response_b"]]
            assert a["gate"] and b["gate"] and a["label"] != b["label"]
            assert pair["winner"] == ("A" if a["label"] > b["label"] else "B")
            assert (pair["label_a"], pair["label_b"]) == (a["label"], b["label"])
            n_pairs += 1
        assert len(row["labels"]) <= 6
    assert n_pairs >= 150
    train, heldout = load_labelled("train"), load_labelled("heldout")
    assert not {r.id for r in train} & {r.id for r in heldout}
    assert len(train) >= 15 and len(heldout) >= 15
    assert all(r.labels and r.instructions for r in train + heldout)
    winners = [p["winner"] for r in train + heldout for p in r.labels]
    assert 0.35 < winners.count("A") / len(winners) < 0.65  # the better response is not always shown first


def test_the_gate_keeps_real_attempts_only():
    prompt = {"prompt": "Describe a river walk. Do not use any commas.", "topic": ["river"],
              "instructions": [{"check": "ifeval:punctuation:no_comma"}]}
    assert label_response(prompt, "The river was calm and the path was quiet all morning.").label == 1
    assert label_response(prompt, "The river was calm, and the path was quiet, all morning.").label == 0
    assert label_response(prompt, "Yes").why == "fewer than 8 words"
    assert label_response(prompt, "The mountain path was steep and long and very cold today").why.startswith("off topic")
    copied = label_response(prompt, "Sure. Describe a river walk. Do not use any commas. Okay then")
    assert copied.why == "copies the prompt" and not copied.gate


def test_builder_samples_labels_pairs_and_splits(tmp_path):
    src = tmp_path / "prompts.jsonl"
    src.write_text("".join(json.dumps(p) + "\n" for p in [
        {"id": f"p{i}", "prompt": f"Write about lakes number {i} in fewer than 12 words.", "topic": ["lake"],
         "instructions": [{"check": "ifeval:length_constraints:number_words",
                           "kwargs": {"relation": "less than", "num_words": 12}}]} for i in range(4)]))

    def reply(body):  # short answers for even samples, long for odd ones, as the seed tells
        s = int(body.get("seed") or 0)
        return "A calm lake at dawn." if s % 2 == 0 else "The lake " + "is wide and blue and " * 4 + "still."

    srv = JudgeServer(ScriptedJudge(reply=reply)).start()
    try:
        from rubric_reward.judges.config import JudgeConfig

        out = tmp_path / "pairs.jsonl"
        stats = build_labelled_pairs(src, out, generator=JudgeConfig(model="s", base_url=srv.base_url, seed=0,
                                                                     temperature=0.9), n=4, min_words=3)
    finally:
        srv.stop()
    rows = _lines(out)
    assert stats["pairs"] == sum(len(r["labels"]) for r in rows) == 4 * 1  # one distinct short and one long each
    assert {r["split"] for r in rows} == {"train", "heldout"}
    for row in rows:
        (pair,) = row["labels"]
        better = pair["response_a"] if pair["winner"] == "A" else pair["response_b"]
        assert better == "A calm lake at dawn."
    assert len(load_labelled("heldout", out)) == 2


def test_the_shipped_heldout_pool_is_the_seeded_pool_labelled_by_the_checks():
    """``heldout_pool.jsonl`` (configs/dpo/offline_grounded.yaml's held-out set) is ``make_pool(2, seed=0)`` built with
    test_fraction 1: every prompt held out, its labels what the checks say, no prompt shared with the labelled
    prompts (the loop trains on their train side) or any other bundled prompt file."""
    from rubric_reward.recipes.generator_dpo.labelled_pool import make_pool

    rows = _lines(DATA / "labelled" / "heldout_pool.jsonl")
    pool = {p["id"]: p for p in make_pool(2, seed=0)}
    assert [r["id"] for r in rows] == list(pool) and len(rows) == 120
    for row in rows:
        prompt = pool[row["id"]]
        assert (row["split"], row["prompt"], row["instructions"]) == ("heldout", prompt["prompt"],
                                                                       prompt["instructions"])
        for resp in row["responses"]:
            lab = label_response(prompt, resp["text"])
            assert (lab.gate, lab.label, list(lab.passed)) == (resp["gate"], resp["label"], resp["passed"])
    heldout = load_labelled("heldout", DATA / "labelled" / "heldout_pool.jsonl")
    assert len(heldout) == 82 and sum(len(r.labels) for r in heldout) == 477
    assert load_labelled("train", DATA / "labelled" / "heldout_pool.jsonl") == []
    others = {_norm(r["prompt"]) for path in DATA.rglob("*.jsonl") if path.name != "heldout_pool.jsonl"
              for r in _lines(path) if isinstance(r.get("prompt"), str)}
    assert not {_norm(r["prompt"]) for r in rows} & others
