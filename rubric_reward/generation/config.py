"""How rubrics are asked for: :class:`GenerationConfig` (the ``generation:`` section of every config)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..io.sections import check_fields, from_section

__all__ = ["FORMATS", "MAX_TOKENS", "GenerationConfig"]

FORMATS = ("json", "list")
#: The longest answer a generation or meta-judge config may ask for: 128k tokens, the largest output window of
#: current models (a rubric or a verdict is a few hundred); more is a typo that would fail at the first call.
MAX_TOKENS = 131_072


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
    field in the schema, ``[check]`` lines in the list format); answers may carry checks either way.
    ``ground_checks``: a check's settings are the task's own (:mod:`~rubric_reward.generation.grounding`).
    ``keep_complete_lines``: a list answer cut off at ``max_tokens`` keeps its complete lines."""

    level: str = field(default="instance", metadata={
        "help": "a rubric per prompt (instance) or one for a dataset sample (dataset)",
        "choices": ("instance", "dataset")})
    min_criteria: int = field(default=3, metadata={"help": "the fewest criteria asked for", "ge": 1})
    max_criteria: int = field(default=10, metadata={"help": "the most criteria asked for", "ge": 1})
    dataset_sample: int = field(default=16, metadata={"help": "prompts shown for a dataset-level rubric", "ge": 1})
    seed: int = field(default=0, metadata={"help": "draws the dataset sample"})
    max_tokens: int = field(default=1024, metadata={"help": "the longest answer", "ge": 1, "le": MAX_TOKENS})
    reasks: int = field(default=1, metadata={"help": "extra attempts after an unusable answer", "ge": 0})
    concurrency: int = field(default=8, metadata={"help": "prompts in flight", "ge": 1})
    accept_lists: bool = field(default=True, metadata={"help": "read a numbered or bulleted list as criteria"})
    format: str = field(default="json", metadata={
        "help": "json (the schema) or list (numbered criteria with bracketed weights)", "choices": FORMATS})
    checks: bool = field(default=False, metadata={"help": "offer programmatic (IFEval) checks"})
    ground_checks: bool = field(default=False, metadata={
        "help": "take a check's settings from the task (its counts, listed words, quoted phrase) and drop a "
                "check the task gives no value for (generation/grounding.py)"})
    keep_complete_lines: bool = field(default=False, metadata={
        "help": "format list: an answer cut off at max_tokens is read without its unfinished last line (recorded "
                "as a repair) instead of being asked again; a small generator that loops on a line is cut off "
                "after it has written its list"})

    def __post_init__(self) -> None:
        check_fields(self, "generation")
        if not self.min_criteria <= self.max_criteria:
            raise ValueError(f"generation: need 1 <= min_criteria <= max_criteria, got "
                             f"{self.min_criteria} and {self.max_criteria}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> GenerationConfig:
        return from_section(cls, d, "generation")
