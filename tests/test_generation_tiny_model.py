"""The tiny local model as a rubric generator: it never writes JSON, so every failure is recorded."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rubric_reward.generation import GenerationConfig, RubricGenerator  # noqa: E402
from rubric_reward.judges import JudgeConfig  # noqa: E402



@pytest.mark.timeout(120)
def test_tiny_generator_failures_are_recorded_and_samples_differ(tiny_model):
    cfg = JudgeConfig(model=str(tiny_model), backend="transformers", verdict_mode="generate", seed=7)
    gen = RubricGenerator(cfg, config=GenerationConfig(max_tokens=24), temperature=0.8)
    try:
        cands = gen.candidates("Write a haiku about rain.", 3, prompt_id="haiku")
        greedy = RubricGenerator(cfg, config=GenerationConfig(max_tokens=24), temperature=0.0)
        g1 = greedy.generate("Write a haiku about rain.")
        g2 = greedy.generate("Write a haiku about rain.")
        greedy.close()
    finally:
        gen.close()
    for c in cands:
        assert not c.ok and c.rubric is None
        assert c.attempts == 2 and c.error.startswith("no usable rubric after 2 ask(s)")
        assert c.text is not None  # the raw answer is kept
    assert [c.sample_index for c in cands] == [0, 1, 2]
    assert len({c.text for c in cands}) > 1  # temperature 0.8 samples; distinct sample indexes are not collapsed
    assert g1.text == g2.text  # greedy is deterministic


@pytest.mark.timeout(120)
def test_tiny_local_meta_judge_scores_a_against_b_so_answers_are_always_on_menu(tiny_model):
    from rubric_reward.generation.metajudge import MetaJudge
    from rubric_reward.rubric import Rubric

    a = Rubric.from_obj(["The poem has three lines.", "The poem is about rain."])
    b = Rubric.from_obj(["The response is good."])
    mj = MetaJudge(JudgeConfig(model=str(tiny_model), backend="transformers"))  # logprob verdict mode
    try:
        v = mj.compare("Write a haiku about rain.", a, b)
    finally:
        mj.close()
    assert v.ok and v.credit_a in (0.0, 0.5, 1.0)
    for order in v.details["orders"]:
        assert order["winner"] in ("A", "B") and order["reason"].startswith("logprob verdict: P(A)=")


@pytest.mark.timeout(120)
def test_tiny_local_meta_judge_soft_credit_is_the_mean_pick_probability(tiny_model):
    from rubric_reward.generation.metajudge import MetaJudge
    from rubric_reward.rubric import Rubric

    a = Rubric.from_obj(["The poem has three lines.", "The poem is about rain."])
    b = Rubric.from_obj(["The response is good."])
    mj = MetaJudge(JudgeConfig(model=str(tiny_model), backend="transformers"), config={"credit": "soft"})
    try:
        v = mj.compare("Write a haiku about rain.", a, b)
    finally:
        mj.close()
    ab, ba = v.details["orders"]
    assert ab["p"]["A"] + ab["p"]["B"] == pytest.approx(1.0)
    assert v.credit_a == pytest.approx(0.5 * ab["p"]["A"] + 0.5 * ba["p"]["B"])
    assert 0.0 < v.credit_a < 1.0 and v.credit_a != 0.5
    # the probabilities are the ones the logprob verdict reports in its reason
    assert f"P(A)={ab['p']['A']:.3f}" in ab["reason"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_documented_offline_generate_example_writes_rubrics(tmp_path):
    """docs/generation.md's offline example, as written: the bundled SmolLM2 in the list format, sampled (seeded)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "rubrics.jsonl"
    cmd = [sys.executable, "-m", "rubric_reward.cli", "generate", "--input", "examples/generation/prompts.jsonl",
           "--out", str(out), "--quiet"]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=880)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 2 and any(r["ok"] for r in rows), proc.stderr[-2000:]
    assert all(r["rubric"]["criteria"] for r in rows if r["ok"])
    assert "examples/generation/prompts.jsonl" in (root / "docs" / "generation.md").read_text()
