"""Check arguments grounded in the task (``generation.ground_checks``).

A small generator picks a fitting check but copies its values from the worked example (``num_words=50`` on a task
that asks for fewer than 40 words), and a check with the wrong values orders responses about as often wrongly as
rightly. Grounding makes every value of a menu check one the task states:

* a count (``num_words``, ``num_sentences``, ``num_bullets``, ``num_paragraphs``) is the number the task puts before
  that unit ("fewer than 40 words", "exactly three bullet points"); its ``relation`` follows the words before it
  ("fewer than", "less than", "under": ``less than``; "at least": ``at least``);
* a word list (``keywords``, ``forbidden_words``) is the words the task lists after "the word(s)" unless every
  written word is in the task;
* ``end_phrase`` is the task's quoted phrase unless the written one is in the task;
* a check without settings (``no_comma``, ``english_lowercase``) needs its subject ("comma", "lowercase") in the task.

A check the task gives no value for (a word count on a task that counts no words) is dropped. Otherwise only the
settings change: the kind of each check and every weight stay the generator's. Each change is a repair.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ground_check"]

_NUMBER_WORDS = {w: n for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER = r"(\d+|" + "|".join(_NUMBER_WORDS) + r")"
_RELATIONS = (("less than", re.compile(r"\b(?:fewer than|less than|under|below)\s*$")),
              ("at least", re.compile(r"\b(?:at least|a minimum of|no fewer than|no less than)\s*$")))
_QUOTED = re.compile(r"\"([^\"\n]+)\"|\u201c([^\u201d\n]+)\u201d")
_LISTED = re.compile(r"\b(?:key)?words?\s+((?:\"?[a-z][\w'-]*\"?)(?:(?:\s*,\s*|\s+(?:and|or)\s+|\s*,\s*(?:and|or)\s+)"
                     r"\"?[a-z][\w'-]*\"?)*)")
_NOT_LISTED = frozenset("a an and or the in of to that this it is are be with as for on by at from".split())
_SUBJECTS = {"no_comma": ("comma",), "english_lowercase": ("lowercase", "lower case")}
_WORD_LISTS = ("keywords", "forbidden_words")
_COUNTED = ("num_words", "num_sentences", "num_bullets", "num_paragraphs")  # IFEval states these as "N <unit>"


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBER_WORDS[text]


def _counts(task: str, unit: str) -> list[tuple[int, str]]:
    """(number, text before it) for each number the task puts before ``unit`` (up to two words between)."""
    stem = re.escape(unit[:-1] if unit.endswith("s") else unit)
    pattern = re.compile(rf"\b{_NUMBER}\s+(?:[a-z-]+\s+){{0,2}}?{stem}", re.I)
    return [(_number(m.group(1).lower()), task[:m.start()].lower()) for m in pattern.finditer(task)]


def _listed_words(task: str) -> list[str]:
    for m in _LISTED.finditer(task.lower()):
        words = [w.strip('"') for w in re.split(r"\s*,\s*(?:and|or)\s+|\s*,\s*|\s+(?:and|or)\s+", m.group(1))]
        if words and words[0] not in _NOT_LISTED:
            return words
    return []


def ground_check(check: str, kwargs: Mapping[str, Any], task: str) -> tuple[dict[str, Any] | None, list[str]]:
    """``check``'s settings grounded in ``task`` and what changed; ``(None, [why])`` when the task states no value
    for it (the check is then dropped)."""
    name = check.rsplit(":", 1)[-1]
    low = task.lower()
    out, changed = dict(kwargs), []
    if not kwargs:
        subjects = _SUBJECTS.get(name)
        if subjects is not None and not any(s in low for s in subjects):
            return None, [f"the task does not mention {subjects[0]}"]
        return out, []
    for key, value in kwargs.items():
        if key in _COUNTED:
            found = _counts(task, key[4:])
            if not found:
                return None, [f"the task states no number of {key[4:]}"]
            number, before = next(((n, b) for n, b in found if n == value), found[0])
            if number != value:
                out[key] = number
                changed.append(f"{key} {value!r} -> {number}")
            if "relation" in kwargs:
                relation = next((r for r, p in _RELATIONS if p.search(before)), kwargs["relation"])
                if relation != kwargs["relation"]:
                    out["relation"] = relation
                    changed.append(f"relation {kwargs['relation']!r} -> {relation!r}")
        elif key in _WORD_LISTS and isinstance(value, Sequence) and not isinstance(value, str):
            words = set(re.findall(r"[a-z][\w'-]*", low))
            if value and all(isinstance(w, str) and w.lower() in words for w in value):
                continue
            listed = _listed_words(task)
            if not listed:
                return None, [f"the task lists no words for {key}"]
            out[key] = listed
            changed.append(f"{key} {list(value)!r} -> {listed!r}")
        elif key == "end_phrase" and isinstance(value, str):
            if value.strip() and re.search(rf"(?<!\w){re.escape(value.strip().lower())}(?!\w)", low):
                continue
            quoted = [a or b for a, b in _QUOTED.findall(task)]
            if not quoted:
                return None, ["the task quotes no phrase"]
            out[key] = quoted[0]
            changed.append(f"end_phrase {value!r} -> {quoted[0]!r}")
    return out, changed
