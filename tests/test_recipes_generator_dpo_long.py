"""Issue 31 part 2: the likelihood term on the chosen rubric reaches TRL's DPOConfig; the larger offline config
loads; its labelled pool is seeded, its own, checkable, built once and read as ``labelled:train:FILE``."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

pytest.importorskip("trl")

from rubric_reward.recipes.generator_dpo.labelled_pool import INSTRUCTIONS, TASKS, ensure_pool, make_pool  # noqa: E402
from rubric_reward.recipes.generator_dpo.loop_config import load_loop_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(str(resources.files("rubric_reward.data")))


@pytest.mark.parametrize("name", ["offline_default.yaml", "offline_long.yaml", "offline_checks.yaml",
                                  "offline_grounded.yaml"])
def test_the_chosen_likelihood_term_reaches_dpo_config(name):
    from trl import DPOConfig

    config = load_loop_config(ROOT / "configs" / "dpo" / name, prompts="labelled:train")
    training = config.dpo_args.training
    assert isinstance(training, DPOConfig)
    assert training.loss_type == ["sigmoid", "sft"] and training.loss_weights == [1.0, 1.0]
    assert config.outcome_criteria == {"offline_long.yaml": "auto", "offline_checks.yaml": "checks",
                                       "offline_grounded.yaml": "checks"}.get(name, "all")
    assert config.meta.mode == "outcome"
    if name == "offline_long.yaml":
        assert (config.preferences.k, config.iterations, config.probe_pairs) == (8, 3, 16)
        assert config.heldout.prompts == "labelled:heldout"
    if name == "offline_checks.yaml":  # the measured K = 16 configuration (docs/results/, the DPO-loop records)
        assert (config.preferences.k, config.preferences.temperature, config.heldout.samples) == (16, 0.9, 2)
        assert training.num_train_epochs == 2 and config.prompts == "labelled:train"
    if name == "offline_grounded.yaml":  # the measured held-out gain (docs/results/, the grounded-checks record)
        assert config.generation.ground_checks and config.generation.checks and config.iterations == 1
        assert (config.heldout.samples, config.prompts) == (1, "labelled:train")
        assert config.preferences.pairs_per_prompt == 4  # 3 pairs a draw with 1 (a losing seed), 8-14 with 4
        assert config.preferences.k == 24  # 8-14 pairs a draw with k 16, the interval touching 0 on 8 and 10
        assert config.generation.keep_complete_lines  # validity fell on 2 of 4 seeds without it (cut-off answers)
        assert training.precompute_ref_log_probs  # the same adapter (test_recipes_generator_dpo_train), less time
        assert config.heldout.prompts.startswith("labelled:heldout:") and \
            config.heldout.prompts.endswith("rubric_reward/data/labelled/heldout_pool.jsonl")


def test_offline_long_names_its_pool_and_says_how_to_make_it(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text((ROOT / "configs/dpo/offline_long.yaml").read_text().replace(
        "labelled:train:../../runs/labelled-long/pairs.jsonl", "labelled:train:pool/pairs.jsonl"))
    with pytest.raises(ValueError, match=r"names no labelled pairs file: .*pool/pairs.jsonl does not exist "
                                         r"\(see rubric_reward.recipes.generator_dpo.labelled_pool\)"):
        load_loop_config(path)
    with pytest.raises(ValueError, match="held-out side"):
        load_loop_config(path, prompts="labelled:heldout")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def test_the_pool_is_seeded_its_own_and_checkable():
    from rubric_reward.checks import run_check

    pool = make_pool()
    assert pool == make_pool() and pool != make_pool(seed=1)
    assert len(pool) == 300 == len({r["id"] for r in pool}) == len({_norm(r["prompt"]) for r in pool})
    others = set()
    for path in DATA.rglob("*.jsonl"):
        if path.name == "heldout_pool.jsonl":  # made from these tasks (make_pool(2)): offline_grounded's held-out set
            continue
        others |= {_norm(r["prompt"]) for r in map(json.loads, path.read_text().splitlines())
                   if isinstance(r.get("prompt"), str)}
    assert len(others) > 500 and not {_norm(r["prompt"]) for r in pool} & others
    tasks = [_norm(t) for _, t, _ in TASKS]
    assert not any(t in o for t in tasks for o in others)  # no task is part of a bundled prompt
    types = {i["check"] for r in pool for i in r["instructions"]}
    assert types == {c for _, c, _ in INSTRUCTIONS} | {"ifeval:keywords:existence", "ifeval:keywords:forbidden_words"}
    for r in pool[:40]:  # every instruction runs as a check with its values
        for i in r["instructions"]:
            assert run_check(i["check"], "Some answer text here.", i.get("kwargs"), r["prompt"]) in (True, False)
        assert r["topic"]


def test_ensure_pool_builds_once_and_loads_as_a_train_side(tmp_path):
    from rubric_reward.judges.config import JudgeConfig
    from rubric_reward.recipes.generator_dpo.labelled_pairs import load_rows
    from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

    def reply(body):  # the task sentence (on topic) for even samples, the same padded past 80 words for odd ones
        task = body["messages"][-1]["content"].split(".")[0]
        return f"Well, {task}." if int(body.get("seed") or 0) % 2 == 0 else \
            f"{task} " + "and it goes on and on " * 16 + "."

    srv = JudgeServer(ScriptedJudge(reply=reply)).start()
    try:
        gen = JudgeConfig(model="s", base_url=srv.base_url, seed=0, temperature=0.9, max_retries=0)
        pairs = ensure_pool(tmp_path / "pool", n_per_task=1, n=2, generator=gen, test_fraction=0.2)
        assert srv.requests == 60 * 2
        assert ensure_pool(tmp_path / "pool", n_per_task=1, n=2, generator=gen) == pairs and srv.requests == 120
    finally:
        srv.stop()
    train = load_rows(f"labelled:train:{pairs}")
    heldout = load_rows(f"labelled:heldout:{pairs}")
    assert train and not {r.id for r in train} & {r.id for r in heldout}
    assert all(r.labels and r.instructions for r in train)


def test_the_paper_config_is_ready_for_one_gpu_machine(tmp_path):
    """vLLM generator and meta-judge (no API), pairwise as in the paper, pointwise one override away."""
    prompts = tmp_path / "train.jsonl"
    prompts.write_text('{"id": "a", "prompt": "p"}\n')
    path = ROOT / "configs/dpo/qwen3_14b_paper.yaml"
    config = load_loop_config(path, prompts=str(prompts))
    assert config.generator == "Qwen/Qwen3-14B" and config.generator_backend == "vllm"
    assert config.meta_judge["backend"] == "vllm" and "api_key_env" not in config.meta_judge
    assert config.meta.mode == "pairwise" and config.train_launcher == "accelerate"
    pointwise = load_loop_config(path, prompts=str(prompts), meta={"mode": "pointwise", "point_score": "expected_score"})
    assert pointwise.meta.mode == "pointwise" and pointwise.fingerprint() != config.fingerprint()
    import yaml

    judge = yaml.safe_load((ROOT / "configs/dpo/eval_generator.yaml").read_text())["judge"]
    assert judge["model"]  # the evaluation config (MT-Bench, HelpSteer2) is the one the paper config names
    assert "eval_generator.yaml" in path.read_text()
