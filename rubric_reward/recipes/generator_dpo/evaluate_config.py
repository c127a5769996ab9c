"""The ``eval-generator`` YAML: :class:`EvalGeneratorConfig` and the generators under evaluation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...generation.config import GenerationConfig
from ...io.sections import check_fields, from_section
from ..setting_rules import check_urls
from .loop_config import check_judge

__all__ = ["EvalGeneratorConfig", "GeneratorSpec", "HelpSteer2Source", "MTBenchSource", "SplitConfig"]


@dataclass(frozen=True)
class GeneratorSpec:
    """One generator under evaluation: a model spec (as for RubricGenerator: a model string, a mapping of
    JudgeConfig fields, a judge YAML) or a ``rubrics`` JSONL written by ``rubric-reward generate``."""

    name: str = field(metadata={"help": "the generator's name (it names files)"})
    model: Any = field(default=None, metadata={
        "help": "a model string, a mapping of JudgeConfig fields or a judge YAML", "raw": True})
    rubrics: str | None = field(default=None, metadata={"help": "a rubrics JSONL written by rubric-reward generate"})
    base_url: str | None = field(default=None, metadata={"help": "an OpenAI-compatible endpoint for model"})
    train_prompts: str | None = field(default=None, metadata={
        "help": "prompts it was trained on (leak check); set for dpo-loop generators"})

    def __post_init__(self) -> None:
        check_fields(self, "generator")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name or ""):
            raise ValueError(f"generator name {self.name!r}: use letters, digits, '_', '.', '-' (it names files)")
        if (self.model is None) == (self.rubrics is None):
            raise ValueError(f"generator {self.name!r}: give exactly one of 'model' or 'rubrics'")
        if self.base_url is not None:
            check_urls([self.base_url], f"generator {self.name!r}: base_url")
        if self.model is not None:
            check_judge(self.model, f"generator {self.name!r}: model")


@dataclass(frozen=True)
class SplitConfig:
    """The ``split:`` section: the seeded train/test split by prompt."""

    seed: int = field(default=0, metadata={"help": "the split's seed"})
    test_fraction: float = field(default=0.5, metadata={"help": "the share of prompts held out for the test",
                                                         "ge": 0, "le": 1})

    def __post_init__(self) -> None:
        check_fields(self, "eval-generator config.split")


@dataclass(frozen=True)
class MTBenchSource:
    """The ``mt_bench:`` section: MT-Bench human pairwise judgments."""

    source: str = field(default="hub", metadata={"help": "hub, or a local file or folder"})
    split: str = field(default="human", metadata={"help": "the dataset split"})
    turns: tuple[int, ...] = field(default=(1, 2), metadata={"help": "the turns judged"})
    aggregate: str = field(default="majority", metadata={"help": "how several human judgments of a pair combine"})
    limit: int | None = field(default=None, metadata={"help": "evaluate the first N test prompts", "ge": 1})

    def __post_init__(self) -> None:
        check_fields(self, "eval-generator config.mt_bench")


@dataclass(frozen=True)
class HelpSteer2Source:
    """The ``helpsteer2:`` section: HelpSteer2 pointwise ratings."""

    source: str = field(default="hub", metadata={"help": "hub, or a local file or folder"})
    split: str = field(default="validation", metadata={"help": "the dataset split"})
    limit: int | None = field(default=None, metadata={"help": "evaluate the first N test prompts", "ge": 1})

    def __post_init__(self) -> None:
        check_fields(self, "eval-generator config.helpsteer2")


@dataclass(frozen=True)
class EvalGeneratorConfig:
    """Maps 1:1 onto the eval-generator YAML (see ``configs/dpo/eval_generator.yaml``); every section is
    typed once, when the config is built."""

    judge: Any = field(default=None, metadata={"help": "the fixed judge (a model spec), required", "raw": True})
    generators: tuple[GeneratorSpec, ...] = field(default=(), metadata={"help": "the generators under evaluation"})
    loop_dir: str | None = field(default=None, metadata={
        "help": "a dpo-loop folder: its base and trained generators are evaluated too"})
    mt_bench: MTBenchSource | None = field(default_factory=MTBenchSource, metadata={
        "help": "MT-Bench pairwise data (MTBenchSource), or null"})
    helpsteer2: HelpSteer2Source | None = field(default_factory=HelpSteer2Source, metadata={
        "help": "HelpSteer2 pointwise data (HelpSteer2Source), or null"})
    split: SplitConfig = field(default_factory=SplitConfig, metadata={"help": "the train/test split (SplitConfig)"})
    generation: GenerationConfig = field(default_factory=GenerationConfig, metadata={
        "help": "how rubrics are asked for (GenerationConfig)"})
    reference: str | None = field(default=None, metadata={"help": "the generator the others are compared with"})
    seed: int = field(default=0, metadata={"help": "the bootstrap's seed"})
    n_resamples: int = field(default=2000, metadata={"help": "bootstrap resamples", "ge": 100})
    confidence: float = field(default=0.95, metadata={"help": "interval confidence", "gt": 0.5, "lt": 1})
    concurrency: int = field(default=8, metadata={"help": "prompts in flight", "ge": 1})
    out_dir: str = field(default="runs/eval-generator", metadata={"help": "where results and the report go"})
    cache: bool = field(default=True, metadata={"help": "keep a reply cache in out_dir"})
    progress: bool = field(default=True, metadata={"help": "show progress"})

    def __post_init__(self) -> None:
        if self.judge is None:
            raise ValueError("eval-generator config: field 'judge' is required (the fixed judge)")
        check_fields(self, "eval-generator config")
        check_judge(self.judge, "eval-generator config: judge")
        if not str(self.out_dir).strip():
            raise ValueError("eval-generator config: field 'out_dir' is empty: name the output folder")
        gens = self.generators
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
        return from_section(cls, data, "eval-generator config")

