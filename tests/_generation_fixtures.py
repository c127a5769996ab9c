"""Scripted generator and meta-judge replies for the generation tests (not a conftest on purpose)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

GEN_SYSTEM = "You write evaluation rubrics"
PAIR_SYSTEM = "You are an expert in evaluation design"


def is_generation(body: Mapping[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith(GEN_SYSTEM)


def is_pairwise(body: Mapping[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith(PAIR_SYSTEM)


def task_of(body: Mapping[str, Any]) -> str:
    m = re.search(r"```task\n(.*?)\n```", str(body["messages"][1]["content"]), re.S)
    return m.group(1) if m else ""


def rubric_answer(n: int, tag: str = "") -> str:
    """A valid rubric answer with ``n`` criteria."""
    crit = [{"name": f"c{i}", "requirement": f"The response covers point {i}{tag}.", "weight": 1 + i % 3}
            for i in range(n)]
    return json.dumps({"name": "generated", "criteria": crit})


def generator_reply(body: Mapping[str, Any]) -> str:
    """Distinct rubrics per sample: 3 + (seed mod 5) criteria (seed = config seed + sample index)."""
    return rubric_answer(3 + int(body.get("seed") or 0) % 5)


def n_criteria(block: str) -> int:
    return len(re.findall(r"^\d+\. ", block, re.M))


def prefer_more_criteria(body: Mapping[str, Any]) -> str:
    """A consistent meta-judge: the rubric with more criteria wins; equal counts go to A (position bias)."""
    user = str(body["messages"][1]["content"])
    a = user.split("## Rubric A", 1)[1].split("## Rubric B", 1)[0]
    b = user.split("## Rubric B", 1)[1]
    return json.dumps({"reason": "covers more", "winner": "B" if n_criteria(b) > n_criteria(a) else "A"})


def router(generate: Callable[[Mapping[str, Any]], str | None] = generator_reply,
           pairwise: Callable[[Mapping[str, Any]], str | None] = prefer_more_criteria):
    """A ``ScriptedJudge(reply=...)`` hook answering generation and pairwise prompts (others: verdicts)."""
    def reply(body: Mapping[str, Any]) -> str | None:
        if is_generation(body):
            return generate(body)
        if is_pairwise(body):
            return pairwise(body)
        return None
    return reply
