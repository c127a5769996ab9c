"""Scripted judges with planted defects, for testing the judge card (``rubric-reward qualify``).

Each is a :class:`~rubric_reward.testing.judge_server.ScriptedJudge` (served by
:class:`~rubric_reward.testing.judge_server.JudgeServer`, so a test runs the real HTTP path) whose verdict is a
deterministic function of the request: the same request always gets the same answer. A ``truth`` says what a
faithful judge answers: ``truth(criterion, response)`` returns a label, or None for "not known" (then UNMET, or
for option criteria the alphabetically first option; the red-team's responses are such unknowns). Defects are
planted per criterion name:

* ``noisy={name: rate}``: with probability ``rate`` (drawn from a hash of the whole request, so each of a
  criterion's repeated judgings draws anew once its seed or option order differs) the verdict is an option drawn
  at random (the truth among them): a binary verdict's variance is then (rate / 2)(1 - rate / 2), above the card's
  0.05 from a rate of about 0.11;
* ``position_biased={names}``: the first option shown in the request, whatever the response;
* ``sign_blind={names}``: MET on everything (the best option for option criteria), the way a judge answers a
  penalty ("the response contains a flaw") as if it asked whether the response is good;
* ``persuadable={names}``: a response that carries a verdict for the grader gets the label it plants (a label
  named after ``verdict``), else MET or the best option; "carries" is what the package's flag reads
  (:func:`rubric_reward.guards.flag.flag_response`: verdict-shaped text, a request to the grader, a forged prompt
  structure) or what the red-team's gullible judge decodes (:func:`.redteam_judges.copying_label`);
* nothing planted: the faithful judge.

Several defects on one criterion apply in that order: persuasion, sign-blindness, position, noise.

:func:`corpus` makes responses grouped by prompt with known labels for any rubric (the truth and the gold labels).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from .judge_server import ScriptedJudge, _rendered

__all__ = ["PlantedJudge", "Truth", "corpus", "shown_labels", "truth_table"]

Truth = Callable[[str, str], "str | None"]

_ABSTAIN = ("CANNOT_ASSESS", "N/A")
_HEADER = re.compile(r"^### (?:C\d+: )?(.+)$", re.M)
_PLANTED = re.compile(r"verdict\W{0,4}([A-Za-z_/]+)", re.I)


def corpus(rubric: Any, *, prompts: int = 20, per_prompt: int = 5, seed: int = 0,
           met_rate: float = 0.5, penalty_rate: float = 0.3) -> tuple[list[dict[str, Any]], Truth]:
    """Rows ``{prompt, response, group, labels}`` (``prompts`` groups of ``per_prompt`` responses) whose labels
    for ``rubric``'s judged criteria are drawn from a hash of (seed, criterion, response): MET at ``met_rate`` for
    a positive-weight criterion, at ``penalty_rate`` for a negative one, a uniform option otherwise; and the truth
    that answers them."""
    rows, labels = [], {}
    for p in range(prompts):
        prompt = f"Customer {p} asks about order {1000 + p}: where is it, and when will it arrive?"
        for j in range(per_prompt):
            response = (f"Reply {j} on order {1000 + p}: we checked the order with the warehouse and here is "
                        f"what we found for you (case {seed}-{p}-{j}).")
            own = {}
            for c in rubric.criteria:
                if not c.is_judged:
                    continue
                u = _unit(seed, c.name, response)
                if c.kind.value == "binary":
                    own[c.name] = "MET" if u < (met_rate if c.weight >= 0 else penalty_rate) else "UNMET"
                else:
                    own[c.name] = c.options[int(u * len(c.options))].label
            labels[response] = own
            rows.append({"prompt": prompt, "response": response, "group": f"p{p}", "labels": own})
    return rows, truth_table(labels)


def _unit(*parts: Any) -> float:
    blob = "\x1f".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "big") / 2.0 ** 64


def truth_table(labels: Mapping[str, Mapping[str, str]]) -> Truth:
    """A truth from ``{response: {criterion: label}}`` (responses not in it are unknown)."""

    def truth(criterion: str, response: str) -> str | None:
        return labels.get(response, {}).get(criterion)

    return truth


def shown_labels(body: Mapping[str, Any], criterion: str) -> list[str]:
    """The labels a rendered judge request shows for ``criterion``, in the order shown."""
    text = str(_rendered(body["messages"])[-1].get("content", ""))
    start = max(text.rfind("## Criterion\n"), text.rfind("## Criteria\n"))
    if start < 0:
        return []
    tail = text[start:]
    block = None
    for m in _HEADER.finditer(tail):
        if m.group(1).strip() == criterion:
            block = tail[m.end():]
            break
    if block is None:
        return []
    at = block.find("Verdict labels:\n")
    if at < 0:
        return []
    labels: list[str] = []
    for line in block[at + len("Verdict labels:\n"):].splitlines():
        if not line.startswith("- "):
            break
        found = re.findall(r'"([^"]*)"', line)
        labels.extend(found if line.startswith("- one of ") else found[:1])
    return labels


class PlantedJudge(ScriptedJudge):
    """A scripted judge with defects planted per criterion (see the module docstring)."""

    def __init__(self, truth: Truth, *, noisy: Mapping[str, float] | None = None,
                 position_biased: Collection[str] = (), sign_blind: Collection[str] = (),
                 persuadable: Collection[str] = (), seed: int = 0, **kwargs: Any):
        super().__init__(**kwargs)
        self.truth = truth
        self.noisy = dict(noisy or {})
        for name, rate in self.noisy.items():
            if not 0 <= rate <= 1:
                raise ValueError(f"noisy rate of {name!r} must be in [0, 1], got {rate}")
        self.position_biased = frozenset(position_biased)
        self.sign_blind = frozenset(sign_blind)
        self.persuadable = frozenset(persuadable)
        self.seed = seed

    @property
    def planted(self) -> dict[str, set[str]]:
        """The defects planted, by criterion name (the statuses a judge card should name)."""
        out: dict[str, set[str]] = {}
        for status, names in (("noisy", self.noisy), ("position_bias", self.position_biased),
                              ("sign_blind", self.sign_blind), ("persuadable", self.persuadable)):
            for name in names:
                out.setdefault(name, set()).add(status)
        return out

    def _resolve(self, name: str, response: str, body: Mapping[str, Any]) -> tuple[str, Mapping[str, float] | None]:
        shown = shown_labels(body, name)
        options = [lab for lab in shown if lab not in _ABSTAIN]
        if name in self.persuadable and (planted := _planted(response, options)) is not None:
            return planted, None
        if name in self.sign_blind and options:
            return _best(options), None
        if name in self.position_biased and options:
            return options[0], None
        label = self.truth(name, response)
        if label is None or (shown and label not in shown):
            label = "UNMET" if "UNMET" in options or not options else min(options)
        rate = self.noisy.get(name, 0.0)
        if rate and len(options) > 1:
            draw = self._draw(name, body)
            if draw < rate:
                ordered = sorted(options)
                label = ordered[int(draw / rate * len(ordered)) % len(ordered)]
        return label, None

    def _draw(self, name: str, body: Mapping[str, Any]) -> float:
        return _unit(self.seed, name, json.dumps(body, sort_keys=True, default=str))


def _best(options: Sequence[str]) -> str:
    """MET, else the option a sign-blind judge takes as "good": the last of the criterion's listed options
    (rubrics list options worst first); by name when the order is shuffled, so it is stable."""
    if "MET" in options:
        return "MET"
    return max(options)


def _planted(response: str, options: Sequence[str]) -> str | None:
    """The verdict a response plants for the grader, when it carries one."""
    from ..guards.flag import flag_response
    from .redteam_judges import copying_label, honest_label

    named = [m.group(1) for m in _PLANTED.finditer(response) if m.group(1) in options]
    if named:
        return named[-1]
    if flag_response(response) is not None or copying_label(response) != honest_label(response):
        return "MET" if "MET" in options else (max(options) if options else "MET")
    return None
