"""The configuration of an evaluation run (``EvalConfig``); the YAML file maps one-to-one onto it."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..grader import GradingConfig
from ..judges.config import JudgeConfig, load_judges
from ..judges.fingerprint import plain, public_judge
from ..rows import DataSource
from ..scoring import ScoringConfig
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

    data: DataSource
    judges: tuple[JudgeConfig, ...]
    fields: FieldMap = FieldMap()
    rubric: str | None = None
    rubrics: str | None = None
    scoring: ScoringConfig = ScoringConfig()
    grading: GradingConfig = GradingConfig()
    out_dir: str = "runs/eval"
    cache: str | None = "auto"
    max_cost: float | None = None
    seed: int = 0
    concurrency: int = 8
    limit: int | None = None
    report: bool = True
    progress: bool = True

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
        if isinstance(self.fields, Mapping):
            object.__setattr__(self, "fields", FieldMap(**self.fields))
        if isinstance(self.scoring, Mapping):
            object.__setattr__(self, "scoring", ScoringConfig(**self.scoring))
        if isinstance(self.grading, Mapping):
            if "seed" in self.grading:
                raise ValueError("eval config: set the seed at the top level ('seed'), not under 'grading'")
            object.__setattr__(self, "grading", GradingConfig(**self.grading))
        object.__setattr__(self, "grading", replace(self.grading, seed=self.seed))
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"eval config: 'concurrency' must be a positive integer, got {self.concurrency!r}")
        if self.max_cost is not None and (not isinstance(self.max_cost, int | float) or self.max_cost < 0):
            raise ValueError(f"eval config: 'max_cost' must be a non-negative number, got {self.max_cost!r}")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise ValueError(f"eval config: 'limit' must be a positive integer, got {self.limit!r}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base_dir: str | Path | None = None) -> EvalConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"eval config: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        for required in ("data", "judges"):
            if required not in d:
                raise ValueError(f"eval config: missing field {required!r}")
        d = dict(d)
        if base_dir is not None:
            base = Path(base_dir)

            def resolve(p: Any) -> Any:
                return os.path.normpath(base / p) if isinstance(p, str) and not Path(p).is_absolute() else p

            data = d["data"]
            if isinstance(data, Mapping):
                d["data"] = {**data, "path": resolve(data.get("path"))} if data.get("path") else dict(data)
            else:
                d["data"] = resolve(data)
            for key in ("rubric", "rubrics"):
                d[key] = resolve(d.get(key))
            if isinstance(d["judges"], str):
                d["judges"] = resolve(d["judges"])
        return cls(**d)

    @classmethod
    def from_yaml(cls, path: str | Path) -> EvalConfig:
        from ..files import read_structured

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
