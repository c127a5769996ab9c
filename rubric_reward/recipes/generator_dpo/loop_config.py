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
from ...io.sections import check_fields, from_section
from .dpo import check_settings as check_dpo_settings

__all__ = ["LAUNCHERS", "DPOArgs", "HeldoutConfig", "LoopConfig", "check_judge", "load_loop_config", "read_config_file"]

LAUNCHERS = ("python", "accelerate", "in_process")
# fields that may change between a run and its resumption
VOLATILE = ("iterations", "progress", "train_launcher", "accelerate_args", "out_dir", "config_path", "dpo_args")
LABELLED = ("labelled:train", "labelled:heldout")
MERGE_DTYPES = ("float32", "bfloat16", "float16")


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

    prompts: str = field(default="labelled:heldout", metadata={
        "help": "labelled:heldout, labelled:heldout:FILE, or a prompts JSONL whose rows carry labels"})
    limit: int | None = field(default=None, metadata={"help": "keep the first N prompts", "ge": 1})
    judge: Any = field(default=None, metadata={
        "help": "the fixed judge that scores responses (default: the loop's meta-judge)", "raw": True})
    samples: int = field(default=1, metadata={"help": "rubrics per prompt and generator", "ge": 1})
    temperature: float = field(default=0.0, metadata={"help": "sampling temperature (0: greedy)", "ge": 0, "le": 2})
    n_resamples: int = field(default=2000, metadata={"help": "paired bootstrap resamples", "ge": 100})
    confidence: float = field(default=0.95, metadata={"help": "interval confidence", "gt": 0.5, "lt": 1})
    seed: int = field(default=0, metadata={"help": "the bootstrap's seed"})
    exploit_threshold: float = field(default=0.5, metadata={
        "help": "a rubric scoring a degenerate response at least this is exploitable", "gt": 0, "le": 1})

    def __post_init__(self) -> None:
        check_fields(self, "loop.heldout")


def _sections() -> dict[str, type]:
    from ...generation.metajudge import MetaJudgeConfig  # the meta-judge module imports the judges: kept lazy
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
    ``in_process``. ``min_pairs``: fewer pairs than this stops the loop. ``outcome_criteria`` (outcome
    meta-judge only): ``auto`` measures the judge's spread on ``probe_pairs`` labelled training pairs first and,
    when at least ``probe_max_ties`` of them tie, scores candidates with their check criteria only; ``all`` /
    ``checks`` force one (:mod:`.spread`). ``dpo``: the file's DPO keys
    (everything but ``loop:``), ``dpo_args`` the same parsed by TRL (set by :func:`load_loop_config`).
    """

    prompts: str = field(default="offline", metadata={
        "help": "a prompts JSONL (relative to the config file), offline, labelled:train, or labelled:train:FILE "
                "(the train side of another labelled-pairs file)"})
    limit: int | None = field(default=None, metadata={"help": "keep the first N prompts", "ge": 1})
    generator: str | None = field(default=None, metadata={
        "help": "the base generator, a local model (the bundled alias, a folder or a hub id); required"})
    generator_backend: str = field(default="transformers", metadata={
        "help": "how candidates are sampled (DPO needs the weights)", "choices": ("transformers", "vllm")})
    generator_engine_args: Mapping[str, Any] = field(default_factory=dict, metadata={
        "help": "the generator backend's engine_args (e.g. {dtype: auto})"})
    meta_judge: Any = field(default=None, metadata={
        "help": "a judge spec that compares rubrics (model string, JudgeConfig mapping, judge YAML); required",
        "raw": True})
    meta: Any = field(default=None, metadata={"help": "MetaJudgeConfig fields (typed in __post_init__)"})
    generation: GenerationConfig | None = field(default=None, metadata={"help": "GenerationConfig fields"})
    preferences: Any = field(default=None, metadata={"help": "PreferenceConfig fields (typed in __post_init__)"})
    heldout: HeldoutConfig | None = field(default=None, metadata={
        "help": "HeldoutConfig fields, or null (no held-out evaluation)"})
    iterations: int = field(default=2, metadata={"help": "DPO iterations", "ge": 1})
    out_dir: str = field(default="runs/dpo-loop", metadata={"help": "the loop folder (not empty)"})
    train_launcher: str = field(default="python", metadata={
        "help": "python (a subprocess), accelerate or in_process", "choices": LAUNCHERS})
    accelerate_args: tuple[str, ...] = field(default=(), metadata={"help": "arguments of accelerate launch"})
    merge_dtype: str | None = field(default=None, metadata={
        "help": "the dtype a trained adapter is merged in (default: bfloat16 with CUDA, float32 without)",
        "choices": MERGE_DTYPES})
    min_pairs: int = field(default=1, metadata={"help": "fewer preference pairs than this stops the loop", "ge": 1})
    outcome_criteria: str = field(default="all", metadata={
        "help": "outcome meta-judge: which rubric criteria score responses: all (default), checks (programmatic "
                "checks only), or auto (measure the judge's spread on probe_pairs labelled pairs first; no spread: "
                "checks only; not yet measured on a whole loop)", "choices": ("auto", "all", "checks")})
    probe_pairs: int = field(default=12, metadata={
        "help": "auto: labelled training pairs the judge scores with a judged-only probe rubric", "ge": 1})
    probe_max_ties: float = field(default=0.8, metadata={
        "help": "auto: a probe tie share at least this means no spread (checks only)", "gt": 0, "le": 1})
    seed: int | None = field(default=None, metadata={
        "help": "the run's seed: when set, it replaces preferences.seed (candidate and held-out sampling) and the "
                "DPO seed, so one config gives independent replicates (dpo-loop --seed)", "ge": 0, "le": 2**32 - 1})
    cache: bool = field(default=True, metadata={"help": "keep a reply cache in the loop folder"})
    progress: bool = field(default=True, metadata={"help": "show progress"})
    config_path: str | None = field(default=None, metadata={"help": "the config file (set by load_loop_config)"})
    dpo: Mapping[str, Any] = field(default_factory=dict, metadata={
        "help": "the file's DPO keys (everything but loop:)"})
    dpo_args: DPOArgs | None = field(default=None, compare=False, repr=False, metadata={
        "help": "the DPO keys parsed by TRL (set by load_loop_config)", "raw": True})

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"loop: field {name!r} {why}")

        if not self.generator or not str(self.generator).strip():
            raise bad("generator", "is required: the base generator model that DPO trains")
        for name, cls in _sections().items():  # typed once, here; a missing section takes its defaults
            value = getattr(self, name)
            if not (name == "heldout" and value is None):
                object.__setattr__(self, name, from_section(cls, value, f"loop.{name}"))
        check_fields(self, "loop")
        if not str(self.out_dir).strip():
            raise bad("out_dir", "is empty: name the loop folder (an empty one is the current folder)")
        if _looks_like_missing_path(str(self.generator)):
            raise bad("generator", f"names no model folder: {self.generator} does not exist")
        if self.meta_judge is None:
            raise bad("meta_judge", "is required: a judge model spec that compares rubrics")
        object.__setattr__(self, "generator_engine_args", dict(self.generator_engine_args))
        try:
            self.generator_judge(str(self.generator), 1)  # the generator's backend settings (engine_args)
        except ValueError as exc:
            raise bad("generator_engine_args", str(exc)) from None
        labelled_file = _labelled_file(self.prompts)
        if labelled_file is not None and not Path(labelled_file).is_file():
            raise bad("prompts", f"names no labelled pairs file: {labelled_file} does not exist (see "
                                 "rubric_reward.recipes.generator_dpo.labelled_pool)")
        if labelled_file is None and self.prompts not in ("offline", *LABELLED) and not Path(self.prompts).is_file():
            raise bad("prompts", f"names no prompts file: {self.prompts} does not exist")
        if self.prompts.startswith("labelled:heldout"):
            raise bad("prompts", "is the held-out side of the labelled pairs; train on 'labelled:train'")
        object.__setattr__(self, "accelerate_args", tuple(str(a) for a in self.accelerate_args or ()))
        check_judge(self.meta_judge, "loop.meta_judge")
        if self.heldout is not None and self.heldout.judge is not None:
            check_judge(self.heldout.judge, "loop.heldout.judge")
        if self.outcome_criteria == "checks" and self.meta.mode != "outcome":
            raise bad("outcome_criteria", f"'checks' needs the outcome meta-judge (loop.meta.mode is "
                                          f"{self.meta.mode!r})")

    def generator_judge(self, model: str, iteration: int) -> Any:
        """The JudgeConfig that samples candidate rubrics with ``model`` in ``iteration`` (the loop's default)."""
        from ...judges.config import JudgeConfig

        gen, prefs = self.generation, self.preferences
        return JudgeConfig(model=model, name=f"generator-iter{iteration - 1}", backend=self.generator_backend,
                           engine_args=self.generator_engine_args, verdict_mode="generate",
                           max_tokens=gen.max_tokens, temperature=prefs.temperature, seed=prefs.seed)

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


def _labelled_file(source: str) -> str | None:
    """The file of ``labelled:<side>:<file>`` (None for anything else)."""
    if source.startswith(("labelled:train:", "labelled:heldout:")):
        return source.split(":", 2)[2]
    return None


def _resolve_labelled(source: Any, base: Path) -> Any:
    """``labelled:<side>:<relative file>`` with the file made relative to ``base`` (the config's folder)."""
    if isinstance(source, str):
        file = _labelled_file(source)
        if file is not None and not Path(file).is_absolute():
            return source[: len(source) - len(file)] + str((base / file).resolve())
    return source


def _looks_like_missing_path(ref: str) -> bool:
    """True for a model reference that is written as a local path and does not exist (a hub id such as
    ``Qwen/Qwen3-14B`` is not a path unless its first part is a local folder)."""
    from ...io.models import DEFAULT_LOCAL_MODEL

    if ref.strip().lower() == DEFAULT_LOCAL_MODEL:
        return False
    path = Path(ref).expanduser()
    if path.exists():
        return False
    pathlike = ref.startswith(("/", "./", "../", "~")) or os.sep in ref and Path(ref.split(os.sep)[0]).is_dir()
    return pathlike or not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", ref)


def check_judge(spec: Any, where: str) -> None:
    """A judge spec read as the loop reads it (a model string, a mapping, a judge file or a list), each judge's
    URLs http(s) and its ``max_tokens`` within :data:`~rubric_reward.generation.config.MAX_TOKENS`."""
    from ...generation.config import MAX_TOKENS
    from ...judges.config import JudgeConfig, load_judges
    from ..setting_rules import check_urls

    try:
        if isinstance(spec, str) and spec.endswith((".yaml", ".yml", ".json")) and not Path(spec).is_file():
            raise ValueError(f"no such judge config file {spec}")
        if not isinstance(spec, str | Mapping | list):
            raise ValueError(f"expected a model string, a mapping of judge fields or a judge YAML, got {spec!r}")
        for judge in [JudgeConfig.from_dict(spec)] if isinstance(spec, Mapping) else load_judges(spec):
            check_urls(judge.base_urls, "base_url")
            if judge.max_tokens > MAX_TOKENS:
                raise ValueError(f"max_tokens must be <= {MAX_TOKENS}, got {judge.max_tokens}")
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
    if isinstance(prompts, str) and _labelled_file(prompts) is not None:
        section = {**section, "prompts": _resolve_labelled(prompts, path.parent)}
    elif isinstance(prompts, str) and prompts not in ("offline", *LABELLED) and not Path(prompts).is_absolute():
        section = {**section, "prompts": str((path.parent / prompts).resolve())}
    if isinstance(section.get("heldout"), Mapping):
        section = {**section, "heldout": {**section["heldout"],
                                          "prompts": _resolve_labelled(section["heldout"].get("prompts",
                                                                                              "labelled:heldout"),
                                                                       path.parent)}}
    if isinstance(overrides.get("prompts"), str) and _labelled_file(overrides["prompts"]) is not None:
        overrides = {**overrides, "prompts": _resolve_labelled(overrides["prompts"], Path.cwd())}
    elif overrides.get("prompts") not in (None, "offline", *LABELLED):  # relative to the working directory
        overrides = {**overrides, "prompts": str(Path(overrides["prompts"]).resolve())}
    section = {**section, **{k: v for k, v in overrides.items() if v is not None}}
    dpo = {k: v for k, v in data.items() if k != "loop"}
    seed = section.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):  # the run's seed wins over the sections' seeds
        prefs = section.get("preferences")
        section = {**section, "preferences": {**(prefs if isinstance(prefs, Mapping) else {}), "seed": seed}}
        dpo = {**dpo, "seed": seed}
    try:
        config = LoopConfig.from_dict(section, config_path=str(path.resolve()), dpo=dpo)
        check_dpo_settings(dpo)  # the DPO stage's settings, before TRL (and torch) load
        object.__setattr__(config, "dpo_args", _parse_dpo(path, str(config.generator), config.seed))  # once, here
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return config


def seed_argv(seed: int | None) -> list[str]:
    """The DPO command-line flags that carry the run's seed (none when it is unset): one form for every launcher."""
    return [] if seed is None else ["--seed", str(seed)]


def _parse_dpo(path: Path, generator: str, seed: int | None = None) -> DPOArgs:
    """The file's DPO keys through TRL's parser (unknown keys and wrong types are errors naming the key)."""
    from .dpo import parse_args

    return DPOArgs(*parse_args(["--config", str(path), "--model_name_or_path", generator, *seed_argv(seed)]))
