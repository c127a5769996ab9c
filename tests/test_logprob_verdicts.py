"""Logprob verdicts: label probabilities read from hand-built token streams and from the server."""

from __future__ import annotations

import math

import pytest

from rubric_reward import Scorer
from rubric_reward.items import Item
from rubric_reward.judges import ChatReply, JudgeConfig, TokenLogprob
from rubric_reward.grading.logprobs import attach_probabilities
from rubric_reward.grading.criterion_prompt import parse_reply, render_call
from rubric_reward.results import Verdict
from rubric_reward.rubric import Rubric
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

try:
    from ._clients_fixtures import fresh_limiters, items  # noqa: F401
except ImportError:
    from _clients_fixtures import fresh_limiters, items  # noqa: F401

RUBRIC = Rubric.from_obj([
    {"name": "cites", "requirement": "The response cites a source."},
    {"name": "quality", "requirement": "Quality.", "options": {"poor": 0.0, "good": 0.6, "great": 1.0}},
])
CITES, QUALITY = RUBRIC.criteria
PREFIX = '{"reason": "It does.", "verdict": "'


def tok(text: str, top: dict[str, float] | None = None, p: float | None = None) -> TokenLogprob:
    top = top or {text: 1.0}
    return TokenLogprob(text, math.log(p if p is not None else top.get(text, 1.0)),
                        {k: math.log(v) for k, v in top.items()})


def judge(criteria, tokens: list[TokenLogprob]) -> list[Verdict]:
    call = render_call(RUBRIC, Item("an answer"), criteria, shuffle=False)
    text = "".join(t.token for t in tokens)
    verdicts = [Verdict(p.criterion, p.label, p.value, abstained=p.abstained) for p in parse_reply(call, text)]
    return attach_probabilities(call, ChatReply(text, logprobs=tuple(tokens)), verdicts)


def test_single_token_labels():
    [v] = judge([CITES], [tok(PREFIX), tok("MET", {"MET": 0.7, "UNMET": 0.2, "CANNOT_ASSESS": 0.1}), tok('"}')])
    assert v.label == "MET" and v.value == 1.0  # the parsed verdict is kept
    assert v.probabilities == pytest.approx({"MET": 0.7, "UNMET": 0.2, "CANNOT_ASSESS": 0.1})
    assert v.expected_value == pytest.approx(0.7 / 0.9)  # abstention mass renormalised away


def test_labels_spanning_tokens_match_on_prefixes():
    [v] = judge([CITES], [tok(PREFIX), tok("UN", {"UN": 0.3, "MET": 0.6, "CAN": 0.1}), tok("MET"), tok('"}')])
    assert v.label == "UNMET"
    assert v.probabilities == pytest.approx({"MET": 0.6, "UNMET": 0.3, "CANNOT_ASSESS": 0.1})


def test_a_token_carrying_the_opening_quote():
    head = '{"reason": "It does.", "verdict":'
    top = {' "MET': 0.5, ' "UN': 0.3, ' "C': 0.1, " MET": 0.1}  # the last lacks the quote: not a label
    [v] = judge([CITES], [tok(head), tok(' "MET', top), tok('"}')])
    assert v.probabilities == pytest.approx({"MET": 0.5 / 0.9, "UNMET": 0.3 / 0.9, "CANNOT_ASSESS": 0.1 / 0.9})


def test_a_token_carrying_the_closing_quote_and_off_menu_mass():
    [v] = judge([CITES], [tok(PREFIX), tok('MET"}', {'MET"}': 0.5, 'UNMET"}': 0.2, 'YES"}': 0.3})])
    assert v.probabilities == pytest.approx({"MET": 0.5 / 0.7, "UNMET": 0.2 / 0.7, "CANNOT_ASSESS": 0.0})


def test_ambiguous_prefix_on_the_chosen_path_is_resolved_by_the_next_token():
    tokens = [tok(PREFIX), tok("g", {"g": 0.8, "p": 0.2}), tok("reat", {"reat": 0.75, "ood": 0.25}), tok('"}')]
    [v] = judge([QUALITY], tokens)
    assert v.label == "great"
    assert v.probabilities == pytest.approx({"poor": 0.2, "good": 0.2, "great": 0.6})
    assert v.expected_value == pytest.approx(0.2 * 0.0 + 0.2 * 0.6 + 0.6 * 1.0)


def test_ambiguous_prefix_off_the_chosen_path_is_shared_equally():
    tokens = [tok(PREFIX), tok("poor", {"poor": 0.5, "g": 0.5}), tok('"}')]
    [v] = judge([QUALITY], tokens)
    assert v.probabilities == pytest.approx({"poor": 0.5, "good": 0.25, "great": 0.25})


def test_multi_criterion_calls_find_each_verdict():
    tokens = [tok('{"C1": {"reason": "a", "verdict": "'), tok("UNMET", {"UNMET": 0.9, "MET": 0.1}),
              tok('"}, "C2": {"reason": "b", "verdict": "'), tok("good", {"good": 0.5, "great": 0.5}),
              tok('"}}')]
    cites, quality = judge([CITES, QUALITY], tokens)
    assert cites.label == "UNMET" and cites.expected_value == pytest.approx(0.1)
    assert quality.label == "good" and quality.expected_value == pytest.approx(0.8)


def test_streams_that_do_not_show_the_parsed_label_are_left_alone():
    call = render_call(RUBRIC, Item("x"), [CITES], shuffle=False)
    text = PREFIX + 'MET"}'
    verdict = Verdict("cites", "UNMET", 0.0)  # disagrees with the stream
    out = attach_probabilities(call, ChatReply(text, logprobs=(tok(PREFIX), tok('MET"}'))), [verdict])
    assert out == [verdict]
    assert attach_probabilities(call, ChatReply(text), [verdict]) == [verdict]


def test_all_mass_on_abstention_has_no_expected_value():
    [v] = judge([CITES], [tok(PREFIX), tok("CANNOT_ASSESS", {"CANNOT_ASSESS": 0.99}), tok('"}')])
    assert v.abstained and v.probabilities["CANNOT_ASSESS"] == 1.0 and v.expected_value is None


def test_logprob_verdicts_make_a_denser_reward_end_to_end():
    script = ScriptedJudge({"cites": {"MET": 0.6, "UNMET": 0.3, "CANNOT_ASSESS": 0.1},
                            "quality": lambda r, b: "great"})
    with JudgeServer(script) as srv:
        config = JudgeConfig(model="m", base_url=srv.base_url, logprobs=True, top_logprobs=5)
        with Scorer(RUBRIC, config) as s:
            [r] = s.score_batch(items(1))
        assert srv.bodies[0]["logprobs"] is True and srv.bodies[0]["top_logprobs"] == 5
    cites = r.verdict("cites")
    assert cites.label == "MET" and cites.expected_value == pytest.approx(0.6 / 0.9)
    assert r.score == pytest.approx(1.0)
    assert r.expected_score == pytest.approx((0.6 / 0.9 + 1.0) / 2)


def test_tokens_that_list_a_stop_token_after_the_answer_still_give_probabilities():
    """A server may list the stop token in the logprobs while the reply's text leaves it out (the vLLM CI
    failure after issue 32): the answer is found in the reply's text, and the tokens agree up to its end."""
    from rubric_reward.grading.logprobs import _answer_at

    answer = '{"reason": "The answer is clear.", "verdict": "MET"}'
    assert _answer_at(answer + "<|im_end|>", answer) == 0
    assert _answer_at("  " + answer + "<eos>", "  " + answer) == 2
    assert _answer_at('{"verdict": "MET"} ' + answer, answer) == -1  # tokens that differ before the end: none
