"""Verdict provenance: whether a verdict the judge gave is text from the response it judged.

A response can carry verdict-shaped text: JSON at any depth, with duplicate keys, escaped inside a
string, single- or curly-quoted, HTML-escaped, in JavaScript / Python / JSON5 object syntax, or
plain words such as ``verdict: MET``. A judge that
quotes it must never have it taken as its own verdict. A verdict object counts as quoted when

- each of its fields (key and value, compared as folded words: case, width, format characters,
  white space, punctuation and escaping aside) is a field of one object found in the response, or
- its reason and its verdict label (as written, case kept) both occur in the response as words, at
  most two words apart.

Finding every object takes time linear in the response: a decode that fails after reading far is read once more
by a decoder that records where each object inside it starts and whether it completes, so no start inside it is
decoded again. A response whose objects nest deeper than the decoder can follow (its recursion limit, some hundreds
of levels) cannot be read: every verdict on it counts as quoted (unscored, never a verdict taken unread).
"""

from __future__ import annotations

import bisect
import functools
import html
import json
import json.decoder
import json.scanner
import re
from collections.abc import Mapping
from typing import Any

from ..guards.confusables import Words, words

__all__ = ["quoted_from"]

_MAX_DEPTH = 4  # JSON inside a string inside JSON ...: how deep to look
_GAP = 2  # words allowed between a reason and its label ("reason: c, verdict: MET")
_QUOTES = str.maketrans({c: '"' for c in "'\u2018\u2019\u201a\u201b\u2032\u201c\u201d\u201e\u201f\u2033"})


_BARE_KEY = re.compile(r'([{,]\s*)([A-Za-z_][\w-]*)\s*:')
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_LITERALS = re.compile(r"\b(?:True|False|None)\b")


class _Pairs(list):
    """A decoded JSON object as its (key, value) pairs, duplicate keys kept."""


_LENIENT = json.JSONDecoder(object_pairs_hook=_Pairs)
Field = tuple[Words, Any]


def quoted_from(verdict: Mapping[str, Any], response: str) -> bool:
    """Whether the verdict object ``verdict`` (``{"reason", "verdict"}``) occurs in ``response``."""
    if not response:
        return False
    records = _records(response)
    if records is None:  # nested too deep to read: a verdict cannot be shown not to come from it
        return True
    if records:
        mine = frozenset(_field(k, v) for k, v in verdict.items())
        if any(mine <= record for record in records):
            return True
    reason, label = verdict.get("reason"), verdict.get("verdict")
    if not (isinstance(reason, str) and isinstance(label, str)):
        return False
    # the label keeps its case: "met" is an English word, "MET" a label copied as written
    label_words = words(label, keep_case=True)
    if not label_words or label_words[0] not in _vocabulary(response):  # the usual case: not a word of it
        return False
    return _near(words(reason), label_words, words(response, keep_case=True))


def _field(key: Any, value: Any) -> Field:
    if isinstance(value, str):
        folded: Any = words(value)
    elif isinstance(value, list):
        folded = "<object>" if isinstance(value, _Pairs) else "<array>"
    elif isinstance(value, dict):
        folded = "<object>"
    else:
        folded = json.dumps(value)
    return words(str(key)), folded


def _relaxed(text: str) -> str:
    """JavaScript / Python / JSON5 object syntax made JSON: quotes, bare keys, trailing commas, literals."""
    text = _BARE_KEY.sub(r'\1"\2":', text.translate(_QUOTES))
    text = _TRAILING_COMMA.sub(r"\1", text)
    return _LITERALS.sub(lambda m: {"True": "true", "False": "false", "None": "null"}[m.group()], text)


def _variants(text: str) -> set[str]:
    """``text`` as written and with one layer of escaping, quoting or relaxed syntax undone."""
    out = {text, html.unescape(text), text.translate(_QUOTES), _relaxed(text)}
    unescaped = text
    for _ in range(_MAX_DEPTH):
        unescaped = unescaped.replace('\\"', '"').replace("\\\\", "\\")
        out.add(unescaped)
    return out


class _Unreadable(Exception):
    """The response nests objects deeper than the decoder follows."""


_RECORD_AFTER = 64  # a decode that fails further than this from its start has its region recorded


@functools.lru_cache(maxsize=64)
def _records(response: str) -> frozenset[frozenset[Field]] | None:
    """The fields of every JSON object in ``response``, at any depth and in every variant; None when it nests
    objects too deep to read."""
    if "{" not in response and "&" not in response:  # no variant can hold an object (only HTML escapes make a "{")
        return frozenset()
    out: set[frozenset[Field]] = set()
    try:
        for text in _variants(response):
            _collect(text, out, 0)
    except (_Unreadable, RecursionError):
        return None
    return frozenset(out)


def _collect(text: str, out: set[frozenset[Field]], depth: int) -> None:
    known: dict[int, tuple[Any, int] | None] = {}  # start -> (object, end), or None: decoding from it fails
    i = text.find("{")
    while i >= 0:
        if i in known:
            got = known.pop(i)
        else:
            try:
                got = _LENIENT.raw_decode(text, i)
            except json.JSONDecodeError as exc:
                got = None
                if exc.pos - i > _RECORD_AFTER:  # read far: learn every start inside once, not by decoding each
                    known.update(_recorded(text, i))
        if got is None:
            i = text.find("{", i + 1)
            continue
        value, end = got
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, _Pairs):
                out.add(frozenset(_field(k, x) for k, x in v))
                stack.extend(x for _, x in v)
            elif isinstance(v, list):
                stack.extend(v)
            elif isinstance(v, str) and "{" in v and depth < _MAX_DEPTH:  # JSON written inside a string
                for variant in {v, v.translate(_QUOTES)}:
                    _collect(variant, out, depth + 1)
        i = text.find("{", end)


def _recorded(text: str, start: int) -> dict[int, tuple[Any, int] | None]:
    """Decode from ``start`` (a decode that fails) once more, noting every object the decode enters: where it
    starts, and its value and end if it completes, else None. Decoding from such a start alone takes the same path
    (JSON is context-free): it gives that value and end, or fails the same way."""
    entered: dict[int, tuple[Any, int] | None] = {}

    def parse_object(s_and_end: tuple[str, int], *args: Any, **kw: Any) -> tuple[Any, int]:
        at = s_and_end[1] - 1
        entered[at] = None
        got = json.decoder.JSONObject(s_and_end, *args, **kw)
        entered[at] = got
        return got

    decoder = json.JSONDecoder(object_pairs_hook=_Pairs)
    decoder.parse_object = parse_object
    scan = json.scanner.py_make_scanner(decoder)
    try:
        scan(text, start)
    except StopIteration:
        pass
    except RecursionError:
        raise _Unreadable from None
    except ValueError:
        pass
    entered.pop(start, None)
    return entered


def _near(reason: Words, label: Words, said: Words) -> bool:
    """Whether ``reason`` (case folded) and ``label`` (case kept) occur in ``said`` (case kept) at most
    :data:`_GAP` words apart."""
    if not reason or not label:
        return False
    labels = [j for j in range(len(said) - len(label) + 1) if said[j:j + len(label)] == label]
    if not labels:
        return False
    folded, n, m = tuple(w.casefold() for w in said), len(reason), len(label)

    def within(lo: int, hi: int) -> bool:  # a label starting in [lo, hi] (labels is sorted: one search)
        k = bisect.bisect_left(labels, lo)
        return k < len(labels) and labels[k] <= hi

    for i in range(len(said) - n + 1):
        if folded[i] == reason[0] and folded[i:i + n] == reason \
                and (within(i + n, i + n + _GAP) or within(i - _GAP - m, i - m)):
            return True
    return False


@functools.lru_cache(maxsize=64)
def _vocabulary(response: str) -> frozenset[str]:
    """The distinct words of ``response`` (case kept): one response's calls test their label against it."""
    return frozenset(words(response, keep_case=True))
