"""DPO for the rubric generator: config parsing, preference folders, a real LoRA DPO step, merging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

from rubric_reward.recipes.generator_dpo.dpo import (  # noqa: E402
    PreferenceDataError,
    adapt_to_hardware,
    load_preferences,
    merge_adapter,
    parse_args,
    train,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "dpo" / "tiny.yaml"


def _save(rows, path: Path) -> Path:
    from datasets import Dataset

    Dataset.from_list(rows).save_to_disk(str(path))
    return path


def _pairs(n: int = 4) -> list[dict]:
    gen = [{"role": "system", "content": "Write a rubric."}, {"role": "user", "content": "Task: write a poem"}]
    good = '{"name": "poem", "criteria": [{"name": "rhyme", "requirement": "The poem rhymes.", "weight": 1}]}'
    bad = '{"name": "poem", "criteria": [{"name": "good", "requirement": "It is good.", "weight": 1}]}'
    return [{"prompt": gen, "chosen": good, "rejected": bad, "metadata": json.dumps({"prompt_id": f"p{i}"})}
            for i in range(n)]


def test_parse_args_reads_yaml_and_tolerates_only_the_loop_section(tmp_path):
    script, training, model = parse_args(["--config", str(TINY), "--model_name_or_path", "m",
                                          "--dataset_path", "d", "--output_dir", str(tmp_path / "o")])
    assert (model.lora_r, model.use_peft, training.beta, training.max_steps) == (4, True, 0.1, 2)
    assert (script.dataset_path, model.model_name_or_path) == ("d", "m")
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY.read_text() + "\nlora_rank: 8\n")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['lora_rank'\]"):
        parse_args(["--config", str(bad)])
    with pytest.raises(ValueError, match="unknown command-line"):
        parse_args(["--config", str(TINY), "--no_such_flag", "1"])


def test_paper_config_matches_the_paper_and_runs_on_cpu_without_quantisation(tmp_path):
    script, training, model = parse_args(["--config", str(ROOT / "configs/dpo/qwen3_14b_paper.yaml"),
                                          "--output_dir", str(tmp_path)])
    assert (model.lora_r, model.lora_alpha, model.lora_dropout) == (64, 128, 0.05)
    assert set(model.lora_target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                              "down_proj"}
    assert (model.load_in_4bit, model.bnb_4bit_quant_type, model.use_bnb_nested_quant) == (True, "nf4", True)
    assert (training.beta, training.learning_rate, training.per_device_train_batch_size,
            training.gradient_accumulation_steps, training.num_train_epochs, training.max_length,
            training.warmup_steps,
            training.seed) == (0.1, 5e-6, 4, 4, 3, 2048, 0.1, 42)
    changes = adapt_to_hardware(training, model, cuda=False)
    assert not model.load_in_4bit and training.optim == "adamw_torch" and not training.bf16
    assert any("unquantised" in c for c in changes)


def test_preference_folder_errors_name_the_problem(tmp_path):
    with pytest.raises(PreferenceDataError, match="no such preference folder"):
        load_preferences(tmp_path / "absent")
    with pytest.raises(PreferenceDataError, match=r"missing column\(s\) \['rejected'\]"):
        load_preferences(_save([{"prompt": "p", "chosen": "a"}], tmp_path / "cols"))
    rows = _pairs(2)
    rows[1]["rejected"] = rows[1]["chosen"]
    with pytest.raises(PreferenceDataError, match="row 1: 'chosen' and 'rejected' are identical"):
        load_preferences(_save(rows, tmp_path / "same"))
    from datasets import Dataset

    Dataset.from_dict({"prompt": [], "chosen": [], "rejected": []}).save_to_disk(str(tmp_path / "empty"))
    with pytest.raises(PreferenceDataError, match="no preference pairs"):
        load_preferences(tmp_path / "empty")
    data = load_preferences(_save(_pairs(2), tmp_path / "ok"))
    assert data.column_names == ["prompt", "chosen", "rejected"]  # metadata dropped
    assert data[0]["chosen"][0]["role"] == "assistant"  # conversational prompt: answers become assistant turns



@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dpo_step_with_lora_changes_the_adapter_and_merges(tmp_path, tiny_model):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    data = _save(_pairs(4), tmp_path / "pairs")
    out = tmp_path / "adapter"
    script, training, model = parse_args(["--config", str(TINY), "--model_name_or_path", str(tiny_model),
                                          "--dataset_path", str(data), "--output_dir", str(out)])
    adapter = train(script, training, model)
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    lora_b = {k: v for k, v in weights.items() if "lora_B" in k}
    assert lora_b, sorted(weights)[:5]
    # peft initialises every lora_B to zero: a DPO step that learned anything moved them
    moved = [k for k, v in lora_b.items() if v.abs().max().item() > 0]
    assert len(moved) == len(lora_b), f"unchanged lora_B: {sorted(set(lora_b) - set(moved))[:3]}"
    summary = json.loads((adapter / "dpo_summary.json").read_text())
    assert summary["global_step"] == 2 and summary["pairs"] == 4 and summary["train_loss"] > 0

    merged = merge_adapter(str(tiny_model), adapter, tmp_path / "merged")
    assert (merged / "config.json").is_file() and (merged / "tokenizer.json").is_file()
    assert not list(tmp_path.glob(".merged.tmp-*"))
    base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    new = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(base.state_dict()[name], new.state_dict()[name])
    assert not any("lora" in k for k in new.state_dict())


def test_precomputed_reference_log_probs_train_the_same_adapter(tmp_path, tiny_model):
    """offline_grounded.yaml precomputes the reference log-probs (once, not every epoch): the same math."""
    from safetensors.torch import load_file

    data = _save(_pairs(4), tmp_path / "pairs")
    weights = {}
    for pre in ("false", "true"):
        script, training, model = parse_args([
            "--config", str(TINY), "--model_name_or_path", str(tiny_model), "--dataset_path", str(data),
            "--output_dir", str(tmp_path / pre), "--precompute_ref_log_probs", pre, "--loss_type", "sigmoid", "sft",
            "--loss_weights", "1.0", "1.0", "--lora_dropout", "0.05", "--per_device_train_batch_size", "1",
            "--gradient_accumulation_steps", "2"])
        weights[pre] = load_file(str(train(script, training, model) / "adapter_model.safetensors"))
    assert weights["true"].keys() == weights["false"].keys()
    assert all(weights["true"][k].equal(weights["false"][k]) for k in weights["true"])


@pytest.mark.parametrize("name", ["offline_default", "qwen3_14b_paper", "tiny"])
def test_shipped_configs_parse_for_training_and_the_loop(name, tmp_path):
    from rubric_reward.recipes.generator_dpo.loop import load_loop_config

    path = ROOT / "configs" / "dpo" / f"{name}.yaml"
    script, training, model = parse_args(["--config", str(path), "--output_dir", str(tmp_path)])
    assert model.use_peft and training.beta == 0.1
    prompts = tmp_path / "train.jsonl"  # the paper config trains on a file eval-generator writes first
    prompts.write_text('{"id": "a", "prompt": "p"}\n')
    extra = {"prompts": str(prompts)} if name == "qwen3_14b_paper" else {}
    loop = load_loop_config(path, generator="g", meta_judge="m", **extra)  # tiny leaves both to the tests
    assert loop.iterations == 2 and loop.config_path == str(path.resolve())
    assert loop.dpo_args.training.beta == 0.1  # the DPO keys are parsed once, with the loop config


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_interrupted_dpo_run_resumes_from_its_last_checkpoint(tmp_path, tiny_model):
    data = _save(_pairs(4), tmp_path / "pairs")
    out = tmp_path / "adapter"
    common = ["--config", str(TINY), "--model_name_or_path", str(tiny_model), "--dataset_path", str(data),
              "--output_dir", str(out), "--save_strategy", "steps", "--save_steps", "1"]
    train(*parse_args([*common, "--max_steps", "1"]))  # stands in for a run killed after its first checkpoint
    assert (out / "checkpoint-1").is_dir()
    train(*parse_args([*common, "--max_steps", "2"]))
    summary = json.loads((out / "dpo_summary.json").read_text())
    assert summary["resumed_from"].endswith("checkpoint-1") and summary["global_step"] == 2
