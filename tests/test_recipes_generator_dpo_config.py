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
    ({"learning_rate": "fast"}, "field 'learning_rate': invalid float value: 'fast'"),
])
def test_bad_values_are_one_line_naming_the_field_before_anything_loads(tmp_path, capsys, never_runs, change,
                                                                         expected):
    data = _tiny()
    for key, value in change.items():
        if key == "loop":
            data["loop"].update(value)
        else:
            data[key] = value
    assert expected in _run(_write(tmp_path, data), capsys)


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
