"""Data shipped with the package: offline prompts with rubrics, and the IFEval prompts."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["PROMPT_SETS", "OfflinePrompt", "load_offline_prompts", "prompt_set_path"]

#: Bundled prompt sets with rubrics, by name (JSONL rows: id, prompt, rubric, benchmark).
PROMPT_SETS = {"offline": "offline/prompts.jsonl", "offline-instructions": "instructions/prompts.jsonl"}


@dataclass(frozen=True, slots=True)
class OfflinePrompt:
    id: str
    prompt: str
    rubric: Any  # rubric_reward.rubric.Rubric


def load_offline_prompts() -> list[OfflinePrompt]:
    """The bundled prompts with their (validated) rubrics."""
    from ..io.rows import numbered_jsonl_rows
    from ..rubric import Rubric

    with resources.as_file(resources.files(__name__).joinpath("offline/prompts.jsonl")) as path:
        rows = [row for _, row in numbered_jsonl_rows(path)]
    return [
        OfflinePrompt(r["id"], r["prompt"], Rubric.from_obj(r["rubric"], source=f"offline prompt {r['id']!r}"))
        for r in rows
    ]


def prompt_set_path(name: str) -> Any:
    """The packaged JSONL file of a bundled prompt set (:data:`PROMPT_SETS`)."""
    if name not in PROMPT_SETS:
        raise KeyError(f"no bundled prompt set {name!r}; known: {sorted(PROMPT_SETS)}")
    return resources.files(__name__).joinpath(PROMPT_SETS[name])
