"""The dpo-loop's configuration: one YAML read once, every section typed and checked before anything loads.

The file is the DPO script's (TRL keys at the top level: ``RubricDPOArguments``, ``DPOConfig``,
``ModelConfig``) plus a ``loop:`` mapping that maps 1:1 onto :class:`LoopConfig`. :func:`load_loop_config`
reads it once and checks all of it (YAML syntax, encoding, unknown keys and wrong types at the top level
and in every ``loop:`` section, missing files and model folders) before a model is loaded or a judge
called: an error is one ``ValueError`` naming the file, the section and the field. The DPO keys are parsed
into TRL's own dataclasses here (``dpo_args``), and the in-process DPO stage trains from those.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple

from ...generation.config import GenerationConfig
from ...sections import from_section

__all__ = ["LAUNCHERS", "DPOArgs", "HeldoutConfig", "LoopConfig", "load_loop_config", "read_config_file"]

LAUNCHERS = ("python", "accelerate", "in_process")
# fields that may change between a run and its resumption
VOLATILE = ("iterations", "progress", "train_launcher", "accelerate_args", "out_dir", "config_path", "dpo_args")
LABELLED = ("labelled:train", "labelled:heldout")


class DPOArgs(NamedTuple):
    """The DPO keys of a loop config parsed by TRL's parser: (script, training, model) arguments."""

    script: Any
    training: Any
    model: Any


@dataclass(frozen=True)
class HeldoutConfig:
    """The ``loop.heldout:`` section: after every iteration, base vs current generator on held-out prompts.

    ``prompts``: ``labelled:heldout`` (the bundled labelled pairs' held-out side) or a prompts JSONL whose
    rows carry ``labels``; ``limit`` keeps the first N. ``judge``: the fixed judge that scores responses
    with each rubric (default: the loop's meta-judge). ``samples`` rubrics per prompt and generator at
    ``temperature`` (0: greedy, one is enough). Statistics: a paired bootstrap over prompts
    (``n_resamples``, ``confidence``, ``seed``) and McNemar's exact test. A rubric that scores a
    degenerate response at ``exploit_threshold`` or more is exploitable.
    """

    prompts: str = "labelled:heldout"
    limit: int | None = None
    judge: Any = None
    samples: int = 1
    temperature: float = 0.0
    n_resamples: int = 2000
    confidence: float = 0.95
    seed: int = 0
    exploit_threshold: float = 0.5

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"loop.heldout: field 'samples' must be >= 1, got {self.samples}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"loop.heldout: field 'limit' must be a positive integer or null, got {self.limit}")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"loop.heldout: field 'temperature' must be in [0, 2], got {self.temperature}")
        if not 0.5 < self.confidence < 1.0 or self.n_resamples < 100:
            raise ValueError("loop.heldout: need 0.5 < confidence < 1 and n_resamples >= 100")
        if not 0.0 < self.exploit_threshold <= 1.0:
            raise ValueError(f"loop.heldout: field 'exploit_threshold' must be in (0, 1], got {self.exploit_threshold}")


def _sections() -> dict[str, type]:
    from ...generation.metajudge import MetaJudgeConfig
    from ...generation.preferences import PreferenceConfig

    return {"generation": GenerationConfig, "meta": MetaJudgeConfig, "preferences": PreferenceConfig,
            "heldout": HeldoutConfig}


@dataclass(frozen=True)
class LoopConfig:
    """The ``loop:`` section of a DPO config.

    ``prompts``: a prompts JSONL (relative paths are relative to the config file), ``offline`` (the
    bundled prompts) or ``labelled:train`` (the bundled labelled pairs' train side, for the outcome
    meta-judge); ``limit`` keeps the first N. ``generator``: the base generator, a local model (the
    bundled alias, a folder or a hub id) since DPO trains it; ``generator_backend``: how candidates are
    sampled (``transformers`` or ``vllm``); ``generator_engine_args``: that backend's ``engine_args`` (e.g.
    ``{dtype: auto}``), for the base generator and every trained one. ``meta_judge``: a judge spec (a model
    string, a mapping of JudgeConfig fields, or a judge YAML); ``meta``, ``generation``, ``preferences``: the sections of
    MetaJudgeConfig, GenerationConfig and PreferenceConfig (typed when the config is built);
    ``heldout``: a :class:`HeldoutConfig` (or null: no held-out evaluation). ``train_launcher``:
    ``python`` (a subprocess), ``accelerate`` (``accelerate launch`` with ``accelerate_args``) or
    ``in_process``. ``min_pairs``: fewer pairs than this stops the loop. ``dpo``: the file's DPO keys
    (everything but ``loop:``), ``dpo_args`` the same parsed by TRL (set by :func:`load_loop_config`).
    """

    prompts: str = "offline"
    limit: int | None = None
    generator: str | None = None
    generator_backend: str = "transformers"
    generator_engine_args: Mapping[str, Any] = field(default_factory=dict)
    meta_judge: Any = None
    meta: Any = None
    generation: Any = None
    preferences: Any = None
    heldout: Any = None
    iterations: int = 2
    out_dir: str = "runs/dpo-loop"
    train_launcher: str = "python"
    accelerate_args: tuple[str, ...] = ()
    merge_dtype: str | None = None
    min_pairs: int = 1
    cache: bool = True
    progress: bool = True
    config_path: str | None = None
    dpo: Mapping[str, Any] = field(default_factory=dict)
    dpo_args: DPOArgs | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"loop: field {name!r} {why}")

        if not self.generator or not str(self.generator).strip():
            raise bad("generator", "is required: the base generator model that DPO trains")
        if _looks_like_missing_path(str(self.generator)):
            raise bad("generator", f"names no model folder: {self.generator} does not exist")
        if self.meta_judge is None:
            raise bad("meta_judge", "is required: a judge model spec that compares rubrics")
        if self.generator_backend not in ("transformers", "vllm"):
            raise bad("generator_backend", f"must be 'transformers' or 'vllm' (DPO needs the weights), "
                      f"got {self.generator_backend!r}")
        if not isinstance(self.generator_engine_args, Mapping):
            raise bad("generator_engine_args", f"must be a mapping, got {self.generator_engine_args!r}")
        object.__setattr__(self, "generator_engine_args", dict(self.generator_engine_args))
        if self.train_launcher not in LAUNCHERS:
            raise bad("train_launcher", f"must be one of {', '.join(LAUNCHERS)}, got {self.train_launcher!r}")
        if self.iterations < 1:
            raise bad("iterations", f"must be a positive integer, got {self.iterations!r}")
        if self.limit is not None and self.limit < 1:
            raise bad("limit", f"must be a positive integer or null, got {self.limit!r}")
        if self.min_pairs < 1:
            raise bad("min_pairs", f"must be a positive integer, got {self.min_pairs!r}")
        if self.prompts not in ("offline", *LABELLED) and not Path(self.prompts).is_file():
            raise bad("prompts", f"names no prompts file: {self.prompts} does not exist")
        if self.prompts == "labelled:heldout":
            raise bad("prompts", "is the held-out side of the labelled pairs; train on 'labelled:train'")
        object.__setattr__(self, "accelerate_args", tuple(str(a) for a in self.accelerate_args or ()))
        for name, cls in _sections().items():  # typed once, here
            value = getattr(self, name)
            if name == "heldout" and value is None:
                continue
            object.__setattr__(self, name, from_section(cls, value, f"loop.{name}"))
        _check_judge(self.meta_judge, "loop.meta_judge")
        if self.heldout is not None and self.heldout.judge is not None:
            _check_judge(self.heldout.judge, "loop.heldout.judge")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, *, config_path: str | None = None,
                  dpo: Mapping[str, Any] | None = None) -> LoopConfig:
        return from_section(cls, d, "loop", config_path=config_path, dpo=dict(dpo or {}))

    def to_dict(self) -> dict[str, Any]:
        """Every field but ``dpo_args``, sections as mappings (what ``loop.json`` records)."""
        return {f.name: (asdict(v) if hasattr(v, "__dataclass_fields__") else v)
                for f in fields(self) if f.name != "dpo_args" for v in [getattr(self, f.name)]}

    def fingerprint(self) -> str:
        """A hash of what decides the loop's artefacts (not how many iterations, not how it is launched)."""
        import hashlib
        import json

        d = {k: v for k, v in self.to_dict().items() if k not in VOLATILE}
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _looks_like_missing_path(ref: str) -> bool:
    """True for a model reference that is written as a local path and does not exist (a hub id such as
    ``Qwen/Qwen3-14B`` is not a path unless its first part is a local folder)."""
    from ...models import DEFAULT_LOCAL_MODEL

    if ref.strip().lower() == DEFAULT_LOCAL_MODEL:
        return False
    path = Path(ref).expanduser()
    if path.exists():
        return False
    pathlike = ref.startswith(("/", "./", "../", "~")) or os.sep in ref and Path(ref.split(os.sep)[0]).is_dir()
    return pathlike or not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", ref)


def _check_judge(spec: Any, where: str) -> None:
    from ...judges.config import JudgeConfig

    try:
        if isinstance(spec, Mapping):
            JudgeConfig.from_dict(spec)
        elif isinstance(spec, str) and spec.endswith((".yaml", ".yml", ".json")) and not Path(spec).is_file():
            raise ValueError(f"no such judge config file {spec}")
        elif not isinstance(spec, str | Mapping | list):
            raise ValueError(f"expected a model string, a mapping of judge fields or a judge YAML, got {spec!r}")
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def read_config_file(path: Path) -> dict[str, Any]:
    """A YAML mapping from ``path``; missing files, non-UTF-8 bytes, syntax errors and non-mappings are
    one ``ValueError``/``FileNotFoundError`` naming the file (and the line)."""
    import yaml

    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such config file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"{path}: {where}YAML syntax error: {problem}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a DPO config must be a YAML mapping, got {type(data).__name__}")
    return data


def load_loop_config(path: str | Path, **overrides: Any) -> LoopConfig:
    """The config file at ``path`` with ``overrides`` of ``loop:`` fields (None values are ignored), checked
    whole (see the module docstring). Relative prompt paths are relative to the config file."""
    path = Path(path)
    data = read_config_file(path)
    section = data.get("loop")
    if not isinstance(section, Mapping):
        raise ValueError(f"{path}: no 'loop:' section (the dpo-loop's settings)")
    prompts = section.get("prompts", "offline")
    if isinstance(prompts, str) and prompts not in ("offline", *LABELLED) and not Path(prompts).is_absolute():
        section = {**section, "prompts": str((path.parent / prompts).resolve())}
    if overrides.get("prompts") not in (None, "offline", *LABELLED):  # relative to the working directory
        overrides = {**overrides, "prompts": str(Path(overrides["prompts"]).resolve())}
    section = {**section, **{k: v for k, v in overrides.items() if v is not None}}
    dpo = {k: v for k, v in data.items() if k != "loop"}
    try:
        config = LoopConfig.from_dict(section, config_path=str(path.resolve()), dpo=dpo)
        object.__setattr__(config, "dpo_args", _parse_dpo(path, str(config.generator)))  # set once, here
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return config


def _parse_dpo(path: Path, generator: str) -> DPOArgs:
    """The file's DPO keys through TRL's parser (unknown keys and wrong types are errors naming the key)."""
    from .dpo import parse_args

    return DPOArgs(*parse_args(["--config", str(path), "--model_name_or_path", generator]))
