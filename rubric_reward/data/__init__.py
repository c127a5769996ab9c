"""Data shipped with the package: offline prompts with rubrics, and the IFEval prompts."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["OfflinePrompt", "load_offline_prompts"]


@dataclass(frozen=True, slots=True)
class OfflinePrompt:
    id: str
    prompt: str
    rubric: Any  # rubric_reward.rubric.Rubric


def load_offline_prompts() -> list[OfflinePrompt]:
    """The bundled prompts with their (validated) rubrics."""
    from ..rows import numbered_jsonl_rows
    from ..rubric import Rubric

    with resources.as_file(resources.files(__name__).joinpath("offline/prompts.jsonl")) as path:
        rows = [row for _, row in numbered_jsonl_rows(path)]
    return [
        OfflinePrompt(r["id"], r["prompt"], Rubric.from_obj(r["rubric"], source=f"offline prompt {r['id']!r}"))
        for r in rows
    ]
