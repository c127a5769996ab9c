"""Where the outcome meta-judge's signal is: measure the judge's spread first, then score only what separates.

The outcome meta-judge ranks a candidate rubric by how often a fixed judge, scoring both responses of a labelled
pair with that rubric, prefers the better one. A rubric's programmatic checks (``[check]`` criteria) are decided by
the program; its judged criteria by the judge. A judge that answers MET to nearly everything (the bundled 135M in
logprob mode: 91 of the base's 105 held-out outcomes were ties) scores both responses of a pair alike on every
judged criterion, so those verdicts cost calls and add nothing but noise.

:func:`probe_spread` measures that before the first preferences stage: on the first ``probe_pairs`` labelled
pairs of the training prompts (round-robin over prompts) the judge scores both responses with a probe rubric of
judged criteria only (:data:`PROBE_CRITERIA`: follows every instruction, answers the task, keeps every stated
constraint). A pair *ties* when both responses get the same score. With ``loop.outcome_criteria: auto`` (the
default) a tie share of ``probe_max_ties`` or more means "no spread": outcome scoring then uses only the check
criteria of each candidate (:class:`ChecksOnlyMetaJudge`; a candidate without a check expresses no preference, a
tie on every pair, and costs no call). ``all`` always scores every criterion, ``checks`` always only the checks.
The decision is written to ``out_dir/spread.json`` once (the judge is fixed for the whole loop), printed, and shown
in the loop summary. It concerns the preferences stage only: the held-out evaluation keeps scoring every
criterion, so its numbers stay comparable between runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...generation.metajudge import MetaJudge, MetaJudgeConfig, PointJudgement
from ...rubric import Rubric

__all__ = ["OUTCOME_CRITERIA", "PROBE_CRITERIA", "ChecksOnlyMetaJudge", "checks_only", "decide_outcome_criteria",
           "probe_spread", "spread_line"]

log = logging.getLogger(__name__)

OUTCOME_CRITERIA = ("auto", "all", "checks")
SPREAD_VERSION = "1"

#: The probe rubric's judged criteria: a judge with any spread tells a response that follows the prompt's
#: instructions from one that does not on at least one of them.
PROBE_CRITERIA = (
    ("follows_instructions", "The response follows every instruction given in the task."),
    ("answers_task", "The response answers the task that was asked, on its topic."),
    ("keeps_constraints", "The response respects every stated constraint on length, wording and format."),
)


def probe_rubric() -> Rubric:
    return Rubric.from_obj({"name": "spread_probe", "criteria": [
        {"name": n, "requirement": text, "weight": 1} for n, text in PROBE_CRITERIA]})


def checks_only(rubric: Rubric) -> Rubric | None:
    """``rubric`` with its check criteria only (None when it has none, or none that make a rubric)."""
    kept = [c for c in rubric.to_dict()["criteria"] if c.get("check")]
    if not kept:
        return None
    try:
        return Rubric.from_obj({"name": rubric.name, "criteria": kept})
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ChecksOnlyConfig(MetaJudgeConfig):
    """MetaJudgeConfig plus ``criteria: checks``, so the preference journals key their judgements on it."""

    criteria: str = field(default="checks", metadata={
        "help": "outcome mode: score responses with the rubric's check criteria only", "choices": ("checks",)})


class ChecksOnlyMetaJudge(MetaJudge):
    """The outcome meta-judge scoring each candidate with its check criteria only (see the module docstring)."""

    def __init__(self, judge: Any, *, config: MetaJudgeConfig, **kwargs: Any):
        from dataclasses import asdict

        if config.mode != "outcome":
            raise ValueError(f"checks-only scoring is for the outcome meta-judge, not mode {config.mode!r}")
        super().__init__(judge, config=ChecksOnlyConfig(**asdict(config)), **kwargs)

    async def _score(self, prompt: Any, rubric: Rubric, labels: Sequence[Mapping[str, Any]] | None) -> PointJudgement:
        checks = checks_only(rubric)
        n_judged = sum(1 for c in rubric.criteria if not c.check)
        if checks is None:
            if not labels:
                return PointJudgement("outcome", None, "outcome mode needs human-labelled response pairs for this prompt")
            # no check: the rubric expresses no preference on any pair (no call is made)
            return PointJudgement("outcome", 0.5, None, 0.0, {"criteria": "checks", "n_checks": 0,
                                                                "n_judged_dropped": n_judged,
                                                                "note": "no check criterion: every pair a tie"})
        out = await MetaJudge._score(self, prompt, checks, labels)
        details = {**out.details, "criteria": "checks", "n_checks": len(checks.criteria), "n_judged_dropped": n_judged}
        return PointJudgement(out.mode, out.score, out.error, out.cost, details)


# ------------------------------------------------------------------------------------------ the probe


def probe_pairs(rows: Sequence[Any], n: int) -> list[tuple[Any, Mapping[str, Any]]]:
    """The first ``n`` labelled pairs (human ties left out), round-robin over the prompts."""
    queues = [[p for p in r.labels if str(p.get("winner", "")).strip().upper() in ("A", "B")] for r in rows]
    out: list[tuple[Any, Mapping[str, Any]]] = []
    depth = 0
    while len(out) < n and any(len(q) > depth for q in queues):
        for row, q in zip(rows, queues, strict=True):
            if len(q) > depth and len(out) < n:
                out.append((row, q[depth]))
        depth += 1
    return out


async def _probe(rows: Sequence[Any], n: int, judge_spec: Any, cache_path: str | None, seed: int) -> dict[str, Any]:
    from ...generation.generator import one_judge
    from ...judges.cache import SQLiteCache
    from ...scorer import Scorer

    pairs = probe_pairs(rows, n)
    rubric = probe_rubric()
    cache = SQLiteCache(cache_path) if cache_path else None
    scorer = Scorer(None, one_judge(judge_spec, base_url=None, cache=cache, temperature=None, generate=False),
                    grading={"seed": seed})
    try:
        items = [{"prompt": row.prompt, "response": p[k], "rubric": rubric}
                 for row, p in pairs for k in ("response_a", "response_b")]
        results = await scorer.ascore_batch(items) if items else []
    finally:
        await scorer.aclose()
        if cache is not None:
            cache.close()
    ties = decided = right = failed = 0
    verdicts = met = 0
    for k, (_, p) in enumerate(pairs):
        ra, rb = results[2 * k], results[2 * k + 1]
        for r in (ra, rb):
            for v in getattr(r, "verdicts", ()) or ():
                if v.label:
                    verdicts += 1
                    met += str(v.label).upper() == "MET"
        if ra.score is None or rb.score is None:
            failed += 1
        elif ra.score == rb.score:
            ties += 1
        else:
            decided += 1
            right += ("A" if ra.score > rb.score else "B") == str(p["winner"]).strip().upper()
    scored = ties + decided
    return {"pairs": len(pairs), "scored": scored, "failed": failed, "ties": ties, "decided": decided,
            "tie_share": ties / scored if scored else None,
            "agreement_decided": right / decided if decided else None,
            "met_share": met / verdicts if verdicts else None}


def probe_spread(rows: Sequence[Any], n: int, judge_spec: Any, *, cache: str | None = None,
                 seed: int = 0) -> dict[str, Any]:
    """The judge's spread on the first ``n`` labelled pairs of ``rows``: pairs, scored, failed, ties, decided,
    tie_share, agreement on the decided pairs, and the share of MET verdicts."""
    return asyncio.run(_probe(rows, n, judge_spec, cache, seed))


def decide_outcome_criteria(config: Any, out: Path, rows: Sequence[Any], cache: str | None) -> dict[str, Any]:
    """The loop's decision (``all`` or ``checks``) with the probe behind it; read from ``out/spread.json`` when
    it was made before with the same judge and settings, else measured and written there."""
    from ...io.journal import write_atomic

    setting = config.outcome_criteria
    key = json.dumps([SPREAD_VERSION, setting, config.probe_pairs, config.probe_max_ties,
                      str(config.meta_judge), [r.id for r in rows]], sort_keys=True, default=str)
    path = out / "spread.json"
    if path.is_file():
        known = json.loads(path.read_text())
        if known.get("key") == key:
            return known
    mode = config.meta.mode
    result: dict[str, Any] = {"key": key, "setting": setting, "mode": mode, "probe": None}
    if mode != "outcome":
        result.update(criteria="all", reason=f"the {mode} meta-judge scores no responses: nothing to restrict")
    elif setting in ("all", "checks"):
        result.update(criteria=setting, reason=f"loop.outcome_criteria is {setting!r}")
    else:
        probe = probe_spread(rows, config.probe_pairs, config.meta_judge, cache=cache, seed=config.meta.seed)
        result["probe"] = probe
        share = probe["tie_share"]
        said = (f"the meta-judge tied {probe['ties']} of {probe['scored']} probe pairs with a judged-only rubric "
                f"({'n/a' if share is None else f'{100 * share:.0f}%'}; {probe['failed']} failed"
                + ("" if probe["met_share"] is None else f"; {100 * probe['met_share']:.0f}% of its verdicts MET")
                + ")")
        if share is None:
            result.update(criteria="all", reason=f"{said}: no probe pair could be scored, so every criterion is kept")
        elif share >= config.probe_max_ties:
            result.update(criteria="checks", reason=f"{said} >= {100 * config.probe_max_ties:.0f}%: no spread, so "
                                                    "outcome scoring uses the check criteria only")
        else:
            result.update(criteria="all", reason=f"{said} < {100 * config.probe_max_ties:.0f}%: the judge separates "
                                                 "responses, so outcome scoring uses every criterion")
    write_atomic(path, json.dumps(result, indent=2, default=str) + "\n")
    return result


def spread_line(decision: Mapping[str, Any]) -> str:
    """One line for the console and the loop summary."""
    which = "check criteria only" if decision["criteria"] == "checks" else "every criterion"
    return f"outcome criteria: {which} ({decision['setting']}): {decision['reason']}"
