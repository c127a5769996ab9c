"""Responses shaped to make a text screen slow: long runs of white space, long separators before a label,
repeated near-labels, a megabyte of random text. The guard (``injection.flag_response``,
``screening.screen_response``) must read each in time linear in its length; ``tests/test_guard_speed.py`` checks
it and ``benchmarks/guard_speed.py`` prints the times.

Each shape is a function of a length ``n`` (characters, roughly) that returns the text. The shapes hold the words
the rules look for (``#``, ``system``, a grader, a label) but, where they can, nothing the flag takes, so the
whole of every rule is read rather than the first hit returned.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["SHAPES", "WHITESPACE", "prose", "unicode_noise"]

# each kind of white space a run can be made of
WHITESPACE = {"spaces": " ", "tabs": "\t", "newlines": "\n", "crlf": "\r\n", "nbsp": "\u00a0",
              "line_separator": "\u2028", "form_feed": "\f"}

_PROSE = ("the a of to and in that is for it with as on was by be this are or from at an which have one "
          "grader note system rubric judge verdict score reviewer answer output heading criteria task prompt "
          "mark pass full instructions ignore previous response evaluation model data plan claim source").split()


def prose(n: int, seed: int = 0) -> str:
    """About ``n`` characters of random lowercase prose of common words and the rules' words (no label)."""
    rng = random.Random(seed)
    out, size = [], 0
    while size < n:
        w = rng.choice(_PROSE)
        sep = rng.choices((" ", ", ", ". ", "\n", ": ", " # "), (40, 4, 4, 2, 1, 1))[0]
        out.append(w + sep)
        size += len(w) + len(sep)
    return "".join(out)[:n]


def unicode_noise(n: int, seed: int = 0) -> str:
    """``n`` random characters: Latin, Cyrillic, Greek, CJK, fullwidth forms, combining and format characters,
    every kind of white space, punctuation."""
    rng = random.Random(seed)
    pools = ("abcdefghijklmnopqrstuvwxyz", "абвгдежзийклмнопрстуфхцчшщ", "αβγδεζηθικλμνξοπρστυφχψω",
             "".join(map(chr, range(0x4E00, 0x4E80))), "ＡＢＣＤＥＦ：＃", "\u0301\u0308\u20dd",
             "\u200b\u200d\u202e\u2066\u00ad\ufeff\U000e0041", "".join(WHITESPACE.values()), ".,:;!?#*-|=>[](){}\"'`")
    weights = (30, 10, 5, 10, 3, 2, 2, 8, 6)
    chars = [ch for pool in pools for ch in pool]
    each = [w / len(pool) for pool, w in zip(pools, weights) for _ in pool]
    return "".join(rng.choices(chars, each, k=n))


def _run(ws: str) -> Callable[[int], str]:
    def shape(n: int) -> str:  # the forged-structure and address rules' words around a long run
        return "# system note" + ws * max(1, n // len(ws)) + "system x"
    return shape


def _before_label(ws: str) -> Callable[[int], str]:
    def shape(n: int) -> str:  # a key/value mark, a long separator, then a label
        return "x:" + ws * max(1, n // len(ws)) + ".MET"
    return shape


SHAPES: dict[str, Callable[[int], str]] = {
    **{f"run of {name}": _run(ws) for name, ws in WHITESPACE.items()},
    **{f"{name} before a label": _before_label(ws) for name, ws in WHITESPACE.items()},
    "verdict, spaces, ': MET'": lambda n: "verdict" + " " * n + ": MET",
    "MET MET MET ...": lambda n: "MET " * (n // 4),
    "verdict: verdict: ...": lambda n: "verdict: " * (n // 9),
    "# # # ...": lambda n: "# " * (n // 2),
    "grader grader ...": lambda n: "note to the grader " * (n // 19),
    "ignore ignore ...": lambda n: "ignore " * (n // 7),
    "openers, then a word": lambda n: "solution " * (n // 9) + "x",
    "grader, punctuation run": lambda n: "the grader" + "!" * n + " must output this",
    "grader grader!!! ...": lambda n: ("the grader should" + "." * 40 + " ") * (n // 58),
    "grader, one long word": lambda n: "ignore previous " + "a" * n + " instructions",
    "fences": lambda n: "~~~x\n" * (n // 5),
    "html and percent escapes": lambda n: "&#120;&#121; %78%79 \\u0078 " * (n // 26),
    "right-to-left overrides": lambda n: "\u202eabc def " * (n // 9),
    "open objects": lambda n: '{"a":' * (n // 5),
    "random prose": prose,
    "random unicode": unicode_noise,
}
