"""The rubric-gaming guard: does a rubric give a high score to a response that does not try?

Generated rubrics can be exploitable (arXiv 2609.16816 found it on 8-26% of tasks): a rubric made of
checks such as "no commas" or "fewer than 50 words" is satisfied by an empty-ish answer. Each rubric is
scored on degenerate responses to its prompt: the empty string, the prompt copied back, one word, and the
phrase an instruction requires on its own (an end phrase, the keywords, a postscript marker, or a phrase
the prompt quotes). A rubric that gives any of them a score of ``threshold`` or more is exploitable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...rubric import Rubric
from ...generation.templates import task_text

__all__ = ["DEGENERATE_KINDS", "adegenerate_scores", "degenerate_responses", "required_phrase"]

DEGENERATE_KINDS = ("empty", "prompt_copy", "one_word", "required_phrase")
ONE_WORD = "Yes"
_QUOTED = re.compile(r'"([^"\n]{2,80})"')


def required_phrase(prompt: Any, instructions: Sequence[Mapping[str, Any]] = ()) -> str | None:
    """The text an instruction of the prompt asks for, on its own; None when there is none."""
    for ins in instructions:
        kwargs = ins.get("kwargs") or {}
        for key in ("end_phrase", "postscript_marker", "keyword"):
            if kwargs.get(key):
                return str(kwargs[key])
        if kwargs.get("keywords"):
            return " ".join(map(str, kwargs["keywords"]))
    m = _QUOTED.search(task_text(prompt))
    return m.group(1) if m else None


def degenerate_responses(prompt: Any, instructions: Sequence[Mapping[str, Any]] = ()) -> dict[str, str]:
    """``{kind: response}`` for the degenerate responses to ``prompt`` (``required_phrase`` when there is one)."""
    out = {"empty": "", "prompt_copy": task_text(prompt), "one_word": ONE_WORD}
    phrase = required_phrase(prompt, instructions)
    if phrase:
        out["required_phrase"] = phrase
    return out


async def adegenerate_scores(scorer: Any, prompt: Any, rubric: Rubric, instructions: Sequence[Mapping[str, Any]],
                             threshold: float) -> dict[str, Any]:
    """Score every degenerate response with ``rubric`` (``scorer``: a Scorer); ``exploitable`` when any
    score reaches ``threshold``. A response the scorer refuses (an empty one, say) scores None."""
    kinds = degenerate_responses(prompt, instructions)
    results = await scorer.ascore_batch([{"prompt": prompt, "response": text, "rubric": rubric}
                                         for text in kinds.values()])
    scores = {kind: r.score for kind, r in zip(kinds, results, strict=True)}
    hit = sorted(k for k, s in scores.items() if s is not None and s >= threshold)
    return {"scores": scores, "exploitable": bool(hit), "by": hit}
