"""How rubrics are asked for: :class:`GenerationConfig` (the ``generation:`` section of every config)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..sections import from_section

__all__ = ["FORMATS", "GenerationConfig"]

FORMATS = ("json", "list")


@dataclass(frozen=True, slots=True)
class GenerationConfig:
    """How rubrics are asked for. ``dataset_sample`` prompts (drawn with ``seed``) are shown for a
    dataset-level rubric; ``reasks`` extra attempts follow an unusable answer (default one).
    ``accept_lists``: an answer without JSON that holds a numbered or bulleted list of criteria (the
    paper's own format, and what small local models tend to write) is read as binary criteria, weight
    1 unless the line ends with one in brackets (recorded as a repair). ``format``: ``json`` asks for
    the JSON schema; ``list`` asks for a numbered list of criteria with bracketed weights after one
    worked example, a format a small local model can follow (DPO targets use the same format).
    ``checks``: offer programmatic checks (a menu of IFEval checks in the instructions, a ``check``
    field in the schema, ``[check]`` lines in the list format); answers may carry checks either way."""

    level: str = "instance"
    min_criteria: int = 3
    max_criteria: int = 10
    dataset_sample: int = 16
    seed: int = 0
    max_tokens: int = 1024
    reasks: int = 1
    concurrency: int = 8
    accept_lists: bool = True
    format: str = "json"
    checks: bool = False

    def __post_init__(self) -> None:
        if self.level not in ("instance", "dataset"):
            raise ValueError(f"generation: field 'level' must be 'instance' or 'dataset', got {self.level!r}")
        if self.format not in FORMATS:
            raise ValueError(f"generation: field 'format' must be 'json' or 'list', got {self.format!r}")
        if not 1 <= self.min_criteria <= self.max_criteria:
            raise ValueError(f"generation: need 1 <= min_criteria <= max_criteria, got "
                             f"{self.min_criteria} and {self.max_criteria}")
        for name in ("dataset_sample", "max_tokens", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"generation: field {name!r} must be >= 1, got {getattr(self, name)}")
        if self.reasks < 0:
            raise ValueError(f"generation: field 'reasks' must be >= 0, got {self.reasks}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> GenerationConfig:
        return from_section(cls, d, "generation")
