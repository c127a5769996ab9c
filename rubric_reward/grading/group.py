"""Group judging (``mode: group``): one judge call sees the task once and the distinct responses to it.

GRPO only needs scores that are right relative to the other completions of a prompt, and sends each
prompt ``num_generations`` times; a group judge sends the task once per call instead of once per
(completion, criterion). The grader gives a group judge every unscreened item of one group
(:func:`group_units`: same rubric, prompt and group label) and takes back one vote per (item,
criterion, sample, pass), which it aggregates with the other judges' votes and scores exactly as it
scores per-response votes.

For each sample (seed ``seed + sample``) the distinct responses are

* split, when there are more than ``group_size``, into near-equal calls (a seeded order decides who
  goes together);
* labelled with ids that no response can know in advance (``R`` and 8 hex digits of an HMAC-SHA256, keyed by
  a secret salt, over the call's content: rubric, prompt, group, sample, split, criteria, pass, every member's
  text in display order, and the member's position): a verdict a response plants for an id never names a
  real one, and each verdict is matched only to its id and checked only against its own response's text (no
  response's content can void a sibling's verdict). The salt is random per process
  (:func:`secrets.token_bytes`), unless the judge has a persistent reply cache that keeps one
  (:meth:`~rubric_reward.judges.cache.SQLiteCache.nonce_salt`): then a rerun draws the same ids for the same
  call, so its replies hit the cache, while an author without the cache file still cannot predict them;
* shown in an order shuffled per (seed, group, split, criteria), with ``group_passes: 2`` asking again
  with that order reversed, so the first shown comes last: a judge that favours a position favours
  different responses in the two passes, and the ensemble rules (a tie goes against the response)
  settle the disagreement, recorded as the verdict's ``agreement``.

Every (response, criterion) pair needs exactly one on-menu verdict (:func:`~rubric_reward.grading.group_prompt.
parse_group_reply`); pairs missing or malformed get one re-ask of the call, and what is still missing
is a ``parse`` failure of those verdicts only.

A call that fails as a whole for a reason one member can cause (HTTP 400/413/422: a response that
pushes the call past the judge's context, a content filter, or an answer of which no pair is usable
after the re-ask: a judge that quotes a response unescaped) is split: its members in two halves, each
its own group call with its own ids, recursively down to single members, so the siblings keep their
verdicts and only the culprit's fail. The extra calls are bounded (at most ``2 * ceil(log2 n)`` per
failed call of ``n`` members, spent level by level; a part still failing when they are spent fails
as it is). A failure no member causes (timeout, 5xx, rate limit, connection, deadline, auth) fails
every verdict the call carried, as a split would only repeat it. Each item's result carries every
call it was in (the failed one included) with ``share = 1/n`` of it and its cost.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import math
import random
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from ..items import Item, prompt_key
from ..judges.base import ChatReply, JudgeLike
from ..results import CallRecord, ErrorKind, JudgeError, Verdict
from ..rubric import Criterion, Rubric
from .calls import run_call
from .criterion_prompt import Exemplar, option_order
from .group_prompt import (
    GroupCall,
    answer_start,
    group_reask_messages,
    parse_group_reply,
    render_group_call,
)

__all__ = ["group_units", "judge_group", "layout", "member_caused", "split_budget"]

Votes = list[tuple[list[Verdict], list[CallRecord]]]  # per item: its votes and its shares of the calls


def group_units(pairs: Sequence[tuple[Rubric, Item]], keys: Sequence[tuple[str, Any]],
                indices: Sequence[int]) -> list[list[int]]:
    """``indices`` of ``pairs`` gathered into groups (same (rubric content, prompt) ``keys`` and group label),
    in the order each group is first seen; an item with neither prompt nor group label is a group of its own."""
    units: dict[tuple, list[int]] = {}
    for i in indices:
        item = pairs[i][1]
        if item.prompt is None and item.group is None:
            units[("alone", i)] = [i]
        else:
            units.setdefault((*keys[i], item.group), []).append(i)
    return list(units.values())


def _rng(*parts: Any) -> random.Random:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def layout(n: int, size: int, *, seed: int, key: str, shuffle: bool) -> list[list[int]]:
    """The calls ``n`` distinct responses are split into (at most ``size`` each, sizes within one of each
    other), as response indices; which go together is seeded by (seed, key) when ``shuffle``."""
    order = list(range(n))
    if shuffle:
        _rng(seed, key, "split").shuffle(order)
    calls = max(1, math.ceil(n / size))
    return [sorted(order[j::calls]) for j in range(calls)]


_PROCESS_SALT = secrets.token_bytes(32)  # the ids' key when no persistent cache keeps one


def nonce_salt(judge: JudgeLike) -> bytes:
    """The key of ``judge``'s response ids: its persistent reply cache's salt (reruns draw the same ids and
    hit the cache), else this process's random one."""
    return judge.nonce_salt() or _PROCESS_SALT


def _nonces(salt: bytes, content: Sequence[Any], order: Sequence[int], texts: Sequence[str]) -> dict[int, str]:
    """An unguessable id per response shown (``order``) in one call, reproducible from ``salt`` and the call's
    ``content`` (distinct within the call)."""
    base = json.dumps([*map(str, content), [texts[m] for m in order]], ensure_ascii=False).encode()
    out: dict[int, str] = {}
    for pos, m in enumerate(order):
        counter = 0
        while True:
            mac = hmac.new(salt, base + f"\x1f{pos}\x1f{counter}".encode(), hashlib.sha256).hexdigest()
            rid = "R" + mac[:8]
            if rid not in out.values():
                break
            counter += 1
        out[m] = rid
    return out


def _group_key(item: Item, texts: Sequence[str]) -> str:
    blob = "\x1e".join([str(prompt_key(item.prompt)), str(item.group), *sorted(texts)])
    return hashlib.blake2b(blob.encode(), digest_size=12).hexdigest()


async def judge_group(
    judge: JudgeLike,
    rubric: Rubric,
    items: Sequence[Item],
    *,
    seed: int,
    shuffle: bool,
    reask: bool,
    exemplars: Callable[[Sequence[Criterion], str], Mapping[str, Sequence[Exemplar]] | None],
    on_call: Callable[[CallRecord], Any] | None = None,
) -> Votes:
    """Every vote ``judge`` (a group-mode judge) casts on ``items`` (one group), per item."""
    cfg = judge.config
    judged = rubric.judged
    texts = list(dict.fromkeys(item.response for item in items))
    index = {t: i for i, t in enumerate(texts)}
    owners = [index[item.response] for item in items]
    key = _group_key(items[0], texts)
    salt, fingerprint = nonce_salt(judge), rubric.fingerprint()
    k = cfg.criteria_per_call(len(judged))
    jobs = []  # one per (sample, split, criteria, pass): the call, split where a member fails it
    for sample in range(cfg.samples):
        s = seed + sample
        for j, members in enumerate(layout(len(texts), cfg.group_size, seed=s, key=key, shuffle=shuffle)):
            for start in range(0, len(judged), k):
                chunk = judged[start:start + k]
                shown = list(members)
                if shuffle:
                    _rng(s, key, j, *(c.name for c in chunk)).shuffle(shown)
                orders = [option_order(c, seed=s, response=key, judge=judge.name, shuffle=shuffle) for c in chunk]
                for p in range(cfg.group_passes):
                    order = shown if p == 0 else shown[::-1]
                    render = partial(_render, rubric, items[0].prompt, texts, chunk, orders,
                                     exemplars(chunk, judge.name), salt, (fingerprint, key, s, j,
                                                                         *(c.name for c in chunk), p))
                    jobs.append(_run_split(judge, render, order, sample, reask, on_call))
    outcomes = await asyncio.gather(*jobs)

    votes: list[list[Verdict]] = [[] for _ in texts]
    records: list[list[CallRecord]] = [[] for _ in texts]
    for per_member, calls in outcomes:
        for m, verdicts in per_member.items():
            votes[m].extend(verdicts)
        for members, record in calls:
            share = 1.0 / sum(1 for o in owners if o in members)
            for m in members:
                records[m].append(replace(record, share=share, cost=record.cost * share))
    out: Votes = []
    seen: set[int] = set()
    for m in owners:  # an item whose text another item of the group already has carries no new share
        out.append((list(votes[m]), records[m] if m not in seen else
                    [replace(r, cost=0.0, attempts=0, cached=True) for r in records[m]]))
        seen.add(m)
    return out


def _render(rubric: Rubric, prompt: Any, texts: Sequence[str], chunk: Sequence[Criterion],
            orders: Sequence[tuple[str, ...]], exemplars: Mapping[str, Sequence[Exemplar]] | None, salt: bytes,
            content: tuple, order: Sequence[int], path: str) -> GroupCall:
    """The group call showing ``order`` (response indices) on ``chunk``; ``path`` names a split part ("" for
    the whole call, "0"/"1" for its halves, ...): each part draws its own ids."""
    label = _nonces(salt, content if not path else (*content, "split", path), order, texts)
    return render_group_call(rubric, prompt, [(label[m], texts[m]) for m in order], chunk, orders,
                             exemplars=exemplars)


_MEMBER_STATUSES = frozenset({400, 413, 422})  # bad request, too large, unprocessable: what a long text causes


def member_caused(error: JudgeError | None, verdicts: Sequence[Sequence[Verdict]]) -> bool:
    """Whether a group call's failure is of a kind one member can cause (so a split can isolate it): a 400,
    413 or 422 (context overflow, a provider's filter), a content filter, or an answer of which no pair was
    usable after the re-ask. Timeouts, 5xx, rate limits, connections, deadlines and auth are not."""
    if error is None:
        return False
    if error.kind is ErrorKind.CONTENT_FILTER:
        return True
    if error.kind is ErrorKind.CLIENT:
        return error.status in _MEMBER_STATUSES
    return error.kind is ErrorKind.PARSE and all(v.error is not None for vs in verdicts for v in vs)


def split_budget(n: int) -> int:
    """Extra calls a failed call of ``n`` members may spend on splits: ``2 * ceil(log2 n)`` (one culprit is
    isolated in exactly that many)."""
    return 2 * math.ceil(math.log2(n)) if n > 1 else 0


async def _run_split(judge: JudgeLike, render: Callable[[Sequence[int], str], GroupCall], order: Sequence[int],
                     sample: int, reask: bool, on_call: Callable[[CallRecord], Any] | None
                     ) -> tuple[dict[int, list[Verdict]], list[tuple[tuple[int, ...], CallRecord]]]:
    """One group call on ``order``, split in halves (level by level, within :func:`split_budget`) where it fails
    for a reason a member can cause: each member's verdicts, and every call made with the members it showed."""
    parts = [(tuple(order), "")]
    budget = split_budget(len(order))
    verdicts: dict[int, list[Verdict]] = {}
    calls: list[tuple[tuple[int, ...], CallRecord]] = []
    while parts:
        outs = await asyncio.gather(*(_run_group_call(judge, render(part, path), sample, reask, on_call)
                                      for part, path in parts))
        split = []
        for (part, path), (per_response, record) in zip(parts, outs, strict=True):
            calls.append((part, record))
            if len(part) > 1 and budget >= 2 and member_caused(record.error, per_response):
                budget -= 2
                half = (len(part) + 1) // 2
                split += [(part[:half], path + "0"), (part[half:], path + "1")]
            else:
                verdicts.update(zip(part, per_response, strict=True))
        parts = split
    return verdicts, calls


async def _run_group_call(judge: JudgeLike, call: GroupCall, sample: int, reask: bool,
                          on_call: Callable[[CallRecord], Any] | None) -> tuple[list[list[Verdict]], CallRecord]:
    """One group call, with one re-ask for the pairs the first answer left unusable: per response shown
    (display order), its verdicts on the call's criteria, and the call's record."""
    outcome = await run_call(judge, call, sample=sample, read=partial(parse_group_reply, call),
                             reask=partial(group_reask_messages, call) if reask else None, on_call=on_call)
    answers = outcome.readings
    error = outcome.error
    problems = answers[-1][1].left([a for _, a in answers[:-1]]) if answers else {}
    after = " (after one re-ask)" if len(answers) > 1 else ""
    out = []
    for rid in call.ids:
        verdicts = []
        for c in call.criteria:
            pair = (rid, c.name)
            taken = next(((r, a.verdicts[pair]) for r, a in answers if pair in a.verdicts), None)
            if taken is None:
                why = problems.get(pair)
                err = error if why is None or error is None or error.kind is not ErrorKind.PARSE else \
                    JudgeError(ErrorKind.PARSE, f"group call, response {rid}: {why}{after}")
                verdicts.append(Verdict(c.name, None, None, error=err, judge=judge.name))
                continue
            r, p = taken
            v = Verdict(p.criterion, p.label, p.value, reason=p.reason, abstained=p.abstained, judge=judge.name)
            verdicts.append(_with_probabilities(v, c, call, r, rid))
        out.append(verdicts)
    return out, outcome.record


_SITE = re.compile(r'"(R[0-9a-f]+|C\d+)"\s*:\s*\{|"verdict"\s*:\s*"')


def _with_probabilities(v: Verdict, c: Criterion, call: GroupCall, reply: ChatReply, rid: str) -> Verdict:
    """``v`` with label probabilities read from the reply's token logprobs, where they show its label."""
    if not reply.logprobs or v.label is None:
        return v
    from .logprobs import expected_value, label_probabilities, token_offsets

    starts, text = token_offsets(reply.logprobs)
    site = _sites(call, text).get((rid, c.name))
    if site is None or not text.startswith(v.label + '"', site):
        return v
    probs = label_probabilities(reply.logprobs, starts, site, c.labels)
    return v if probs is None else replace(v, probabilities=probs, expected_value=expected_value(c, probs))


def _sites(call: GroupCall, text: str) -> dict[tuple[str, str], int]:
    """Where each (response id, criterion) verdict label starts, inside the answer object only."""
    start = answer_start(call, text)
    if start < 0:
        return {}
    names = dict(zip(call.keys or (), (c.name for c in call.criteria), strict=False))
    only = call.criteria[0].name if call.keys is None else None
    rid = crit = None
    sites: dict[tuple[str, str], int] = {}
    for m in _SITE.finditer(text, start):
        if m.group(1) is None:
            name = only or names.get(crit or "")
            if rid is not None and name is not None:
                sites.setdefault((rid, name), m.end())
        elif m.group(1).startswith("R"):
            rid, crit = m.group(1), None
        else:
            crit = m.group(1)
    return sites
