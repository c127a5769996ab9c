"""Text folded for comparison: what a text "says" once its spelling tricks are undone.

One skeleton, used by every check that compares what a response says (the degenerate guard, the
injection flag before judging, the verdict-provenance check after it):

* NFKC (fullwidth and styled letters become plain ones);
* confusable letters mapped to their Latin prototype, TR39-style (Cyrillic ``М``, Greek ``Μ``,
  Cherokee ``Ꮇ`` all read ``M``), from the Unicode confusables data shipped by the
  ``confusable-homoglyphs`` package (:func:`confusable`); a lowercase letter with no entry of its own
  reads as its uppercase form's prototype (Cyrillic ``м`` reads ``m``);
* case folded (unless ``keep_case``);
* invisible characters dropped (:func:`strip_invisible`: every format character, Unicode category Cf, such as
  zero-width spaces and joiners, soft hyphens, bidi controls like U+202E and the tag characters
  U+E0000-U+E007F; variation selectors and the other default-ignorable fillers), and combining marks.

:func:`strip_invisible` is also what the judge is shown of a response (:mod:`rubric_reward.grading.criterion_prompt`,
:mod:`rubric_reward.grading.group_prompt`): the guard never reads a text the judge does not, and nothing the guard
cannot see is shown to the judge. Combining marks stay in the judge's text: they mark a visible letter and
hide nothing.

Every step is one linear pass in C (normalisation, ``str.translate`` with a table built once, a regex of one
character class), so folding a megabyte costs a fraction of a second whatever its characters.

Text is then read as words (runs of letters and digits; each Han or kana character is a word of its own),
or, by :func:`compact`, as one run of letters and digits with every space, hyphen and punctuation mark
removed (``S o l u t i o n``, ``s-o-l-u-t-i-o-n`` and ``solution`` are one compact skeleton).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata

__all__ = ["SCAN_CHARS", "Words", "compact", "confusable", "fold", "scan", "skeleton", "strip_invisible", "visual",
           "vocabulary", "words"]

Words = tuple[str, ...]

# The most characters the guard reads of one response (1 MiB, about 250k tokens: more than most judges' context).
# The flag reads every character of a response up to this length in linear time (a fraction of a second on one
# core); a longer response is not read but flagged (``injection.flag_response``: ``too_long``), so the guard's
# time per response is bounded, and under the default policy (screen) no judge is shown text it did not read.
SCAN_CHARS = 1 << 20

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_WORD_SPLIT = re.compile(f"({_WORD.pattern})")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")  # the same words in ASCII text (no CJK there)
# invisible code points that are not format characters: the rest of Unicode's default-ignorable code points
# (Hangul fillers, Khmer inherent vowels, the combining grapheme joiner, variation selectors, the unassigned ones
# of U+2060-U+206F, U+FFF0-U+FFF8 and the tag block U+E0000-U+E0FFF) and the blank Braille cell
_IGNORABLE = frozenset("\u034f\u115f\u1160\u3164\uffa0\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u2065\u2800"
                       + "".join(map(chr, [*range(0xFE00, 0xFE10), *range(0xFFF0, 0xFFF9), *range(0xE0000, 0xE1000)])))
# the planes that hold every format character, combining mark and confusable letter: the basic and supplementary
# multilingual planes and the tags (planes 2-3 hold only ideographs, 4-13 nothing, 15-16 private use;
# tests/test_invisible_characters.py checks it)
_PLANES = (range(0x80, 0x20000), range(0xE0000, 0xE1000))
_SMALL_CAPITAL = re.compile(r"^LATIN LETTER SMALL CAPITAL ([A-Z])$")


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, str]:
    """Non-ASCII character -> its ASCII letter/digit prototype, from the Unicode confusables data."""
    try:
        from importlib.resources import files

        data = json.loads((files("confusable_homoglyphs") / "confusables.json").read_text(encoding="utf-8"))
    except (ImportError, OSError, ValueError):  # pragma: no cover - the dependency is declared
        data = {}

    def prototype(ch: str) -> str | None:
        seen, frontier = {ch}, [ch]
        for _ in range(3):
            nxt = []
            for c in frontier:
                for h in data.get(c, ()):
                    t = "".join(x for x in h["c"] if unicodedata.category(x) != "Cf")
                    if t and t.isascii() and t.isalnum():
                        return t
                    if len(t) == 1 and t not in seen:
                        seen.add(t)
                        nxt.append(t)
            frontier = nxt
        return None

    table = {}
    for ch in data:
        if len(ch) == 1 and not ch.isascii() and (p := prototype(ch)) is not None:
            table[ch] = p
    for cp in range(0x1D00, 0x1D2C):  # small capitals read as their letters
        m = _SMALL_CAPITAL.match(unicodedata.name(chr(cp), ""))
        if m and chr(cp) not in table:
            table[chr(cp)] = m.group(1)
    return table


@functools.lru_cache(maxsize=4096)
def confusable(ch: str) -> str:
    """The Latin prototype ``ch`` is confusable with (``ch`` itself when it has none)."""
    if ch.isascii():
        return ch
    got = _prototype(ch, _table())
    return ch if got is None else got


def _prototype(ch: str, table: dict[str, str]) -> str | None:
    got = table.get(ch)
    if got is None and ch.islower() and len(up := ch.upper()) == 1 and up in table:
        got = table[up].lower()
    return got


def _ranges(points: list[int]) -> str:
    """A regex character class body for the sorted code points ``points``, as ranges."""
    out, start = [], 0
    for k in range(1, len(points) + 1):
        if k == len(points) or points[k] != points[k - 1] + 1:
            a, b = chr(points[start]), chr(points[k - 1])
            out.append(re.escape(a) if a == b else f"{re.escape(a)}-{re.escape(b)}")
            start = k
    return "".join(out)


@functools.lru_cache(maxsize=1)
def _points() -> tuple[frozenset[str], frozenset[str]]:
    """The invisible characters and the combining marks of :data:`_PLANES` (categories read in one C pass)."""
    chars = [chr(cp) for plane in _PLANES for cp in plane]
    cats = list(map(unicodedata.category, chars))
    invisible = _IGNORABLE | {ch for ch, cat in zip(chars, cats) if cat == "Cf"}
    return frozenset(invisible), frozenset(ch for ch, cat in zip(chars, cats) if cat in ("Mn", "Me"))


@functools.lru_cache(maxsize=1)
def _invisible_pattern() -> re.Pattern[str]:
    return re.compile(f"[{_ranges(sorted(map(ord, _points()[0])))}]+")


def strip_invisible(text: str) -> str:
    """``text`` without invisible characters: format characters (Unicode category Cf: zero-width spaces and
    joiners, soft hyphens, bidi controls, the tag characters U+E0000-U+E007F ...), variation selectors and the
    other default-ignorable fillers. What the guard reads and what the judge is shown, both."""
    if text.isascii():  # ASCII holds no format character
        return text
    return _invisible_pattern().sub("", text)


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


class _Translation:
    """A ``str.translate`` table twice: a list indexed by the Basic Multilingual Plane's code points (twice as fast
    as a dict, whose misses raise), used when the text holds nothing beyond it, and the dict for the rest."""

    def __init__(self, table: dict[int, str | None]):
        self.table = table
        self.bmp: list[int | str | None] = list(range(0x10000))
        for cp, got in table.items():
            if cp < 0x10000:
                self.bmp[cp] = got

    def __call__(self, text: str) -> str:
        return text.translate(self.table if _ASTRAL.search(text) else self.bmp)


@functools.lru_cache(maxsize=1)
def _tables() -> tuple[_Translation, _Translation]:
    """Two translations: each non-ASCII code point with a confusable prototype -> that prototype (what
    :func:`confusable` gives); and the same with every invisible character and combining mark -> nothing."""
    table = _table()
    lower = [ch for plane in _PLANES for ch in map(chr, plane) if ch.islower()]
    mapped = {ord(ch): got for ch in {*table, *lower} if (got := _prototype(ch, table)) is not None}
    invisible, marks = _points()
    return _Translation(mapped), _Translation({**mapped, **dict.fromkeys(map(ord, invisible | marks))})


def skeleton(text: str, *, keep_case: bool = False) -> str:
    """``text`` with confusables mapped to their prototypes, in compatibility form, case folded (unless
    ``keep_case``), without invisible characters (:func:`strip_invisible`) or combining marks."""
    text = _kept(text)
    if keep_case:
        return text
    text = text.casefold()
    return text if text.isascii() else _tables()[0](text)


@functools.lru_cache(maxsize=16)
def _kept(text: str) -> str:
    """:func:`skeleton` with its case kept (the folded skeleton is made from it: one response is read both ways).
    NFKD alone: the decomposition of the composed form (NFKC) is the decomposition itself."""
    text = unicodedata.normalize("NFKD", strip_invisible(text))
    return text if text.isascii() else _tables()[1](text)


def fold(text: str, *, keep_case: bool = False) -> str:
    """``text`` as compared: its :func:`skeleton`."""
    if text.isascii():  # no confusables, compatibility forms, format characters or marks: only the case folds
        return text if keep_case else text.lower()
    return skeleton(text, keep_case=keep_case)


@functools.lru_cache(maxsize=256)
def scan(text: str, *, keep_case: bool = False) -> tuple[Words, tuple[str, ...]]:
    """The folded words of ``text`` and the separators around them (``len(words) + 1`` of them)."""
    # splitting on the captured word pattern gives separator, word, separator, ..., separator
    parts = _WORD_SPLIT.split(fold(text, keep_case=keep_case))
    return tuple(parts[1::2]), tuple(parts[0::2])


@functools.lru_cache(maxsize=256)
def words(text: str, *, keep_case: bool = False) -> Words:
    """The folded words of ``text``."""
    if text.isascii():
        return tuple(_ASCII_WORD.findall(text if keep_case else text.lower()))
    return scan(text, keep_case=keep_case)[0]


@functools.lru_cache(maxsize=256)
def vocabulary(text: str) -> frozenset[str]:
    """The distinct folded words of ``text``."""
    return frozenset(words(text))


def compact(text: str) -> str:
    """The folded words of ``text`` run together: spacing, hyphens and punctuation removed."""
    return "".join(words(text))


_OVERRIDE = re.compile("\u202e([^\u202c\u2069\n]*)")


def visual(text: str) -> str:
    """``text`` as a right-to-left override displays it: each run after U+202E (up to its pop or the end
    of the line) reversed. Equal to ``text`` when it holds no override."""
    if "\u202e" not in text:
        return text
    return _OVERRIDE.sub(lambda m: m.group(1)[::-1], text)
