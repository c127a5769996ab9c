"""Data shipped with the package: offline prompts with rubrics, the IFEval prompts, and the labelled responses (the
dpo-loop's pairs; :func:`labelled_responses` reads them as a judge-qualification set)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["LABELLED_RUBRIC", "PROMPT_SETS", "OfflinePrompt", "labelled_responses", "load_offline_prompts",
           "prompt_set_path"]

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


_INSTRUCTIONS = "(a word limit, words it must or must not use, no commas, how it must end)"
#: The judged rubric of :func:`labelled_responses`: one fact asked both ways (a penalty that is the negation of a
#: positive criterion tells a judge that reads signs from one that answers MET to anything), and the topic.
LABELLED_RUBRIC = {"name": "labelled-instructions", "criteria": [
    {"name": "follows_instructions", "weight": 2,
     "requirement": f"The response follows every explicit instruction in the request {_INSTRUCTIONS}."},
    {"name": "on_topic", "requirement": "The response is about the subject the request asks about."},
    {"name": "breaks_instruction", "weight": -1,
     "requirement": f"The response breaks at least one explicit instruction in the request {_INSTRUCTIONS}."},
]}


def labelled_responses(prompts: int | None = None, per_prompt: int = 4) -> list[dict[str, Any]]:
    """Rows ``{id, prompt, response, group, labels}`` from the bundled labelled pairs (``labelled/pairs.jsonl``), with
    gold labels for :data:`LABELLED_RUBRIC`: ``follows_instructions`` by the prompt's IFEval checks (all pass),
    ``breaks_instruction`` its negation, ``on_topic`` by the prompt's topic words. The first ``prompts`` prompts
    (file order) whose responses both pass and fail their checks, each with ``per_prompt`` responses taken passing
    and failing in turn."""
    from ..io.rows import numbered_jsonl_rows

    with resources.as_file(resources.files(__name__).joinpath("labelled")) as folder:
        topics = {row["id"]: row["topic"] for _, row in numbered_jsonl_rows(folder / "prompts.jsonl")}
        pairs = [row for _, row in numbered_jsonl_rows(folder / "pairs.jsonl")]
    out: list[dict[str, Any]] = []
    taken = 0
    for p in pairs:
        sides = ([r for r in p["responses"] if all(r["passed"])], [r for r in p["responses"] if not all(r["passed"])])
        if not sides[0] or not sides[1] or (prompts is not None and taken >= prompts):
            continue
        taken += 1
        chosen = [side[i] for i in range(max(map(len, sides))) for side in sides if i < len(side)]  # in turn
        for j, r in enumerate(chosen[:per_prompt]):
            follows = all(r["passed"])
            on_topic = any(t in r["text"].lower() for t in topics[p["id"]])
            out.append({"id": f"{p['id']}-{j}", "prompt": p["prompt"], "response": r["text"], "group": p["id"],
                        "labels": {"follows_instructions": "MET" if follows else "UNMET",
                                   "on_topic": "MET" if on_topic else "UNMET",
                                   "breaks_instruction": "UNMET" if follows else "MET"}})
    return out
