"""The ``eval-generator`` YAML: :class:`EvalGeneratorConfig` and the generators under evaluation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["EvalGeneratorConfig", "GeneratorSpec", "known_fields"]


@dataclass(frozen=True)
class GeneratorSpec:
    """One generator under evaluation: a model spec (as for RubricGenerator: a model string, a mapping of
    JudgeConfig fields, a judge YAML) or a ``rubrics`` JSONL written by ``rubric-reward generate``."""

    name: str
    model: Any = None
    rubrics: str | None = None
    base_url: str | None = None
    train_prompts: str | None = None  # prompts it was trained on (leak check); set for dpo-loop generators

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name or ""):
            raise ValueError(f"generator name {self.name!r}: use letters, digits, '_', '.', '-' (it names files)")
        if (self.model is None) == (self.rubrics is None):
            raise ValueError(f"generator {self.name!r}: give exactly one of 'model' or 'rubrics'")


@dataclass(frozen=True)
class EvalGeneratorConfig:
    """Maps 1:1 onto the eval-generator YAML (see ``configs/dpo/eval_generator.yaml``)."""

    judge: Any = None
    generators: tuple[GeneratorSpec, ...] = ()
    loop_dir: str | None = None
    mt_bench: Mapping[str, Any] | None = field(default_factory=lambda: {"source": "hub"})
    helpsteer2: Mapping[str, Any] | None = field(default_factory=lambda: {"source": "hub"})
    split: Mapping[str, Any] = field(default_factory=lambda: {"seed": 0, "test_fraction": 0.5})
    generation: Mapping[str, Any] = field(default_factory=dict)
    reference: str | None = None
    seed: int = 0
    n_resamples: int = 2000
    confidence: float = 0.95
    concurrency: int = 8
    out_dir: str = "runs/eval-generator"
    cache: bool = True
    progress: bool = True

    def __post_init__(self) -> None:
        if self.judge is None:
            raise ValueError("eval-generator config: field 'judge' is required (the fixed judge)")
        gens = tuple(g if isinstance(g, GeneratorSpec) else GeneratorSpec(**known_fields(g, GeneratorSpec, "generator"))
                     for g in self.generators or ())
        if self.loop_dir:
            from .loop import iteration_generators

            prompts = str(Path(self.loop_dir) / "prompts.jsonl")
            gens = tuple(GeneratorSpec(name, model=model, train_prompts=None if name == "base" else prompts)
                         for name, model in iteration_generators(self.loop_dir)) + gens
        if not gens:
            raise ValueError("eval-generator config: no generators (list 'generators' or give 'loop_dir')")
        names = [g.name for g in gens]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"eval-generator config: duplicate generator name(s) {dupes}")
        object.__setattr__(self, "generators", gens)
        if self.reference is not None and self.reference not in names:
            raise ValueError(f"eval-generator config: reference {self.reference!r} is not a generator ({names})")
        if not self.mt_bench and not self.helpsteer2:
            raise ValueError("eval-generator config: give 'mt_bench' and/or 'helpsteer2'")
        known_fields(self.split, None, "split", allowed={"seed", "test_fraction"})
        from ...generation.config import GenerationConfig

        GenerationConfig.from_dict(self.generation)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> EvalGeneratorConfig:
        import yaml

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such config file")
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, Mapping):
            raise ValueError(f"{path}: expected a YAML mapping")
        data = {**data, **{k: v for k, v in overrides.items() if v is not None}}

        def rel(p: Any) -> Any:  # data and rubric files are relative to the config file
            if isinstance(p, str) and p != "hub" and not Path(p).is_absolute():
                return str((path.parent / p).resolve())
            return p

        for section in ("mt_bench", "helpsteer2"):
            if isinstance(data.get(section), Mapping) and "source" in data[section]:
                data[section] = {**data[section], "source": rel(data[section]["source"])}
        data["generators"] = [{**g, **({"rubrics": rel(g["rubrics"])} if g.get("rubrics") else {})}
                              if isinstance(g, Mapping) else g for g in data.get("generators") or []]
        if data.get("loop_dir") and overrides.get("loop_dir") is None:
            data["loop_dir"] = rel(data["loop_dir"])
        return cls(**known_fields(data, cls, "eval-generator config"))


def known_fields(d: Any, cls: Any, where: str, allowed: set[str] | None = None) -> dict[str, Any]:
    if not isinstance(d, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {type(d).__name__}")
    allowed = allowed if allowed is not None else {f.name for f in fields(cls)}
    unknown = set(d) - allowed
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(allowed)}")
    return dict(d)

