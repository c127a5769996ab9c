"""Text folded for comparison: what a response "says" once its spelling tricks are undone.

Compatibility forms (fullwidth and styled letters) become plain ones, case is folded, format
characters (zero-width spaces and joiners, soft hyphens) and combining marks are dropped, and text
is read as words (runs of letters and digits; each Han or kana character is a word of its own).
Screening and the verdict-provenance check compare text this way.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["Words", "fold", "scan", "words"]

Words = tuple[str, ...]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")  # the same words in ASCII text (no CJK there; \w is [A-Za-z0-9_])


def fold(text: str, *, keep_case: bool = False) -> str:
    """``text`` in compatibility form, case folded (unless ``keep_case``), without format characters
    or combining marks."""
    if text.isascii():  # no compatibility forms, format characters or marks in ASCII: only the case folds
        return text if keep_case else text.lower()
    text = unicodedata.normalize("NFKC", text)
    text = unicodedata.normalize("NFKD", text if keep_case else text.casefold())
    return "".join(ch for ch in text if unicodedata.category(ch) not in ("Cf", "Mn", "Me"))


@functools.lru_cache(maxsize=256)
def scan(text: str, *, keep_case: bool = False) -> tuple[Words, tuple[str, ...]]:
    """The folded words of ``text`` and the separators around them (``len(words) + 1`` of them)."""
    folded = fold(text, keep_case=keep_case)
    found, seps, pos = [], [], 0
    for m in _WORD.finditer(folded):
        seps.append(folded[pos:m.start()])
        found.append(m.group())
        pos = m.end()
    seps.append(folded[pos:])
    return tuple(found), tuple(seps)


@functools.lru_cache(maxsize=256)
def words(text: str, *, keep_case: bool = False) -> Words:
    """The folded words of ``text`` (what :func:`scan` gives first, without the separators)."""
    if text.isascii():
        return tuple(_ASCII_WORD.findall(text if keep_case else text.lower()))
    return tuple(_WORD.findall(fold(text, keep_case=keep_case)))
