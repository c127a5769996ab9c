"""The configuration of an evaluation run (``EvalConfig``); the YAML file maps one-to-one onto it."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..grading.grader import GradingConfig
from ..judges.config import JudgeConfig, load_judges
from ..judges.fingerprint import plain, public_judge
from ..io.rows import DataSource
from ..arithmetic import ScoringConfig
from ..io.sections import check_fields, from_section
from .dataset import FieldMap

__all__ = ["EvalConfig"]


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """One evaluation run; the YAML file maps one-to-one onto these fields.

    Input paths (``data``, ``rubric``, ``rubrics``, a judges YAML) are resolved against the YAML
    file's folder; outputs (``out_dir``, ``cache``) against the working directory. ``cache: auto``
    puts the reply cache in ``out_dir/cache.sqlite``; ``null`` turns caching off. ``seed`` is the
    grading seed (option shuffling).
    """

    data: DataSource = field(metadata={
        "help": "the items: a path (JSONL, CSV), or a mapping of DataSource fields", "raw": True})
    judges: tuple[JudgeConfig, ...] = field(metadata={
        "help": "a judge, a list of judges (an ensemble), or a judges YAML", "raw": True})
    fields: FieldMap = field(default=FieldMap(), metadata={"help": "which column holds what (FieldMap)"})
    rubric: str | None = field(default=None, metadata={"help": "one rubric for every item (a path)"})
    rubrics: str | None = field(default=None, metadata={"help": "a rubric library file (ids -> rubrics)"})
    scoring: ScoringConfig = field(default=ScoringConfig(), metadata={"help": "ScoringConfig fields"})
    grading: GradingConfig = field(default=GradingConfig(), metadata={
        "help": "GradingConfig fields (the seed is the top-level 'seed')", "raw": True})
    out_dir: str = field(default="runs/eval", metadata={"help": "where results, the manifest and the report go"})
    cache: str | None = field(default="auto", metadata={
        "help": "the reply cache: auto (out_dir/cache.sqlite), a path, or null (off)"})
    max_cost: float | None = field(default=None, metadata={"help": "stop at this judge cost (USD)", "ge": 0})
    seed: int = field(default=0, metadata={"help": "the grading seed (option shuffling)"})
    concurrency: int = field(default=8, metadata={"help": "items judged at once", "ge": 1})
    limit: int | None = field(default=None, metadata={"help": "judge the first N items only", "ge": 1})
    report: bool = field(default=True, metadata={"help": "write the report"})
    progress: bool = field(default=True, metadata={"help": "show progress"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", DataSource.parse(self.data))
        judges = self.judges
        if isinstance(judges, str | Path | Mapping):
            judges = load_judges(judges)
        object.__setattr__(self, "judges", tuple(
            j if isinstance(j, JudgeConfig) else JudgeConfig.from_dict(j) for j in judges
        ))
        if not self.judges:
            raise ValueError("eval config: 'judges' is empty; at least one judge is needed")
        if isinstance(self.grading, Mapping):
            if "seed" in self.grading:
                raise ValueError("eval config: set the seed at the top level ('seed'), not under 'grading'")
            object.__setattr__(self, "grading", from_section(GradingConfig, self.grading, "eval config.grading"))
        elif not isinstance(self.grading, GradingConfig):
            raise ValueError(f"eval config: field 'grading' must be a mapping of GradingConfig fields, "
                             f"got {self.grading!r:.80}")
        check_fields(self, "eval config")
        object.__setattr__(self, "grading", replace(self.grading, seed=self.seed))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base_dir: str | Path | None = None) -> EvalConfig:
        if isinstance(d, Mapping):
            for required in ("data", "judges"):
                if required not in d:
                    raise ValueError(f"eval config: missing field {required!r}")
        d = dict(d) if isinstance(d, Mapping) else d
        if base_dir is not None and isinstance(d, dict):
            base = Path(base_dir)

            def resolve(p: Any) -> Any:
                return os.path.normpath(base / p) if isinstance(p, str) and not Path(p).is_absolute() else p

            data = d["data"]
            if isinstance(data, Mapping):
                d["data"] = {**data, "path": resolve(data.get("path"))} if data.get("path") else dict(data)
            else:
                d["data"] = resolve(data)
            for key in ("rubric", "rubrics"):
                if key in d:
                    d[key] = resolve(d[key])
            if isinstance(d["judges"], str):
                d["judges"] = resolve(d["judges"])
        return from_section(cls, d, "eval config")

    @classmethod
    def from_yaml(cls, path: str | Path) -> EvalConfig:
        from ..io.files import read_structured

        path = Path(path)
        obj = read_structured(path, "eval config file")
        if not isinstance(obj, Mapping):
            raise ValueError(f"{path}: an eval config must be a mapping")
        try:
            return cls.from_dict(obj, base_dir=path.parent)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None

    @property
    def cache_path(self) -> Path | None:
        if self.cache is None or self.cache is False:
            return None
        return Path(self.out_dir) / "cache.sqlite" if self.cache == "auto" else Path(self.cache)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able and secret-free (for the manifest)."""
        return {
            "data": dataclasses.asdict(self.data),
            "judges": [public_judge(j) for j in self.judges],
            "fields": dataclasses.asdict(self.fields),
            "rubric": self.rubric,
            "rubrics": self.rubrics,
            "scoring": plain(dataclasses.asdict(self.scoring)),
            "grading": plain(dataclasses.asdict(self.grading)),
            "out_dir": self.out_dir,
            "cache": self.cache,
            "max_cost": self.max_cost,
            "seed": self.seed,
            "concurrency": self.concurrency,
            "limit": self.limit,
            "report": self.report,
            "progress": self.progress,
        }
