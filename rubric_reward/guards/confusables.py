"""Text folded for comparison: what a text "says" once its spelling tricks are undone.

One skeleton, used by every check that compares what a response says (the degenerate guard, the
injection flag before judging, the verdict-provenance check after it):

* NFKC (fullwidth and styled letters become plain ones);
* confusable letters mapped to their Latin prototype, TR39-style (Cyrillic ``М``, Greek ``Μ``,
  Cherokee ``Ꮇ`` all read ``M``), from the Unicode confusables data shipped by the
  ``confusable-homoglyphs`` package (:func:`confusable`); a lowercase letter with no entry of its own
  reads as its uppercase form's prototype (Cyrillic ``м`` reads ``m``);
* case folded (unless ``keep_case``);
* format characters (zero-width spaces and joiners, soft hyphens, bidi controls such as U+202E),
  other default-ignorable fillers, and combining marks dropped.

Text is then read as words (runs of letters and digits; each Han or kana character is a word of its own),
or, by :func:`compact`, as one run of letters and digits with every space, hyphen and punctuation mark
removed (``S o l u t i o n``, ``s-o-l-u-t-i-o-n`` and ``solution`` are one compact skeleton).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata

__all__ = ["Words", "compact", "confusable", "fold", "scan", "skeleton", "visual", "vocabulary", "words"]

Words = tuple[str, ...]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_WORD_SPLIT = re.compile(f"({_WORD.pattern})")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")  # the same words in ASCII text (no CJK there)
# default-ignorable code points that are not format characters (Hangul fillers, Khmer inherent vowels ...)
_IGNORABLE = frozenset("\u115f\u1160\u3164\uffa0\u17b4\u17b5\u180b\u180c\u180d\u180e\u2800")
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
    table = _table()
    got = table.get(ch)
    if got is None and ch.islower() and len(up := ch.upper()) == 1 and up in table:
        got = table[up].lower()
    return ch if got is None else got


def skeleton(text: str, *, keep_case: bool = False) -> str:
    """``text`` with confusables mapped to their prototypes, in compatibility form, case folded (unless
    ``keep_case``), without format characters, ignorable fillers or combining marks."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    text = "".join(confusable(ch) for ch in text
                   if ch not in _IGNORABLE and unicodedata.category(ch) not in ("Cf", "Mn", "Me"))
    if keep_case:
        return text
    return "".join(confusable(ch) for ch in text.casefold())


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
