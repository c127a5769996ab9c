"""``rubric-reward dpo-loop`` answers a bad config in one line naming the file and the field, exit 2, before a model
is loaded or a judge called (issue 21.8); the config is read once and its sections are typed when it is built."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest.importorskip("trl")

from rubric_reward.cli import main  # noqa: E402
from rubric_reward.recipes.generator_dpo import loop as loop_module  # noqa: E402
from rubric_reward.recipes.generator_dpo.loop_config import load_loop_config  # noqa: E402
from rubric_reward.generation.metajudge import MetaJudgeConfig  # noqa: E402
from rubric_reward.generation.preferences import PreferenceConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "dpo" / "tiny.yaml"


@pytest.fixture
def never_runs(monkeypatch):
    """Any config error must be found before the loop starts (no model loaded, no judge called)."""
    def fail(*a, **k):
        raise AssertionError("the loop started: the config error was not found at load time")

    monkeypatch.setattr(loop_module, "run_loop", fail)


def _write(tmp_path: Path, data: dict | None = None, text: str | bytes | None = None) -> Path:
    path = tmp_path / "bad.yaml"
    if data is not None:
        path.write_text(yaml.safe_dump(data))
    elif isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text or "")
    return path


def _tiny(**loop) -> dict:
    data = yaml.safe_load(TINY.read_text())
    data["loop"].update(generator="smollm2-135m-instruct", meta_judge="m", **loop)
    return data


def _changed(change: dict) -> dict:
    """The tiny config with ``change`` applied (a ``loop`` mapping updates the loop section)."""
    data = _tiny()
    for key, value in change.items():
        if key == "loop":
            data["loop"].update(value)
        else:
            data[key] = value
    return data


def _run(path: Path, capsys) -> str:
    assert main(["dpo-loop", "--config", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(path) in err, err
    return err


@pytest.mark.parametrize("change, expected", [
    ({"loop": {"preferences": {"k": "three"}}}, "loop.preferences: field 'k' must be an integer, got 'three'"),
    ({"loop": {"generation": {"max_tokens": 1.5}}}, "loop.generation: field 'max_tokens' must be an integer"),
    ({"loop": {"meta": {"mode": 3}}}, "loop.meta: field 'mode' must be a string"),
    ({"loop": {"iterations": "two"}}, "loop: field 'iterations' must be an integer"),
    ({"loop": {"generator": "/no/such/model"}}, "loop: field 'generator' names no model folder: /no/such/model"),
    ({"loop": {"prompts": "missing.jsonl"}}, "loop: field 'prompts' names no prompts file"),
    ({"loop": {"meta_judge": {"model": "m", "temprature": 0}}}, "loop.meta_judge: judge config: unknown field(s)"),
    ({"loop": {"heldout": {"samples": "many"}}}, "loop.heldout: field 'samples' must be an integer"),
    ({"betta": 0.1}, "unknown key(s) ['betta']"),
    ({"learning_rate": "fast"}, "learning_rate must be a finite number > 0, got 'fast'"),
])
def test_bad_values_are_one_line_naming_the_field_before_anything_loads(tmp_path, capsys, never_runs, change,
                                                                         expected):
    assert expected in _run(_write(tmp_path, _changed(change)), capsys)


# Every stage's settings are checked when the config is read (issue 59.10): the DPO stage's TRL/PEFT keys, URLs,
# folders, m against k, dtype names, integer-ness, finite and signed ranges. (change, what the one line says)
SETTING_CASES = [
    ({"beta": float("nan")}, "beta must be a finite number > 0, got nan"),
    ({"beta": -0.1}, "beta must be a finite number > 0, got -0.1"),
    ({"beta": 0}, "beta must be a finite number > 0, got 0"),
    ({"learning_rate": float("inf")}, "learning_rate must be a finite number > 0, got inf"),
    ({"learning_rate": "1e-5x"}, "learning_rate must be a finite number > 0, got '1e-5x'"),
    ({"lora_r": -4}, "lora_r must be an integer >= 1, got -4"),
    ({"lora_alpha": 0}, "lora_alpha must be an integer >= 1, got 0"),
    ({"lora_dropout": 1.5}, "lora_dropout must be a finite number in [0, 1), got 1.5"),
    ({"max_steps": 1.5}, "max_steps must be an integer >= 1 or -1, got 1.5"),
    ({"max_steps": 2.0}, "max_steps must be an integer >= 1 or -1, got 2.0"),
    ({"max_steps": True}, "max_steps must be an integer >= 1 or -1, got True"),
    ({"per_device_train_batch_size": 0}, "per_device_train_batch_size must be an integer >= 1, got 0"),
    ({"gradient_accumulation_steps": 0}, "gradient_accumulation_steps must be an integer >= 1, got 0"),
    ({"num_train_epochs": 0}, "num_train_epochs must be a finite number > 0, got 0"),
    ({"warmup_steps": -1}, "warmup_steps must be a ratio in [0, 1) or a whole number >= 1, got -1"),
    ({"weight_decay": -0.1}, "weight_decay must be a finite number >= 0, got -0.1"),
    ({"max_grad_norm": float("nan")}, "max_grad_norm must be a finite number >= 0, got nan"),
    ({"save_steps": 0}, "save_steps must be a ratio in (0, 1) or a whole number >= 1, got 0"),
    ({"logging_steps": 2.5}, "logging_steps must be a ratio in (0, 1) or a whole number >= 1, got 2.5"),
    ({"seed": 1.5}, "seed must be an integer in [0, 4294967295], got 1.5"),
    ({"seed": -1}, "seed must be an integer in [0, 4294967295], got -1"),
    ({"max_length": 0}, "max_length must be an integer >= 1 (or null), got 0"),
    ({"dtype": "bfloat17"}, "dtype must be one of auto, bfloat16, float16, float32 (or null), got 'bfloat17'"),
    ({"loss_type": ["sigmoid", "foo"]}, "loss_type must be one of sigmoid, hinge, ipo"),
    ({"loss_weights": [1.0, -1.0]}, "loss_weights must be a non-empty list of finite numbers >= 0 (or null)"),
    ({"label_smoothing": 0.7}, "label_smoothing must be a finite number in [0, 0.5), got 0.7"),
    ({"use_peft": False}, "use_peft must be true (the rubric generator is trained as a LoRA adapter), got False"),
    ({"f_divergence_type": "js_divergence", "loss_type": ["bco_pair"]},
     "f_divergence_type 'js_divergence' works only with the loss types sigmoid"),
    ({"loss_type": ["exo_pair"]}, "label_smoothing must be > 0 with the exo_pair loss"),
    ({"output_dir": ""}, "output_dir must be a folder path, not empty (or null), got ''"),
    ({"loop": {"meta_judge": {"model": "m", "base_url": "ftp://judge"}}},
     "loop.meta_judge: base_url must be an http:// or https:// URL with a host, got 'ftp://judge'"),
    ({"loop": {"meta_judge": {"model": "m", "base_url": ["http://a:1/v1", "localhost:2"]}}},
     "loop.meta_judge: base_url must be an http:// or https:// URL with a host, got 'localhost:2'"),
    ({"loop": {"meta_judge": {"model": "m", "max_tokens": 10**9}}},
     "loop.meta_judge: max_tokens must be <= 131072, got 1000000000"),
    ({"loop": {"heldout": {"judge": {"model": "m", "base_url": "judge:8000"}}}},
     "loop.heldout.judge: base_url must be an http:// or https:// URL with a host, got 'judge:8000'"),
    ({"loop": {"out_dir": ""}}, "loop: field 'out_dir' is empty"),
    ({"loop": {"out_dir": "  "}}, "loop: field 'out_dir' is empty"),
    ({"loop": {"preferences": {"k": 3, "m": 5}}}, "field 'm' = 5 is more than the 3 distinct pairs of k = 3"),
    ({"loop": {"preferences": {"k": 1, "m": 1}}}, "loop.preferences: field 'k' must be >= 2, got 1"),
    ({"loop": {"generation": {"max_tokens": 10**12}}}, "loop.generation: field 'max_tokens' must be in [1, 131072]"),
    ({"loop": {"meta": {"max_tokens": 10**9}}}, "loop.meta: field 'max_tokens' must be in [1, 131072]"),
    ({"loop": {"merge_dtype": "fp8"}}, "loop: field 'merge_dtype' must be one of float32, bfloat16, float16"),
    ({"loop": {"seed": -1}}, "loop: field 'seed' must be in [0, 4294967295], got -1"),
    ({"loop": {"seed": 1.5}}, "loop: field 'seed' must be an integer or null, got 1.5"),
    ({"loop": {"generator_engine_args": {"dtype": "fp8"}}},
     "loop: field 'generator_engine_args' judge 'generator-iter0': engine_args.dtype must be one of"),
    ({"loop": {"preferences": {"temperature": float("nan")}}},
     "loop.preferences: field 'temperature' must be a finite number"),
]


@pytest.mark.parametrize("change, says", SETTING_CASES, ids=[str(c[0]) for c in SETTING_CASES])
def test_every_setting_is_checked_before_anything_loads(tmp_path, capsys, never_runs, change, says):
    err = _run(_write(tmp_path, _changed(change)), capsys)
    assert says in err, err


def test_an_empty_out_dir_on_the_command_line_is_refused(tmp_path, capsys, never_runs):
    assert main(["dpo-loop", "--config", str(_write(tmp_path, _tiny())), "--out-dir", "", "--quiet"]) == 2
    assert "loop: field 'out_dir' is empty" in capsys.readouterr().err


def test_a_bad_dpo_setting_is_found_before_torch_loads(tmp_path):
    """Within a second and without torch, transformers or TRL: the DPO keys are checked before TRL parses them."""
    import os
    import subprocess
    import sys

    data = _tiny()
    data["beta"] = -1
    path = _write(tmp_path, data)
    code = ("import sys; from rubric_reward.cli import main; "
            "rc = main(['dpo-loop', '--config', sys.argv[1], '--quiet']); "
            "print(rc, sorted(m for m in ('torch', 'transformers', 'trl', 'datasets', 'litellm') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.strip() == "2 []", proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {path}: beta must be a finite number > 0, got -1"], proc.stderr


def test_the_dpo_script_holds_its_command_line_to_the_same_rules():
    """``train/dpo_rubric_generator.py`` (and the in-process stage) parse with TRL and check the parsed values."""
    from rubric_reward.recipes.generator_dpo.dpo import parse_args

    with pytest.raises(ValueError, match=r"^beta must be a finite number > 0, got -1.0$"):
        parse_args(["--config", str(TINY), "--model_name_or_path", "m", "--beta", "-1"])


@pytest.mark.parametrize("change", [{"beta": -1}, {"lora_r": 0}, {"dtype": "bfloat17"}, {"max_steps": 1.5},
                                    {"use_peft": False}, {"loss_type": ["exo_pair"]}], ids=str)
def test_the_loop_and_the_dpo_script_refuse_a_setting_alike(tmp_path, change):
    """One decision: the loop (on the file's keys, before TRL) and the DPO script (on TRL's parsed arguments) call
    the same check and say the same line."""
    from rubric_reward.recipes.generator_dpo.dpo import parse_args

    path = _write(tmp_path, {**_tiny(), **change})
    with pytest.raises(ValueError) as by_loop:
        load_loop_config(path)
    with pytest.raises(ValueError) as by_script:
        parse_args(["--config", str(path), "--model_name_or_path", "m"])
    assert str(by_loop.value) == f"{path}: {by_script.value}"


def test_dpo_rules_name_real_fields_and_pass_trl_defaults():
    import dataclasses
    import importlib.util

    from trl import DPOConfig, ModelConfig

    from rubric_reward.recipes.generator_dpo.dpo import LOSS_TYPES, setting_rules
    from rubric_reward.recipes.setting_rules import check_settings

    rules = setting_rules()
    fields = {f.name: f for cls in (DPOConfig, ModelConfig) for f in dataclasses.fields(cls) if f.init}
    assert set(rules) <= set(fields), set(rules) - set(fields)
    defaults = {n: fields[n].default if fields[n].default is not dataclasses.MISSING else fields[n].default_factory()
                for n in rules if n != "use_peft"}  # use_peft: TRL's default (false) is what the recipe refuses
    check_settings(defaults, rules)
    trainer = (Path(importlib.util.find_spec("trl").origin).parent / "trainer" / "dpo_trainer.py").read_text()
    assert all(f"'{t}'" in trainer for t in LOSS_TYPES)


def test_every_bundled_dpo_config_passes(never_runs):
    """Each shipped config loads (prompt files the user makes first are replaced by the bundled prompts)."""
    from rubric_reward.recipes.generator_dpo.evaluate_config import EvalGeneratorConfig

    for path in sorted((ROOT / "configs" / "dpo").glob("*.yaml")):
        if path.name == "eval_generator.yaml":
            assert EvalGeneratorConfig.from_yaml(path).out_dir
            continue
        extra = {"generator": "smollm2-135m-instruct", "meta_judge": "m"} if path.name == "tiny.yaml" else {}
        if path.name in ("offline_long.yaml", "qwen3_14b_paper.yaml"):  # labelled_pool / an explicit split first
            extra["prompts"] = "offline"
        config = load_loop_config(path, **extra)
        assert config.dpo_args is not None and config.out_dir


def test_eval_generator_checks_its_judges_and_its_folder():
    from rubric_reward.recipes.generator_dpo.evaluate_config import EvalGeneratorConfig

    path = ROOT / "configs" / "dpo" / "eval_generator.yaml"
    with pytest.raises(ValueError, match=r"eval-generator config: judge: base_url must be an http:// or https:// URL"):
        EvalGeneratorConfig.from_yaml(path, judge={"model": "m", "base_url": "ftp://judge"})
    with pytest.raises(ValueError, match=r"generator 'g': base_url must be an http:// or https:// URL .*'localhost:1'"):
        EvalGeneratorConfig.from_yaml(path, generators=[{"name": "g", "model": "m", "base_url": "localhost:1"}])
    with pytest.raises(ValueError, match=r"field 'out_dir' is empty"):
        EvalGeneratorConfig.from_yaml(path, out_dir="")


def test_yaml_syntax_errors_and_encodings_name_the_file(tmp_path, capsys, never_runs):
    err = _run(_write(tmp_path, text="loop:\n  prompts: [offline\n  limit: 3\n"), capsys)
    assert "YAML syntax error" in err and "line " in err
    err = _run(_write(tmp_path, text=b"loop:\n  prompts: caf\xe9\n"), capsys)
    assert "not UTF-8 text" in err
    assert "a DPO config must be a YAML mapping, got list" in _run(_write(tmp_path, text="- 1\n- 2\n"), capsys)
    assert "no such config file" in _run(tmp_path / "nope.yaml", capsys)


def test_sections_are_typed_once_when_the_config_is_built():
    config = load_loop_config(TINY, generator="smollm2-135m-instruct", meta_judge="m",
                              preferences={"k": 2, "m": 1}, meta={"mode": "outcome"})
    assert isinstance(config.preferences, PreferenceConfig) and config.preferences.k == 2
    assert isinstance(config.meta, MetaJudgeConfig) and config.meta.mode == "outcome"
    assert config.dpo_args.training.learning_rate == 1e-2 and config.dpo["lora_r"] == 4  # parsed by TRL, once
    assert config.to_dict()["preferences"]["k"] == 2 and "dpo_args" not in config.to_dict()
    assert config.fingerprint() == load_loop_config(TINY, generator="smollm2-135m-instruct", meta_judge="m",
                                                    preferences={"k": 2, "m": 1},
                                                    meta={"mode": "outcome"}).fingerprint()


def test_the_run_seed_replaces_the_sampling_and_dpo_seeds(tmp_path, monkeypatch):
    """``dpo-loop --seed N``: one config, independent replicates (issue 31: the held-out result over seeds)."""
    kw = dict(generator="smollm2-135m-instruct", meta_judge="m", preferences={"k": 2, "m": 1, "seed": 42},
              meta={"mode": "outcome"})
    plain, seeded = load_loop_config(TINY, **kw), load_loop_config(TINY, seed=3, **kw)
    assert plain.seed is None and plain.preferences.seed == 42
    assert (seeded.seed, seeded.preferences.seed, seeded.dpo_args.training.seed, seeded.dpo["seed"]) == (3, 3, 3, 3)
    assert seeded.fingerprint() != plain.fingerprint() != load_loop_config(TINY, seed=4, **kw).fingerprint()
    seen = {}

    def stop(config, **k):
        seen["config"] = config
        raise KeyboardInterrupt

    monkeypatch.setattr(loop_module, "run_loop", stop)
    assert main(["dpo-loop", "--config", str(_write(tmp_path, _tiny())), "--seed", "7", "--quiet"]) == 130
    assert seen["config"].seed == 7 and seen["config"].dpo_args.training.seed == 7
    argv = []
    monkeypatch.setattr(loop_module.subprocess, "run", lambda cmd, **k: argv.extend(cmd) or type("R", (), {"returncode": 0}))
    loop_module._train_subprocess(seeded, tmp_path, "g", "d", tmp_path)
    assert argv[argv.index("--seed") + 1] == "3"
