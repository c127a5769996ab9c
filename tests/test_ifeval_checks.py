"""Tests for the IFEval checkers, strict/loose evaluation, summaries and data loading."""

from __future__ import annotations

import json
import sys

import pytest

from rubric_reward.checks.ifeval import (
    CHECKERS,
    IFEvalResult,
    check,
    check_loose,
    count_capital_words,
    count_sentences,
    count_words,
    evaluate,
    evaluate_row,
    get_checker,
    loose_variants,
    summarize,
)
from rubric_reward.evaluation.ifeval_prompts import (
    IFEvalRow,
    ifeval_row_to_checks,
    load_ifeval,
    match_responses,
)


# --------------------------------------------------------------------------
# One table of (instruction id, kwargs, response, expected strict result).
# Every checker has at least one passing and one failing case.
# --------------------------------------------------------------------------

AT_LEAST, LESS_THAN = "at least", "less than"

CASES = [
    # keywords:existence - case-insensitive substring
    ("keywords:existence", {"keywords": ["cat", "dog"]}, "The Cat met the DOG.", True),
    ("keywords:existence", {"keywords": ["cat", "dog"]}, "Only a cat here.", False),
    ("keywords:existence", {"keywords": ["cat"]}, "We concatenate strings.", True),
    # keywords:frequency - case-insensitive substring count, both relations
    ("keywords:frequency", {"keyword": "apple", "frequency": 2, "relation": AT_LEAST}, "Apple pie and an apple.", True),
    ("keywords:frequency", {"keyword": "apple", "frequency": 2, "relation": AT_LEAST}, "One apple.", False),
    ("keywords:frequency", {"keyword": "apple", "frequency": 2, "relation": LESS_THAN}, "One apple.", True),
    ("keywords:frequency", {"keyword": "apple", "frequency": 2, "relation": LESS_THAN}, "APPLE and pineapple.", False),
    # keywords:forbidden_words - whole words only
    ("keywords:forbidden_words", {"forbidden_words": ["bad", "ugly"]}, "This is good.", True),
    ("keywords:forbidden_words", {"forbidden_words": ["bad", "ugly"]}, "That is BAD!", False),
    ("keywords:forbidden_words", {"forbidden_words": ["bad"]}, "A badge is fine.", True),
    # keywords:letter_frequency - case-insensitive character count
    ("keywords:letter_frequency", {"letter": "a", "let_frequency": 3, "let_relation": AT_LEAST}, "bAnana", True),
    ("keywords:letter_frequency", {"letter": "a", "let_frequency": 3, "let_relation": AT_LEAST}, "bat", False),
    ("keywords:letter_frequency", {"letter": "a", "let_frequency": 3, "let_relation": LESS_THAN}, "bat", True),
    ("keywords:letter_frequency", {"letter": "Q", "let_frequency": 2, "let_relation": AT_LEAST}, "Quiet queue", True),
    # key 1122: non a-z "letter" counted literally
    ("keywords:letter_frequency", {"letter": "#", "let_frequency": 4, "let_relation": AT_LEAST}, "#a #b #c #d", True),
    ("keywords:letter_frequency", {"letter": "#", "let_frequency": 4, "let_relation": AT_LEAST}, "#a #b #c", False),
    ("keywords:letter_frequency", {"letter": "!", "let_frequency": 6, "let_relation": AT_LEAST}, "Yum!!!!!!", True),
    # language:response_language - seeded langdetect; undetectable counts as followed
    ("language:response_language", {"language": "fr"}, "Bonjour, je m'appelle Pierre et j'aime beaucoup la cuisine française.", True),
    ("language:response_language", {"language": "fr"}, "The weather is lovely today and we are going for a walk in the park.", False),
    ("language:response_language", {"language": "en"}, "The weather is lovely today and we are going for a walk in the park.", True),
    ("language:response_language", {"language": "de"}, "12345 67890", True),
    # length_constraints:number_sentences - Punkt, abbreviations do not split
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LESS_THAN}, "One. Two.", True),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LESS_THAN}, "One. Two. Three.", False),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": AT_LEAST}, "One. Two. Three.", True),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": AT_LEAST}, "Dr. Smith met Mr. Jones. They ate.", False),
    # length_constraints:number_paragraphs - *** dividers, exact count
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "A\n***\nB\n***\nC", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "A\n***\nB", False),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "***\nA\n***\nB\n***\nC\n***", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "A\n***\n***\nB\n***\nC", False),
    # length_constraints:number_words - \w+ runs
    ("length_constraints:number_words", {"num_words": 5, "relation": AT_LEAST}, "one two three four five", True),
    ("length_constraints:number_words", {"num_words": 5, "relation": AT_LEAST}, "one two three four", False),
    ("length_constraints:number_words", {"num_words": 5, "relation": LESS_THAN}, "well-known ideas", True),
    ("length_constraints:number_words", {"num_words": 5, "relation": LESS_THAN}, "a b c d e f", False),
    # length_constraints:nth_paragraph_first_word - \n\n paragraphs
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "however"},
     "Intro here.\n\nHowever, this.\n\nThe end.", True),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "however"},
     'Intro here.\n\n"However," she said.\n\nThe end.', True),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "however"},
     "Intro here.\n\nBut this.\n\nThe end.", False),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "however"},
     "Intro here.\n\nHowever, this.", False),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "however"},
     "Intro here.\n\nHowever, this.", False),
    # detectable_content:number_placeholders - [square brackets], at least
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name], see you at [address].", True),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name], see you soon.", False),
    # detectable_content:postscript - P.S. and P.P.S markers, case-insensitive
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi there.\n\nP.S. See you soon.", True),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi there.\n\np.s. see you soon.", True),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi there. See you soon.", False),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Hi.\nP.S. One.\nP.P.S Two.", True),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Hi.\nP.S. One.", False),
    # detectable_format:number_bullet_lists - exact count of * and - bullets
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* first\n* second", True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "**Bold title**\n* first\n- second", True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* first\n- second\n- third", False),
    # detectable_format:constrained_response
    ("detectable_format:constrained_response", {}, "My answer is yes.", True),
    ("detectable_format:constrained_response", {}, "Well... My answer is maybe.", True),
    ("detectable_format:constrained_response", {}, "Yes.", False),
    # detectable_format:number_highlighted_sections - *x* and **x**, non-empty
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*one* and **two**", True),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*one* and * *", False),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 1}, "no highlights here", False),
    # detectable_format:multiple_sections - "<splitter> <n>", case-sensitive
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\nfoo\nSection 2\nbar", True),
    ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 2},
     "SECTION 1\nfoo\nSECTION 2\nbar", True),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "SECTION 1\nfoo\nSECTION 2\nbar", False),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2}, "Section 1\nonly one", False),
    # detectable_format:json_format - code fences allowed
    ("detectable_format:json_format", {}, '{"a": 1}', True),
    ("detectable_format:json_format", {}, '```json\n{"a": [1, 2]}\n```', True),
    ("detectable_format:json_format", {}, "```\n[1, 2]\n```", True),
    ("detectable_format:json_format", {}, 'Here it is: {"a": 1}', False),
    # detectable_format:title - <<non-empty>> on one line
    ("detectable_format:title", {}, "<<Poem of Joy>>\nRoses are red.", True),
    ("detectable_format:title", {}, "<< >>\nRoses are red.", False),
    ("detectable_format:title", {}, "Roses are red.", False),
    # combination:two_responses - ****** separator, different answers
    ("combination:two_responses", {}, "Answer one.\n******\nAnswer two.", True),
    ("combination:two_responses", {}, "******Answer one.******Answer two.", True),
    ("combination:two_responses", {}, "Same.\n******\nSame.", False),
    ("combination:two_responses", {}, "A\n******\nB\n******\nC", False),
    ("combination:two_responses", {}, "Only one answer.", False),
    # combination:repeat_prompt - starts with the request, case-insensitive
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem about cats."},
     "write a poem about cats. Cats nap all day.", True),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem about cats."},
     "Sure! Write a poem about cats. Cats nap.", False),
    # startend:end_checker - exact ending, case-insensitive, surrounding quotes ignored
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Done. Any other questions?", True),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, '"Done. any other questions?"', True),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Any other questions? Bye.", False),
    # change_case:capital_word_frequency - NLTK-style tokens, both relations
    ("change_case:capital_word_frequency", {"capital_frequency": 3, "capital_relation": AT_LEAST},
     "THIS IS GREAT news", True),
    ("change_case:capital_word_frequency", {"capital_frequency": 3, "capital_relation": LESS_THAN},
     "THIS IS GREAT news", False),
    ("change_case:capital_word_frequency", {"capital_frequency": 3, "capital_relation": LESS_THAN},
     "A WELL-KNOWN fact.", True),
    # change_case:english_capital - all caps and English
    ("change_case:english_capital", {}, "THIS IS AN ENGLISH SENTENCE WRITTEN ENTIRELY IN CAPITAL LETTERS.", True),
    ("change_case:english_capital", {}, "This Is Not All Capitals.", False),
    ("change_case:english_capital", {}, "ПРИВЕТ, КАК ДЕЛА? У МЕНЯ ВСЁ ХОРОШО, СПАСИБО БОЛЬШОЕ.", False),
    # change_case:english_lowercase - all lowercase and English
    ("change_case:english_lowercase", {}, "the sun is bright today and the sky is a beautiful shade of blue", True),
    ("change_case:english_lowercase", {}, "The sun is bright today.", False),
    ("change_case:english_lowercase", {}, "le soleil brille aujourd'hui et le ciel est d'un beau bleu", False),
    # punctuation:no_comma
    ("punctuation:no_comma", {}, "No commas here.", True),
    ("punctuation:no_comma", {}, "One, two.", False),
    # startend:quotation - wrapped in double quotes after stripping
    ("startend:quotation", {}, '  "Hello world"\n', True),
    ("startend:quotation", {}, "Hello world", False),
    ("startend:quotation", {}, '"', False),
]


@pytest.mark.parametrize(("instruction_id", "kwargs", "response", "expected"), CASES)
def test_checker_cases(instruction_id, kwargs, response, expected):
    assert check(instruction_id, response, kwargs) is expected


def test_every_checker_has_passing_and_failing_case():
    outcomes: dict[str, set[bool]] = {}
    for instruction_id, _, _, expected in CASES:
        outcomes.setdefault(instruction_id, set()).add(expected)
    assert set(outcomes) == set(CHECKERS)
    assert len(CHECKERS) == 25
    assert all(seen == {True, False} for seen in outcomes.values()), outcomes


# --------------------------------------------------------------------------
# Text measurements
# --------------------------------------------------------------------------


def test_count_words_uses_word_runs():
    assert count_words("Hello, world! It's well-known.") == 6
    assert count_words("") == 0


def test_count_sentences_matches_nltk_punkt():
    assert count_sentences("Dr. Smith went home. He was tired.") == 2
    assert count_sentences("") == 0
    # NLTK (hence the reference) leaves a stray final "!" as its own sentence.
    assert count_sentences("Wow!!!") == 2
    assert count_sentences("Really?! Yes.") == 2


def test_count_capital_words_follows_nltk_tokens():
    assert count_capital_words("THIS IS GREAT news") == 3
    assert count_capital_words("A WELL-KNOWN fact.") == 2  # hyphenated word is one token
    assert count_capital_words("I DON'T KNOW.") == 4  # DO + N'T
    assert count_capital_words("U.S.A. and USA's") == 2
    assert count_capital_words("123 ... !!!") == 0


# --------------------------------------------------------------------------
# Strict vs loose
# --------------------------------------------------------------------------


def test_loose_variants_order_and_content():
    variants = loose_variants("Sure:\n*body*\nBye")
    assert variants == [
        "Sure:\n*body*\nBye",
        "Sure:\nbody\nBye",
        "*body*\nBye",
        "Sure:\n*body*",
        "*body*",
        "body\nBye",
        "Sure:\nbody",
        "body",
    ]


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "response"),
    [
        ("startend:quotation", {}, 'Sure, here it is:\n"Hello world"'),
        ("punctuation:no_comma", {}, "Sure, here it is:\nNo commas in the answer"),
        ("detectable_format:json_format", {}, 'Sure, here it is:\n{"a": 1}'),
        ("detectable_format:json_format", {}, '{"a": 1}\nHope this helps!'),
        ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Done. Any other questions?**"),
        ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}, "Okay.\nSay hi. Hi!"),
    ],
)
def test_loose_passes_where_strict_fails(instruction_id, kwargs, response):
    assert check(instruction_id, response, kwargs) is False
    assert check_loose(instruction_id, response, kwargs) is True


def test_blank_response_never_follows():
    for response in ("", "   \n"):
        assert check("punctuation:no_comma", response) is False
        assert check_loose("punctuation:no_comma", response) is False
    # The raw checker has no blank rule (the reference's check_following).
    assert get_checker("punctuation:no_comma").follows("") is True


# --------------------------------------------------------------------------
# Kwargs validation and errors
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "message"),
    [
        ("punctuation:no_colon", {}, "unknown IFEval instruction id 'punctuation:no_colon'"),
        ("keywords:frequency", {"keyword": "x", "frequency": 2}, "missing kwarg 'relation'"),
        ("keywords:frequency", {"keyword": "x", "frequency": 2, "relation": "at most"}, "bad kwarg relation"),
        ("keywords:frequency", {"keyword": "x", "frequency": "2", "relation": AT_LEAST}, "bad kwarg frequency"),
        ("keywords:frequency", {"keyword": "x", "frequency": -1, "relation": AT_LEAST}, "bad kwarg frequency"),
        ("punctuation:no_comma", {"num_words": 3}, "unknown kwarg(s) ['num_words']"),
        ("keywords:letter_frequency", {"letter": "ab", "let_frequency": 1, "let_relation": AT_LEAST}, "bad kwarg letter"),
        ("keywords:letter_frequency", {"letter": "", "let_frequency": 1, "let_relation": AT_LEAST}, "bad kwarg letter"),
        ("language:response_language", {"language": "English"}, "bad kwarg language"),
        ("keywords:existence", {"keywords": "cat"}, "bad kwarg keywords"),
        ("length_constraints:nth_paragraph_first_word",
         {"num_paragraphs": 2, "nth_paragraph": 0, "first_word": "a"}, "bad kwarg nth_paragraph"),
    ],
)
def test_bad_ids_and_kwargs_raise_clear_errors(instruction_id, kwargs, message):
    with pytest.raises(ValueError) as excinfo:
        check(instruction_id, "Some response.", kwargs)
    assert message in str(excinfo.value)


def test_none_kwargs_are_ignored_like_hub_rows():
    hub_style = {"keyword": None, "num_words": None, "language": None}
    assert check("punctuation:no_comma", "fine", hub_style) is True


def test_repeat_prompt_falls_back_to_prompt():
    assert check("combination:repeat_prompt", "Say hi. Hi!", None, prompt="Say hi.") is True
    with pytest.raises(ValueError, match="missing kwarg 'prompt_to_repeat'"):
        check("combination:repeat_prompt", "Say hi. Hi!")


def test_checker_metadata():
    checker = CHECKERS["punctuation:no_comma"]
    assert checker.instruction_id == "punctuation:no_comma"
    assert checker.category == "punctuation"
    assert {c.category for c in CHECKERS.values()} == {
        "keywords", "language", "length_constraints", "detectable_content",
        "detectable_format", "combination", "startend", "change_case", "punctuation",
    }


# --------------------------------------------------------------------------
# Prompt-level and instruction-level summaries on a hand-made set
# --------------------------------------------------------------------------

HAND_ROWS = [
    IFEvalRow(1, "Say hello in quotes without commas.", ("punctuation:no_comma", "startend:quotation"), ({}, {})),
    IFEvalRow(2, "Give it a title, no commas.", ("punctuation:no_comma", "detectable_format:title"), ({}, {})),
    IFEvalRow(
        3, "Write five words and end with Bye.",
        ("length_constraints:number_words", "startend:end_checker"),
        ({"num_words": 5, "relation": AT_LEAST}, {"end_phrase": "Bye."}),
    ),
    IFEvalRow(
        4, "Mention the sun, all lowercase.",
        ("keywords:existence", "change_case:english_lowercase"),
        ({"keywords": ["sun"]}, {}),
    ),
]
HAND_RESPONSES = [
    '"Hello world"',                                      # strict T T   loose T T
    "Sure, here it is:\n<<Greeting>>\nHello there",       # strict F T   loose T T (first line dropped)
    "Only three words\nBye.**",                           # strict F F   loose F T (* removed)
    "the sun is bright today and the sky is a beautiful shade of blue",  # T T both
]


def test_hand_made_results_strict_and_loose():
    pairs = list(zip(HAND_ROWS, HAND_RESPONSES))
    strict = evaluate(pairs)
    loose = evaluate(pairs, loose=True)
    assert [r.follow_instruction_list for r in strict] == [[True, True], [False, True], [False, False], [True, True]]
    assert [r.follow_instruction_list for r in loose] == [[True, True], [True, True], [False, True], [True, True]]
    assert [r.follow_all_instructions for r in strict] == [True, False, False, True]


def test_hand_made_summary_numbers():
    pairs = list(zip(HAND_ROWS, HAND_RESPONSES))
    strict = summarize(evaluate(pairs))
    loose = summarize(evaluate(pairs, loose=True))

    assert strict.prompt_accuracy == pytest.approx(2 / 4)
    assert strict.instruction_accuracy == pytest.approx(5 / 8)
    assert loose.prompt_accuracy == pytest.approx(3 / 4)
    assert loose.instruction_accuracy == pytest.approx(7 / 8)

    assert strict.to_dict()["per_instruction"] == {
        "change_case:english_lowercase": 1.0,
        "detectable_format:title": 1.0,
        "keywords:existence": 1.0,
        "length_constraints:number_words": 0.0,
        "punctuation:no_comma": 0.5,
        "startend:end_checker": 0.0,
        "startend:quotation": 1.0,
    }
    assert strict.to_dict()["per_category"] == {
        "change_case": 1.0,
        "detectable_format": 1.0,
        "keywords": 1.0,
        "length_constraints": 0.0,
        "punctuation": 0.5,
        "startend": 0.5,
    }
    assert loose.to_dict()["per_category"]["punctuation"] == 1.0
    assert loose.to_dict()["per_category"]["startend"] == 1.0
    assert strict.per_instruction["punctuation:no_comma"].correct == 1
    assert strict.per_instruction["punctuation:no_comma"].total == 2
    assert strict.to_dict()["num_prompts"] == 4 and strict.to_dict()["num_instructions"] == 8


def test_summarize_rejects_empty():
    with pytest.raises(ValueError, match="no IFEval results"):
        summarize([])


def test_result_serialises_to_reference_row():
    result = evaluate_row(HAND_ROWS[1], HAND_RESPONSES[1])
    assert isinstance(result, IFEvalResult)
    row = result.to_dict()
    assert row == {
        "prompt": "Give it a title, no commas.",
        "instruction_id_list": ["punctuation:no_comma", "detectable_format:title"],
        "follow_all_instructions": False,
        "follow_instruction_list": [False, True],
        "response": HAND_RESPONSES[1],
    }
    json.dumps(row)
    assert result.to_dict(include_key=True)["key"] == 2


def test_evaluate_row_accepts_plain_mappings():
    row = {"key": 9, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    assert evaluate_row(row, "no commas").follow_all_instructions is True


# --------------------------------------------------------------------------
# The packaged 541 rows
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def packaged_rows():
    return load_ifeval()


def test_packaged_rows_are_known_and_valid(packaged_rows):
    assert len(packaged_rows) == 541
    seen_ids = {i for row in packaged_rows for i in row.instruction_id_list}
    assert seen_ids == set(CHECKERS)
    assert sum(len(row.instruction_id_list) for row in packaged_rows) == 834
    for row in packaged_rows:
        for instruction_id, kwargs in zip(row.instruction_id_list, row.kwargs):
            CHECKERS[instruction_id].validate(kwargs, row.prompt)
    letters = {r.key: r.kwargs[r.instruction_id_list.index("keywords:letter_frequency")]["letter"]
               for r in packaged_rows if r.key in (1122, 1129)}
    assert letters == {1122: "#", 1129: "!"}


def test_every_packaged_instruction_runs_on_empty_and_short_responses(packaged_rows):
    for row in packaged_rows:
        for response in ("", "Hello, world."):
            for result in (evaluate_row(row, response), evaluate_row(row, response, loose=True)):
                assert len(result.follow_instruction_list) == len(row.instruction_id_list)
                if not response:
                    assert result.follow_instruction_list == [False] * len(row.instruction_id_list)


# --------------------------------------------------------------------------
# Loading, matching and conversion to checks
# --------------------------------------------------------------------------


def _write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_load_from_jsonl_path_drops_none_kwargs(tmp_path):
    path = _write_jsonl(tmp_path / "in.jsonl", [
        {"key": 5, "prompt": "Hi", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"num_words": None}]},
    ])
    rows = load_ifeval(path)
    assert rows == [IFEvalRow(5, "Hi", ("punctuation:no_comma",), ({},))]
    assert rows[0].to_dict()["kwargs"] == [{}]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"key": 2, "instruction_id_list": [], "kwargs": []}, "line 2: missing field 'prompt'"),
        ({"key": "2", "prompt": "p", "instruction_id_list": [], "kwargs": []}, "line 2: field 'key'"),
        ({"key": 2, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": []}, "line 2: field 'kwargs'"),
        ({"key": 2, "prompt": "p", "instruction_id_list": ["nope:nope"], "kwargs": [{}]}, "unknown IFEval instruction id"),
        ({"key": 2, "prompt": "p", "instruction_id_list": ["keywords:frequency"],
          "kwargs": [{"keyword": "a", "frequency": 1, "relation": "more than"}]}, "line 2: field 'instruction_id_list[0]'"),
        ({"key": 1, "prompt": "q", "instruction_id_list": [], "kwargs": []}, "duplicate key 1"),
    ],
)
def test_load_errors_name_line_and_field(tmp_path, record, message):
    good = {"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    path = _write_jsonl(tmp_path / "in.jsonl", [good, record])
    with pytest.raises(ValueError) as excinfo:
        load_ifeval(path)
    assert message in str(excinfo.value)


def test_load_errors_for_bad_json_and_missing_file(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("{not json}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl: line 1: not valid JSON"):
        load_ifeval(path)
    with pytest.raises(FileNotFoundError):
        load_ifeval(tmp_path / "missing.jsonl")


def test_hub_name_without_datasets_gives_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ImportError, match="needs the 'datasets' package"):
        load_ifeval("google/IFEval")


def test_match_responses_by_key_and_by_prompt():
    rows = HAND_ROWS
    records = [
        {"prompt": rows[2].prompt, "response": "c"},
        {"key": 1, "response": "a"},
        {"key": 2, "prompt": rows[1].prompt, "response": "b"},
        {"prompt": rows[3].prompt, "response": "d"},
    ]
    pairs = match_responses(rows, records)
    assert [(row.key, response) for row, response in pairs] == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]


def test_match_responses_from_jsonl_path(tmp_path):
    path = _write_jsonl(tmp_path / "responses.jsonl", [{"key": 1, "response": "a"}])
    assert match_responses(HAND_ROWS, path, allow_missing=True) == [(HAND_ROWS[0], "a")]


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"key": 99, "response": "x"}], "key 99 matches no IFEval row"),
        ([{"prompt": "unknown prompt", "response": "x"}], "prompt matches no IFEval row"),
        ([{"key": 1, "response": "x"}, {"prompt": HAND_ROWS[0].prompt, "response": "y"}], "a second response for key 1"),
        ([{"key": 1, "prompt": "other", "response": "x"}], "prompt differs"),
        ([{"key": 1}], "field 'response' must be a string"),
        ([{"response": "x"}], "needs a 'key' or a 'prompt'"),
    ],
)
def test_match_responses_errors(records, message):
    with pytest.raises(ValueError) as excinfo:
        match_responses(HAND_ROWS, records, allow_missing=True)
    assert message in str(excinfo.value)


def test_match_responses_reports_missing_rows():
    with pytest.raises(ValueError, match="3 IFEval row\\(s\\) have no response"):
        match_responses(HAND_ROWS, [{"key": 1, "response": "a"}])


def test_row_to_checks(packaged_rows):
    row = next(r for r in packaged_rows if r.key == 1129)
    checks = ifeval_row_to_checks(row)
    assert [c["check"] for c in checks] == ["ifeval:keywords:letter_frequency", "ifeval:combination:repeat_prompt"]
    assert checks[0]["kwargs"] == {"let_relation": "at least", "letter": "!", "let_frequency": 6}
    hub_style = {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"keyword": None}]}
    assert ifeval_row_to_checks(hub_style) == [{"check": "ifeval:punctuation:no_comma", "kwargs": {}}]
