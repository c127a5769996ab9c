"""train/grpo.py answers bad input in one line naming the file or command line, the key and the field, with
exit 2, before anything heavy loads (rubric_reward.recipes.grpo.check).

The table runs ``rubric_reward.recipes.grpo.launch.main`` in this process (milliseconds per case); one subprocess run
checks that a bad config is answered without importing torch, transformers or TRL's trainer, and one runs a
case under ``accelerate launch --quiet`` as the README writes it.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OFFLINE = REPO / "configs" / "grpo" / "offline_default.yaml"
BIN = Path(sys.executable).parent

# (id, YAML laid over the offline default ("raw:" written as it is; None: the offline default itself), extra argv,
# what the one line must name). "{tmp}" is the test's folder; "{bad}" the config file written for the case.
CASES = [
    ("missing config", None, ["--config", "{tmp}/nope.yaml"], ["nope.yaml", "no such file"]),
    ("--config without a path", None, ["--config"], ["command line", "--config"]),
    ("YAML syntax error", "raw:max_steps: [1,\n", [], ["{bad}", "line 2", "not valid YAML"]),
    ("config is a list", "raw:- max_steps\n- 2\n", [], ["{bad}", "mapping", "list"]),
    ("config not UTF-8", b"max_steps: 2\n# \xff\xfe\n", [], ["{bad}", "not UTF-8"]),
    ("unknown key in the YAML", "max_stepz: 2\n", [], ["{bad}", "max_stepz", "unknown key", "max_steps"]),
    ("unknown flag", None, ["--max_stepz", "2"], ["command line", "--max_stepz", "--max_steps"]),
    ("stray positional argument", None, ["oops"], ["command line", "'oops'"]),
    ("wrong type in the YAML", "max_steps: many\n", [], ["{bad}", "max_steps", "expected int", "'many'"]),
    ("wrong type on the command line", None, ["--learning_rate", "fast"],
     ["command line (--learning_rate)", "expected float", "'fast'"]),
    ("not a bool", None, ["--monitor", "maybe"], ["--monitor", "expected bool", "'maybe'"]),
    ("unknown key in reward_config", "reward_config: {rewrd: score}\n", [], ["{bad}", "reward_config", "rewrd"]),
    ("unknown key in reward_config.guards", "reward_config: {guards: {degenrate: true}}\n", [],
     ["{bad}", "reward_config", "guards", "degenrate"]),
    ("reward: best_score", "reward_config: {reward: best_score}\n", [], ["{bad}", "reward_config", "best_score"]),
    ("reward_config file missing", "reward_config: {tmp}/nope_reward.yaml\n", [],
     ["{bad}", "reward_config", "nope_reward.yaml"]),
    ("reward_config not a mapping", "reward_config: 5\n", [], ["{bad}", "reward_config", "int"]),
    ("unknown judge field", "judge: {model: m, temprature: 0}\n", [], ["{bad}: judge:", "temprature"]),
    ("bad judge backend", "judge: {model: m, backend: tgi}\n", [], ["{bad}", "judge", "backend", "tgi"]),
    ("empty judge list", "judge: []\n", [], ["{bad}", "judge", "expected a judge"]),
    ("unknown shaping reward", "shaping_rewards: {repetiton_penalty: {}}\n", [],
     ["{bad}: shaping_rewards: unknown field(s) ['repetiton_penalty']", "repetition_penalty"]),
    ("positive repetition penalty", "shaping_rewards: {repetition_penalty: {max_penalty: 0.5}}\n", [],
     ["{bad}: shaping_rewards.repetition_penalty: field 'max_penalty' must be <= 0"]),
    ("shaping parameter of the wrong type", "shaping_rewards: {soft_overlong_punishment: {soft_punish_cache: 1.5}}\n",
     [], ["{bad}: shaping_rewards.soft_overlong_punishment: field 'soft_punish_cache' must be an integer"]),
    ("overlong cache above the cap", "shaping_rewards: {soft_overlong_punishment: {soft_punish_cache: 200}}\n", [],
     ["{bad}", "soft_punish_cache", "200", "max_completion_length (96)"]),
    ("reward weights that miss the shaping reward", "shaping_rewards: {repetition_penalty: {}}\nreward_weights: [1.0]\n",
     [], ["{bad}", "reward_weights", "1 weight(s) for 2 rewards"]),
    ("reward weights beside per-criterion rewards", "per_criterion_rewards: true\nreward_weights: [1.0]\n", [],
     ["{bad}", "reward_weights: leave unset with per_criterion_rewards"]),
    ("rubric file missing", "rubric: {tmp}/nope_rubric.yaml\n", [], ["{bad}", "rubric", "nope_rubric.yaml"]),
    ("unknown key in data", "data: {selction: 3}\n", [], ["{bad}", "data", "selction", "selection"]),
    ("data not a mapping", "data: [1, 2]\n", [], ["{bad}", "data", "mapping", "list"]),
    ("negative split size", "data: {selection: -1, report: 3, train: rest}\n", [], ["{bad}", "data", "selection"]),
    ("split sizes over the rows", "data: {selection: 300, report: 100, train: rest}\n", [],
     ["{bad}", "data", "more than the 340 rows"]),
    ("unknown data format", "data: {format: csv}\n", [], ["{bad}", "data", "format", "'csv'"]),
    ("dataset file missing", "dataset_name: {tmp}/nope.jsonl\n", [], ["{bad}", "dataset_name", "nope.jsonl"]),
    ("broken AdvancedIF row", "dataset_name: {tmp}/advif_bad_row.csv\n", [],
     ["{bad}", "dataset_name", "advif_bad_row.csv", "row 1", "prompt_metadata"]),
    ("missing AdvancedIF column", "dataset_name: {tmp}/advif_no_column.csv\n", [],
     ["{bad}", "dataset_name", "advif_no_column.csv", "conversation_history"]),
    ("generation_backend: tpu", "generation_backend: tpu\n", [], ["{bad}", "generation_backend", "'tpu'"]),
    ("bad recipe number", None, ["--eval_batch_size", "0"], ["command line (--eval_batch_size)", "eval_batch_size"]),
    ("model path missing", "model_name_or_path: /nope/model\n", [], ["{bad}", "model_name_or_path", "/nope/model"]),
    ("unknown top-level reward key", "reward: best_score\n", [], ["{bad}", "reward: unknown key", "under reward_config"]),
    # issue 32.6: types and ranges everywhere, each error naming the file, the section and the field
    ("NaN length penalty", "reward_config: {length_penalty: {enabled: true, penalty: .nan}}\n", [],
     ["{bad}", "reward_config", "length_penalty: field 'penalty' must be a finite number"]),
    ("penalty enabled: 'no'", "reward_config: {length_penalty: {enabled: 'no'}}\n", [],
     ["{bad}", "reward_config", "length_penalty: field 'enabled' must be true or false, got 'no'"]),
    ("NaN unscored_reward", "reward_config: {unscored_reward: .nan}\n", [],
     ["{bad}", "reward_config", "field 'unscored_reward' must be a finite number"]),
    ("infinite deadline", "reward_config: {deadline_s: .inf}\n", [],
     ["{bad}", "reward_config", "field 'deadline_s' must be a finite number"]),
    ("a word where a share goes", "reward_config: {max_unscorable_fraction: high}\n", [],
     ["{bad}", "reward_config", "field 'max_unscorable_fraction' must be a number, got 'high'"]),
    ("NaN watch threshold", "watch: {min_rise: .nan}\n", [], ["{bad}", "watch", "field 'min_rise' must be a finite"]),
    ("fractional stop_after", "watch: {stop_after: 1.5}\n", [],
     ["{bad}", "watch", "field 'stop_after' must be an integer, got 1.5"]),
    ("copied_share over 1", "watch: {copied_share: 5}\n", [], ["{bad}", "watch", "field 'copied_share' must be in [0, 1]"]),
    ("local judge dtype", "judge: {model: m, backend: transformers, engine_args: {dtype: fp8}}\n", [],
     ["{bad}", "judge", "engine_args.dtype must be one of", "'fp8'"]),
]

# Every setting the run uses, checked before anything loads (issue 59.9): (YAML laid over the offline default, or
# command-line flags; what the one line says after "<where>: "). TRL takes each of these and the trainer, PEFT or
# the monitor fails on it later (or, for beta, trains with a negated KL term).
SETTING_CASES = [
    ("beta: -1", "beta must be a finite number >= 0, got -1"),
    ("beta: .nan", "beta must be a finite number >= 0, got nan"),
    ("confidence: 1.5", "confidence must be a finite number in (0, 1), got 1.5"),
    ("confidence: .nan", "confidence must be a finite number in (0, 1), got nan"),
    ("confidence: 0", "confidence must be a finite number in (0, 1), got 0"),
    ("learning_rate: .nan", "learning_rate must be a finite number > 0, got nan"),
    ("learning_rate: .inf", "learning_rate must be a finite number > 0, got inf"),
    ("learning_rate: 0", "learning_rate must be a finite number > 0, got 0"),
    ("learning_rate: -1.0e-5", "learning_rate must be a finite number > 0, got -1e-05"),
    ("learning_rate: [0.1]", "learning_rate: expected float, got list [0.1]"),
    ("temperature: -1", "temperature must be a finite number > 0, got -1"),
    ("temperature: 0", "temperature must be a finite number > 0, got 0"),
    ("temperature: hot", "temperature: expected float, got 'hot'"),
    ("top_p: 0", "top_p must be a finite number in (0, 1], got 0"),
    ("top_p: 1.5", "top_p must be a finite number in (0, 1], got 1.5"),
    ("lora_r: 0", "lora_r must be an integer >= 1, got 0"),
    ("lora_r: -4", "lora_r must be an integer >= 1, got -4"),
    ("lora_r: 2.5", "lora_r: expected int, got float 2.5"),
    ("lora_alpha: 0", "lora_alpha must be an integer >= 1, got 0"),
    ("lora_dropout: 1", "lora_dropout must be a finite number in [0, 1), got 1"),
    ("lora_dropout: -0.1", "lora_dropout must be a finite number in [0, 1), got -0.1"),
    ("num_generations: 1", "num_generations must be an integer >= 2 (or null), got 1"),
    ("max_steps: 0", "max_steps must be an integer >= 1 or -1, got 0"),
    ("max_steps: -2", "max_steps must be an integer >= 1 or -1, got -2"),
    ("max_steps: 2.5", "max_steps: expected int, got float 2.5"),
    ("num_train_epochs: 0", "num_train_epochs must be a finite number > 0, got 0"),
    ("per_device_train_batch_size: 0", "per_device_train_batch_size must be an integer >= 1, got 0"),
    ("gradient_accumulation_steps: 0", "gradient_accumulation_steps must be an integer >= 1, got 0"),
    ("max_completion_length: 0", "max_completion_length must be an integer >= 1 (or null), got 0"),
    ("warmup_steps: -1", "warmup_steps must be a ratio in [0, 1) or a whole number >= 1, got -1"),
    ("warmup_steps: 2.5", "warmup_steps must be a ratio in [0, 1) or a whole number >= 1, got 2.5"),
    ("weight_decay: -0.1", "weight_decay must be a finite number >= 0, got -0.1"),
    ("max_grad_norm: -1", "max_grad_norm must be a finite number >= 0, got -1"),
    ("save_steps: 0", "save_steps must be a ratio in (0, 1) or a whole number >= 1, got 0"),
    ("logging_steps: 0", "logging_steps must be a ratio in (0, 1) or a whole number >= 1, got 0"),
    ("eval_steps: 1.5", "eval_steps must be a ratio in (0, 1) or a whole number >= 1 (or null), got 1.5"),
    ("seed: -1", "seed must be an integer in [0, 4294967295], got -1"),
    ("seed: 1.5", "seed: expected int, got float 1.5"),
    ("dtype: bfloat17", "dtype must be one of auto, bfloat16, float16, float32 (or null), got 'bfloat17'"),
    ("loss_type: ppo", "loss_type must be one of grpo, dr_grpo, dapo, bnpo, cispo, sapo, luspo, vespo, got 'ppo'"),
    ("scale_rewards: false", "scale_rewards must be one of group, batch, none, got False"),
    ("reward_weights: [1.0, .nan]",
     "reward_weights must be a non-empty list of finite numbers (or null), got [1.0, nan]"),
    ("vllm_gpu_memory_utilization: 1.5", "vllm_gpu_memory_utilization must be a finite number in (0, 1], got 1.5"),
    ("output_dir: ''", "output_dir must be a folder path, not empty (or null), got ''"),
    ("judge_base_url: ftp://judge.example", "judge_base_url must be an http:// or https:// URL with a host (or null), "
                                            "got 'ftp://judge.example'"),
    ("judge_base_url: localhost:8000", "judge_base_url must be an http:// or https:// URL with a host (or null), "
                                       "got 'localhost:8000'"),
    ("monitor_judge_base_url: 'http://'", "monitor_judge_base_url must be an http:// or https:// URL with a host"),
    ("generation_base_url: 'http://h:99999/v1'", "generation_base_url must be an http:// or https:// URL with a host"),
    ("judge: {model: m, base_url: 'file:///tmp/judge'}",
     "judge: base_url must be an http:// or https:// URL with a host, got 'file:///tmp/judge'"),
    ("reward_config: {judge: {model: m, base_url: 'htp://x'}}",
     "reward_config: base_url must be an http:// or https:// URL with a host, got 'htp://x'"),
    ("eval_max_new_tokens: 0", "eval_max_new_tokens must be an integer >= 1, got 0"),
    ("bootstrap_resamples: 0", "bootstrap_resamples must be an integer >= 1, got 0"),
    ("ifeval_max_new_tokens: 0", "ifeval_max_new_tokens must be an integer >= 1 (or null), got 0"),
    ("torch_threads: 0", "torch_threads must be an integer >= 1 (or null), got 0"),
    ("eval_dtype: fp8", "eval_dtype must be one of auto, float32, bfloat16, float16, got 'fp8'"),
    ("generation_backend: openai", "generation_backend is openai, which needs generation_base_url"),
    (["--beta", "-1"], "beta must be a finite number >= 0, got -1.0"),
    (["--learning_rate", "nan"], "learning_rate must be a finite number > 0, got nan"),
    (["--confidence", "2"], "confidence must be a finite number in (0, 1), got 2.0"),
    (["--lora_r", "0"], "lora_r must be an integer >= 1, got 0"),
    (["--temperature=-1"], "temperature must be a finite number > 0, got -1.0"),
]


def _advancedif_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _row(i: int) -> dict:
    return {"conversation_history": json.dumps([{"role": "user", "content": f"Task {i}"}]),
            "prompt_metadata": json.dumps({"rubrics": json.dumps([f"Is task {i} done?"])}),
            "benchmark_name": "complex_if_single_turn_v5"}


def _case_files(tmp: Path) -> None:
    bad = [_row(0), {**_row(1), "prompt_metadata": "{not json"}, _row(2)]
    _advancedif_csv(tmp / "advif_bad_row.csv", bad)
    _advancedif_csv(tmp / "advif_no_column.csv", [{k: v for k, v in _row(i).items() if k != "conversation_history"}
                                                   for i in range(3)])


def _argv(tmp: Path, overlay: str | bytes | None, extra: list[str]) -> tuple[list[str], Path]:
    bad = tmp / "bad.yaml"
    if overlay is None:
        argv = ["--config", str(OFFLINE)] if "--config" not in extra else []
    elif isinstance(overlay, bytes):
        bad.write_bytes(overlay)
        argv = ["--config", str(bad)]
    else:
        text = overlay.replace("{tmp}", str(tmp))
        if text.startswith("raw:"):
            bad.write_text(text.removeprefix("raw:"), encoding="utf-8")
        else:
            import yaml

            merged = {**yaml.safe_load(OFFLINE.read_text()), **yaml.safe_load(text)}
            bad.write_text(yaml.safe_dump(merged, sort_keys=False), encoding="utf-8")
        argv = ["--config", str(bad)]
    return argv + [x.replace("{tmp}", str(tmp)) for x in extra], bad


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Training stubbed: a config the check lets through fails at once instead of training the offline default."""
    from rubric_reward.recipes.grpo import launch

    def refuse(*args, **kwargs):
        raise AssertionError("the bad config reached training")

    monkeypatch.setattr(launch, "run", refuse)


@pytest.mark.parametrize(("overlay", "extra", "named"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_config_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], no_training: None,
                                       overlay, extra, named) -> None:
    from rubric_reward.recipes.grpo.launch import main

    _case_files(tmp_path)
    argv, bad = _argv(tmp_path, overlay, extra)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and not out.strip(), err
    for fragment in named:
        assert fragment.replace("{bad}", str(bad)) in lines[0], lines[0]


@pytest.mark.parametrize(("setting", "says"), SETTING_CASES, ids=[" ".join(c[0]) if isinstance(c[0], list) else c[0]
                                                                  for c in SETTING_CASES])
def test_every_setting_is_checked_before_anything_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        no_training: None, setting, says) -> None:
    """One line naming where the value came from and the field, exit 2, from the check (TrlParser never runs)."""
    from rubric_reward.recipes.grpo import launch

    cli = isinstance(setting, list)
    argv, bad = _argv(tmp_path, None if cli else setting, setting if cli else [])
    where = f"command line (--{setting[0][2:].split('=')[0]})" if cli else str(bad)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(launch, "_parse", lambda argv: pytest.fail("the bad setting passed the check"))
        assert launch.main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and not out.strip(), err
    assert f"{where}: {says}" in lines[0], lines[0]


@pytest.mark.parametrize("field, value", [("confidence", 1.5), ("eval_batch_size", 0), ("judge_base_url", "ftp://x"),
                                          ("eval_dtype", "fp8"), ("train_order", "random")])
def test_recipe_arguments_and_the_check_refuse_a_setting_alike(capsys: pytest.CaptureFixture[str], no_training: None,
                                                               field: str, value) -> None:
    """One decision: RecipeArguments built in Python (or by TrlParser) and the check say the same line."""
    from rubric_reward.recipes.grpo import RecipeArguments, launch

    with pytest.raises(ValueError) as built:
        RecipeArguments(**{field: value})
    assert launch.main([f"--{field}", str(value)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"command line (--{field}): {built.value}")


def test_setting_rules_name_real_fields_and_pass_trl_defaults() -> None:
    """Every rule names a field the parser has, and TRL's, transformers' and the recipe's own defaults pass."""
    import dataclasses

    from trl import GRPOConfig, ModelConfig

    from rubric_reward.recipes.grpo import RecipeArguments
    from rubric_reward.recipes.grpo.check import parser_fields, setting_rules
    from rubric_reward.recipes.setting_rules import check_settings

    rules = setting_rules()
    assert set(rules) <= set(parser_fields()), set(rules) - set(parser_fields())
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for cls in (GRPOConfig, ModelConfig, RecipeArguments) for f in dataclasses.fields(cls)
                if f.init and f.name in rules and (f.default is not dataclasses.MISSING
                                                   or f.default_factory is not dataclasses.MISSING)}
    check_settings(defaults, rules)
    assert len(defaults) == len(rules)


def test_setting_rules_choices_are_trls() -> None:
    """The choice lists are the installed TRL's (its help texts and trainer name each value)."""
    import importlib.util

    from rubric_reward.recipes.grpo.check import setting_rules

    trl = Path(importlib.util.find_spec("trl").origin).parent / "trainer"
    source = "".join((trl / name).read_text(encoding="utf-8") for name in ("grpo_config.py", "grpo_trainer.py"))
    for name in ("loss_type", "importance_sampling_level", "scale_rewards", "multi_objective_aggregation", "vllm_mode",
                 "vllm_importance_sampling_mode"):
        choices = setting_rules()[name].says.removeprefix("one of ").split(", ")
        missing = [c for c in choices if f"'{c}'" not in source and f'"{c}"' not in source]
        assert not missing, (name, missing)


def test_good_configs_pass_the_check() -> None:
    """Every shipped config passes (the hub datasets are left to the run)."""
    from rubric_reward.data import PROMPT_SETS
    from rubric_reward.recipes.grpo.check import check_arguments

    for config in sorted((REPO / "configs" / "grpo").glob("*.yaml")):
        extra = ["--model_name_or_path", "Qwen/Qwen3-0.6B"] if config.name in ("tiny_cpu.yaml", "gpu_check.yaml") else []
        checked = check_arguments(["--config", str(config), *extra, "--max_steps", "3", "--no_monitor"])
        assert checked.settings["max_steps"] == 3 and checked.settings["monitor"] is False
        # bundled prompt sets are loaded and split by the check; ifeval_types (a list) passes
        assert (checked.splits is None) == (checked.settings["dataset_name"] not in PROMPT_SETS)


def test_parser_fields_read_from_source_match_the_dataclasses() -> None:
    """The field names read with ast are those TrlParser gets from the imported dataclasses."""
    from trl import GRPOConfig, ModelConfig

    from rubric_reward.recipes.grpo import RecipeArguments
    from rubric_reward.recipes.grpo.check import parser_fields, simple_type

    known = parser_fields()
    assert known is not None
    expected = {f.name for cls in (GRPOConfig, ModelConfig, RecipeArguments) for f in fields(cls) if f.init}
    assert set(known) == expected
    assert simple_type(known["max_steps"]) == (int, False) and simple_type(known["learning_rate"]) == (float, False)
    assert simple_type(known["ifeval_limit"]) == (int, True) and simple_type(known["report_to"]) is None


@pytest.mark.parametrize("argv", [["--max_stepz", "2"], ["--beta", "-1"], ["--confidence", "1.5"],
                                  ["--dtype", "bfloat17"]], ids=" ".join)
def test_check_does_not_import_the_training_stack(tmp_path: Path, argv: list[str]) -> None:
    code = (f"import sys; from rubric_reward.recipes.grpo.launch import main; rc = main({argv!r}); "
            "heavy = sorted(m for m in ('torch', 'transformers', 'trl.trainer.grpo_config', 'datasets', 'litellm') "
            "if m in sys.modules); print(rc, heavy)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.stdout.strip() == "2 []", proc.stdout + proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and argv[0] in proc.stderr


def test_parser_errors_after_the_check_are_one_line_too(capsys: pytest.CaptureFixture[str],
                                                        no_training: None) -> None:
    """A GRPOConfig cross-field rule (TrlParser's own) comes back as one line, exit 2."""
    from rubric_reward.recipes.grpo import launch

    argv = ["--per_device_train_batch_size", "3", "--gradient_accumulation_steps", "1", "--num_generations", "4"]
    assert launch.main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(OFFLINE) in lines[0] and "num_generations" in lines[0], lines


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "line"), [
    (["--max_stepz", "2"], "grpo.py: error: command line: --max_stepz: unknown argument (did you mean --max_steps?)"),
    (["--config", "configs/grpo/tiny_cpu.yaml", "--beta", "-1"],
     "grpo.py: error: command line (--beta): beta must be a finite number >= 0, got -1.0"),
], ids=["unknown flag", "bad setting"])
def test_accelerate_launch_shows_the_one_line(tmp_path: Path, argv: list[str], line: str) -> None:
    """Under ``accelerate launch --quiet`` the user sees the script's line and nothing else, within seconds (no model
    loads); without ``--quiet`` accelerate raises its own ``CalledProcessError`` after that line for any child that
    exits non-zero (docs/training.md says so): nothing in the child can stop it."""
    import time

    base = [str(BIN / "accelerate"), "launch", "--config_file", str(REPO / "configs" / "accelerate" / "one_process.yaml")]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started = time.monotonic()
    proc = subprocess.run([*base, "--quiet", "train/grpo.py", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=env)
    text = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 1 and text.splitlines() == [line], text
    assert time.monotonic() - started < 60  # the check's seconds plus accelerate's start, not a model load
    proc = subprocess.run([*base, "train/grpo.py", *argv], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=env)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 1 and lines[0] == line and lines[1] == "Traceback (most recent call last):", lines
    assert lines[-1].startswith("subprocess.CalledProcessError:") and "exit status 2" in lines[-1], lines
