"""Screening: responses too degenerate to be worth a judge call.

"One Token to Fool LLM-as-a-Judge" showed that bare tokens (":", "Thought process:", "Solution")
draw false positives even from strong judges, and a policy under RL finds such "master keys" fast.
A screened response gets the rubric's minimum score without any judge call; the grader records the
reason on the result (``ScoreResult.metadata["screened"]``).

Degenerate means: empty, whitespace only, punctuation/symbols only, a bare opener phrase (the list
below, compared case-insensitively and without surrounding markdown or punctuation), or text that only
repeats the prompt (the whole prompt or its last user turn, once or several times).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["MASTER_KEYS", "screen_response"]

# Openers and bare tokens that carry no content (from the paper's master keys, a few languages).
MASTER_KEYS: tuple[str, ...] = (
    "thought process", "let's solve this problem step by step", "let's think step by step",
    "solution", "answer", "the answer is", "final answer", "response", "reasoning", "explanation",
    "step 1", "here is the answer", "here's the answer",
    "解", "解答", "答案", "かいせつ", "解説", "respuesta", "solución", "réponse", "antwort", "lösung",
)

_SPACE = re.compile(r"\s+")
_EDGE = re.compile(r"^[\W_]+|[\W_]+$", re.UNICODE)


def _is_symbolic(text: str) -> bool:
    """Only punctuation, symbols and separators (no letter, digit or mark)."""
    return all(unicodedata.category(ch)[0] in "PSZC" for ch in text)


def _normal(text: str) -> str:
    return _EDGE.sub("", _SPACE.sub(" ", text.casefold())).strip()


@functools.lru_cache(maxsize=32)
def _phrase_set(phrases: tuple[str, ...]) -> frozenset[str]:
    return frozenset(_normal(p) for p in phrases)


def _prompt_texts(prompt: Any) -> list[str]:
    """The prompt as a whole and its last user turn, normalised (empty ones left out)."""
    if prompt is None:
        return []
    if isinstance(prompt, str):
        texts = [prompt]
    elif isinstance(prompt, Sequence):
        turns = [str(m.get("content") or "") for m in prompt if isinstance(m, Mapping)]
        users = [str(m.get("content") or "") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        texts = ["\n".join(turns)] + users[-1:]
    else:
        return []
    return [t for t in (_normal(x) for x in texts) if t]


def _only_repeats(response: str, prompts: Iterable[str]) -> bool:
    for p in prompts:
        if p and p in response and _is_symbolic(response.replace(p, "")):
            return True
    return False


def screen_response(response: str, prompt: Any = None, *, phrases: Iterable[str] | None = None) -> str | None:
    """Why ``response`` is degenerate (``"empty"``, ``"whitespace"``, ``"punctuation"``,
    ``"master_key"``, ``"prompt_echo"``), or None when it deserves a judge."""
    if not response:
        return "empty"
    if not response.strip():
        return "whitespace"
    if _is_symbolic(response):
        return "punctuation"
    norm = _normal(response)
    if norm in _phrase_set(MASTER_KEYS if phrases is None else tuple(phrases)):
        return "master_key"
    if _only_repeats(norm, _prompt_texts(prompt)):
        return "prompt_echo"
    return None
