"""Screening: responses too degenerate to be worth a judge call.

"One Token to Fool LLM-as-a-Judge" showed that bare tokens (":", "Thought process:", "Solution")
draw false positives even from strong judges, and a policy under RL finds such "master keys" fast.
A screened response gets the rubric's minimum score without any judge call; the grader records the
reason on the result (``ScoreResult.metadata["screened"]``).

Text is compared as words after folding (:mod:`rubric_reward.guards.confusables`: fullwidth and styled letters
become plain ones, case folded, zero-width and other format characters and combining marks
dropped); a response that is one unit repeated is read as that unit.
Degenerate means:

- ``empty``, ``whitespace``, ``punctuation``: no word at all;
- ``master_key``: only bare openers (:data:`MASTER_KEYS`, or the grader's ``screen_phrases``), compared
  as words and as compact skeletons (:func:`~rubric_reward.guards.confusables.compact`: confusable letters read as
  their prototypes, spacing, hyphens, punctuation and bidi controls removed), so ``Ѕоlutіоn`` (Cyrillic),
  ``S o l u t i o n``, ``s-o-l-u-t-i-o-n`` and ``\u202eSolution`` are the master key ``solution``;
- ``rubric_echo``: only the rubric's own text (criterion names, requirements, option labels and
  descriptions, guidelines, verdict labels), with openers, numbers and rubric field names between;
- ``prompt_echo``: after any leading openers, a run of words the prompt already holds (the whole
  prompt, its last turn, the phrase an instruction asks to end with, a word of the task). Not
  screened: numbers, a single character (an option letter), and an alternative the prompt offers
  (``yes or no``, ``A, B or C``, ``x/y``, a labelled list line such as ``B) Lyon``); a run over several
  lines of a list (an example's ``* first``, ``* second``, ``* third``) is an echo, not a choice.

Every screen reads the response in time linear in its length (the prompt-echo screen: one substring search of
the prompt's words, and a few steps for each place the response's words occur there); a response longer than
:data:`~rubric_reward.guards.confusables.SCAN_CHARS` is not read (None: the flag, ``injection.flag_response``, names it
``too_long``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .confusables import SCAN_CHARS, Words, compact, scan, visual, words
from .memo import per_rubric

__all__ = ["MASTER_KEYS", "screen_response"]

# Openers and bare tokens that carry no content (from the paper's master keys, a few languages).
MASTER_KEYS: tuple[str, ...] = (
    "thought process", "let's solve this problem step by step", "let's think step by step",
    "solution", "answer", "the answer is", "final answer", "response", "reasoning", "explanation",
    "step 1", "here is the answer", "here's the answer",
    "解", "解答", "答案", "かいせつ", "解説", "respuesta", "solución", "réponse", "antwort", "lösung",
)

# Words of a serialised rubric that carry none of its content (YAML/JSON field names, enum values).
_RUBRIC_FIELDS = frozenset(
    "rubric criteria criterion name requirement requirements weight kind options option label value "
    "description guidelines check kwargs allow abstain binary ordinal nominal true false null none".split())

_SENTENCE_END = re.compile(r"[.?!;:\n。？！；：]")
_LIST_LABEL = re.compile(r"^(?:[^\W\d_]|\d{1,2})$")  # "a", "B", "1", "12" before ")" or "."
_BULLETS = "-*•+"  # "- ", "* ", "• " opening a line
_OR = frozenset({"or"})


def _unit(words: Words) -> Words:
    """The shortest unit that ``words`` repeats (``words`` itself when it repeats none)."""
    n = len(words)
    for size in range(1, n // 2 + 1):
        # words[size] == words[0] holds for any unit of ``size`` (n >= 2 x size): a cheap first test
        if n % size == 0 and words[size] == words[0] and words[:size] * (n // size) == words:
            return words[:size]
    return words


@functools.lru_cache(maxsize=64)
def _pieces(texts: tuple[str, ...]) -> frozenset[Words]:
    return frozenset(w for w in map(words, texts) if w)


def _covered(words: Words, pieces: frozenset[Words]) -> bool:
    """Whether ``words`` is a sequence of whole pieces (each any number of times)."""
    vocab = {w for p in pieces for w in p}
    if not words or any(w not in vocab for w in words):
        return False
    return _tiles(words, pieces)


def _tiles(seq: Any, pieces: frozenset) -> bool:
    """Whether ``seq`` (words or characters) is a run of ``pieces``, each any number of times."""
    longest = max(map(len, pieces))
    reach = [True] + [False] * len(seq)
    for i in range(len(seq)):
        if reach[i]:
            for n in range(1, min(longest, len(seq) - i) + 1):
                if seq[i:i + n] in pieces:
                    reach[i + n] = True
    return reach[-1]


@functools.lru_cache(maxsize=16)
def _by_first(keys: frozenset[Words]) -> dict[str, tuple[Words, ...]]:
    """The openers by their first word, longest first."""
    out: dict[str, list[Words]] = {}
    for k in sorted(keys, key=len, reverse=True):
        out.setdefault(k[0], []).append(k)
    return {w: tuple(ks) for w, ks in out.items()}


def _strip_openers(words: Words, keys: frozenset[Words]) -> Words:
    """``words`` after its leading openers (the longest at each step): one pass, an index rather than a slice."""
    by_first, at, n = _by_first(keys), 0, len(words)
    while at < n:
        for k in by_first.get(words[at], ()):
            if len(k) == 1 or words[at:at + len(k)] == k:
                at += len(k)
                break
        else:
            break
    return words[at:]


def _bullet(sep: str) -> bool:
    """Whether the separator ``sep`` ends a line's opening with a bullet: (its start or a line break), white
    space, one of :data:`_BULLETS`, white space. Read from the end, once."""
    sep = sep.rstrip()
    if not sep or sep[-1] not in _BULLETS:
        return False
    head = sep[:-1]
    blank = head[len(head.rstrip()):]  # the white space just before the bullet
    return blank == head or "\n" in blank


@per_rubric
def _rubric_texts(rubric: Any) -> tuple[str, ...]:
    texts = [rubric.guidelines]
    for c in rubric.criteria:
        texts += [c.name, c.requirement, *c.labels, *(o.description for o in c.options)]
    return tuple(t for t in texts if t)


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        return "\n".join(str(m.get("content") or "") for m in prompt if isinstance(m, Mapping))
    return ""


def _offered(words: Words, seps: tuple[str, ...], start: int, end: int, breaks: Sequence[int]) -> bool:
    """Whether ``words[start:end]`` is an alternative the prompt offers: next to "or" or "/", an
    item of an "x, y or z" list, or a labelled list line ("B) Lyon", "- Lyon"). A run over several lines
    is none: copying a whole list (an example format's "* first / * second / * third") picks nothing.
    ``breaks[i]``: how many of ``seps[:i]`` hold a line break."""
    if breaks[end] - breaks[start + 1]:
        return False
    before, after = seps[start], seps[end]
    if (start and words[start - 1] in _OR) or (end < len(words) and words[end] in _OR):
        return True
    if "/" in before.strip() or "/" in after.strip():
        return True
    if "," in after and not _SENTENCE_END.search(after):
        for i in range(end, min(end + 12, len(words))):
            if words[i] in _OR:
                return True
            if _SENTENCE_END.search(seps[i + 1]):
                break
    if not (end == len(words) or "\n" in after):
        return False
    for label in (start - 1, start):  # the label before the run, or the run's own first word
        if 0 <= label < end - 1 and _LIST_LABEL.match(words[label]) and re.search(r"[).:]", seps[label + 1]) \
                and (label == 0 or "\n" in seps[label]):
            return True
    return _bullet(before)


@functools.lru_cache(maxsize=16)
def _prompt_index(prompt: str) -> tuple[Words, tuple[str, ...], Words, str, dict[int, int], list[int]]:
    """What the prompt-echo screen reads of ``prompt``, once per prompt: its words and separators, its repeated
    unit, its words joined by NUL (a character no word holds: a run of words is a substring search, linear) with
    each word's offset there, and how many separators up to each one hold a line break."""
    pwords, seps = scan(prompt)
    joined = "\0" + "\0".join(pwords) + "\0"
    at, starts = 0, {}
    for i, w in enumerate(pwords):
        starts[at] = i
        at += len(w) + 1
    breaks = [0]
    for sep in seps:
        breaks.append(breaks[-1] + ("\n" in sep))
    return pwords, seps, _unit(pwords), joined, starts, breaks


def _in_prompt(words: Words, prompt: str) -> bool:
    """Whether ``words`` occurs in ``prompt`` as a run of whole words it does not offer as a choice."""
    pwords, seps, unit, joined, starts, breaks = _prompt_index(prompt)
    if words == unit:
        return True
    n = len(words)
    if n > len(pwords) or all(w.isdigit() for w in words) or (n == 1 and len(words[0]) == 1):
        return False
    needle = "\0" + "\0".join(words) + "\0"
    at = joined.find(needle)
    while at >= 0:
        i = starts[at]
        if not _offered(pwords, seps, i, i + n, breaks):
            return True
        at = joined.find(needle, at + 1)
    return False


_COMPACT_LIMIT = 400  # compact skeletons longer than this are not read as master keys (one unit repeated is)


@functools.lru_cache(maxsize=64)
def _compact_keys(phrases: tuple[str, ...]) -> frozenset[str]:
    return frozenset(k for k in map(compact, phrases) if k)


def _compact_key(text: str, phrases: tuple[str, ...]) -> bool:
    """Whether the compact skeleton ``text`` is a run of compact master keys (each any number of times)."""
    if not text or len(text) > _COMPACT_LIMIT:
        return False
    keys = _compact_keys(phrases)
    return bool(keys) and _tiles(text, keys)


def screen_response(response: str, prompt: Any = None, *, rubric: Any = None,
                    phrases: Iterable[str] | None = None) -> str | None:
    """Why ``response`` is degenerate (``"empty"``, ``"whitespace"``, ``"punctuation"``,
    ``"master_key"``, ``"rubric_echo"``, ``"prompt_echo"``), or None when it deserves a judge.

    ``prompt`` is a string or chat messages; ``rubric`` (a :class:`~rubric_reward.rubric.Rubric`)
    enables the rubric-echo screen; ``phrases`` replaces :data:`MASTER_KEYS`. A response longer than
    :data:`~rubric_reward.guards.confusables.SCAN_CHARS` is not read (None)."""
    if not response:
        return "empty"
    if not response.strip():
        return "whitespace"
    if len(response) > SCAN_CHARS:
        return None
    said = _unit(words(response))
    if not said:
        return "punctuation"
    keys = _pieces(MASTER_KEYS if phrases is None else tuple(phrases))
    phrase_list = MASTER_KEYS if phrases is None else tuple(phrases)
    # a right-to-left override reorders the word characters but keeps how many there are: past the limit, neither
    # reading's compact skeleton can be a master key, and neither is built
    short = sum(map(len, words(response))) <= _COMPACT_LIMIT
    if _covered(said, keys) or (short and any(_compact_key(compact(t), phrase_list)
                                              for t in {response, visual(response)})):
        return "master_key"
    if rubric is not None:
        filler = keys | frozenset((w,) for w in set(said) if w in _RUBRIC_FIELDS or w.isdigit())
        if not _covered(said, filler) and _covered(said, _pieces(_rubric_texts(rubric)) | filler):
            return "rubric_echo"
    rest = _strip_openers(said, keys)
    text = _prompt_text(prompt)
    if rest and text and _in_prompt(_unit(rest), text):
        return "prompt_echo"
    return None
