"""Logprob verdicts: the judge's probability over verdict labels, read from its token logprobs.

Where a backend returns token logprobs, the verdict's value is located in the token stream (the text
after ``"verdict": "`` in the answer object; for a multi-criterion call, the one inside each
``"C<n>"`` object). At that position the top alternatives are matched to the allowed labels:

* an alternative is first stripped of the characters the chosen token has before the value (a token
  may carry the opening quote, e.g. ``: "MET``), and is dropped if it does not share them;
* text up to a closing quote must be a whole label; otherwise it must be a prefix of labels: one
  label takes its mass; several labels share it equally, except on the chosen path, where the next
  position's alternatives (conditional on that prefix, normalised over the labels they reach)
  split it instead;
* mass on anything off the menu is dropped, and the rest is normalised over the allowed labels.

``probabilities`` maps every allowed label (abstention included) to its probability.
``expected_value`` is the probability-weighted option value with the abstention mass renormalised
away: P(MET | not abstaining) for binary criteria; None if all mass is on abstention. The parsed
label and value are kept; a verdict whose token stream does not show its parsed label is left as is.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..judges.base import ChatReply, TokenLogprob
from ..results import Verdict
from ..rubric import Criterion
from .criterion_prompt import JudgeCall, PromptError, answer_span, answer_start

__all__ = ["attach_probabilities", "label_probabilities", "token_offsets"]

_VERDICT = re.compile(r'"verdict"\s*:\s*"')
_KEY = re.compile(r'"(C\d+)"\s*:\s*\{')
_MAX_DEPTH = 12


def attach_probabilities(call: JudgeCall, reply: ChatReply, verdicts: list[Verdict]) -> list[Verdict]:
    """``verdicts`` with ``probabilities`` and ``expected_value`` set where the logprobs allow."""
    tokens = reply.logprobs
    if not tokens:
        return verdicts
    starts, text = token_offsets(tokens)
    sites = _verdict_sites(call, text, reply.text)
    by_name = {c.name: c for c in call.criteria}
    out = []
    for v in verdicts:
        site = sites.get(v.criterion)
        c = by_name.get(v.criterion)
        if site is None or c is None or v.label is None or not text.startswith(v.label + '"', site):
            out.append(v)
            continue
        probs = label_probabilities(tokens, starts, site, c.labels)
        if probs is None:
            out.append(v)
            continue
        out.append(replace(v, probabilities=probs, expected_value=expected_value(c, probs)))
    return out


def token_offsets(tokens: Sequence[TokenLogprob]) -> tuple[list[int], str]:
    """The character offset where each token starts, and the text the tokens spell."""
    starts, pos = [], 0
    for t in tokens:
        starts.append(pos)
        pos += len(t.token)
    return starts, "".join(t.token for t in tokens)


def _answer_at(text: str, reply_text: str | None) -> int:
    """Where the answer object starts in the tokens' ``text``: parsed there, else where it starts in the reply's
    text when the tokens spell the same up to it (a server may list a stop token the reply's text leaves out)."""
    start = answer_start(text)
    if start < 0 and reply_text:
        try:
            _, at, end = answer_span(reply_text)
        except PromptError:
            return start
        if text[:end] == reply_text[:end]:
            return at
    return start


def _verdict_sites(call: JudgeCall, text: str, reply_text: str | None = None) -> dict[str, int]:
    """Character offsets where each criterion's verdict label starts, inside the answer object (never in
    text the judge quoted before it)."""
    start = _answer_at(text, reply_text)
    matches = list(_VERDICT.finditer(text, max(start, 0))) if start >= 0 else []
    if not matches:
        return {}
    if call.keys is None:
        return {call.criteria[0].name: matches[-1].end()}
    names = dict(zip(call.keys, (c.name for c in call.criteria), strict=True))
    keys = [(m.start(), m.group(1)) for m in _KEY.finditer(text, start)]
    sites: dict[str, int] = {}
    for m in matches:
        owner = None
        for start, key in keys:
            if start > m.start():
                break
            owner = key
        if owner in names:
            sites[names[owner]] = m.end()
    return sites


def label_probabilities(tokens: Sequence[TokenLogprob], starts: Sequence[int], site: int,
                        labels: Sequence[str]) -> dict[str, float] | None:
    """Normalised probabilities of ``labels`` for a value starting at character ``site``."""
    i = bisect.bisect_right(starts, site) - 1
    if i < 0:
        return None
    mass: dict[str, float] = {}
    _walk(tokens, i, site - starts[i], "", 1.0, tuple(labels), mass, 0)
    total = sum(mass.values())
    if total <= 0.0:
        return None
    return {label: mass.get(label, 0.0) / total for label in labels}


def _walk(tokens: Sequence[TokenLogprob], i: int, cut: int, consumed: str, weight: float,
          labels: tuple[str, ...], mass: dict[str, float], depth: int) -> None:
    tok = tokens[i]
    lead = tok.token[:cut]
    alternatives = dict(tok.top)
    alternatives.setdefault(tok.token, tok.logprob)
    for alt, logprob in alternatives.items():
        if not alt.startswith(lead):
            continue
        piece = consumed + alt[cut:]
        p = weight * math.exp(logprob)
        quote = piece.find('"')
        if quote >= 0:
            label = piece[:quote]
            if label in labels:
                mass[label] = mass.get(label, 0.0) + p
            continue
        matching = [label for label in labels if label.startswith(piece)]
        if not matching:
            continue
        if len(matching) > 1 and alt == tok.token and i + 1 < len(tokens) and depth < _MAX_DEPTH:
            # the chosen path is still ambiguous: the next position's alternatives, conditional on
            # this prefix and normalised over the labels they reach, split its mass
            child: dict[str, float] = {}
            _walk(tokens, i + 1, 0, piece, 1.0, labels, child, depth + 1)
            total = sum(child.values())
            if total > 0.0:
                for label, q in child.items():
                    mass[label] = mass.get(label, 0.0) + p * q / total
                continue
        for label in matching:
            mass[label] = mass.get(label, 0.0) + p / len(matching)


def expected_value(criterion: Criterion, probs: Mapping[str, float]) -> float | None:
    """Probability-weighted option value, with the abstention mass renormalised away."""
    on_menu = sum(probs.get(o.label, 0.0) for o in criterion.options)
    if on_menu <= 0.0:
        return None
    return sum(probs.get(o.label, 0.0) * o.value for o in criterion.options) / on_menu
