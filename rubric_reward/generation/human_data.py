"""Human-labelled data for evaluating rubric generators, and the explicit train/test split of prompts.

* **MT-Bench human judgments** (``lmsys/mt_bench_human_judgments``, CC-BY-4.0, split ``human``): rows
  ``question_id, model_a, model_b, winner, judge, conversation_a, conversation_b, turn``; ``winner`` is
  ``model_a``, ``model_b`` or a tie (``tie``, ``tie (bothbad)``). Conversations hold both turns; the row judges
  turn ``turn``. :func:`load_mt_bench` gives one :class:`PairwiseRow` per (question, turn, model pair):
  the human majority by default (``aggregate="majority"``, a tied vote is dropped) or every vote
  (``"votes"``); ties are dropped either way and counted.
* **HelpSteer2** (``nvidia/HelpSteer2``, CC-BY-4.0, splits ``train`` and ``validation``): rows ``prompt,
  response, helpfulness, correctness, coherence, complexity, verbosity`` (integers 0-4). About 29% of the
  prompts are multi-turn: ``prompt`` then holds every user turn and every assistant turn but the last,
  separated by ``<extra_id_1>Assistant`` / ``<extra_id_1>User`` lines, and ``response`` is the last
  assistant turn (the one rated). :func:`load_helpsteer2` gives one :class:`PointwiseRow` per response,
  with the turns as chat messages and ``human`` = the mean of helpfulness, correctness and coherence (the
  paper's target); responses to one prompt share its ``prompt_id``.

Sources: ``"hub"`` (downloads with ``datasets.load_dataset``), a JSONL/JSON file, or a
``save_to_disk`` folder. Every row is validated; errors name the source, the row and the field.

The split (:func:`split_ids`) is by prompt, seeded and explicit: every response and vote of one prompt
falls on the same side, and a generator is evaluated only on prompts of the test side.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "HELPSTEER2_HUB", "MT_BENCH_HUB", "PairwiseRow", "PointwiseRow", "load_helpsteer2", "load_mt_bench",
    "split_ids",
]

MT_BENCH_HUB = "lmsys/mt_bench_human_judgments"
HELPSTEER2_HUB = "nvidia/HelpSteer2"
_TIES = ("tie", "tie (bothbad)", "tie(bothbad)")
_HS2_TARGET = ("helpfulness", "correctness", "coherence")

Messages = tuple[Mapping[str, str], ...]


@dataclass(frozen=True)
class PairwiseRow:
    """Two responses to one task and the human preference between them.

    ``task`` is what a rubric is written for (the user turns up to the judged one); ``conversation_a`` /
    ``conversation_b`` run up to and including the judged assistant turn; ``winner`` is ``"a"`` or ``"b"``;
    ``votes`` counts the human votes behind it (majority aggregation).
    """

    id: str
    prompt_id: str
    task: str
    conversation_a: Messages
    conversation_b: Messages
    winner: str
    votes: Mapping[str, int]


@dataclass(frozen=True)
class PointwiseRow:
    """One response to one prompt with a human score (HelpSteer2: the mean of three attributes, 0-4).

    ``turns`` is the conversation before the response as chat messages (one user message for a
    single-turn prompt); ``prompt`` is the same as text, what a rubric is written for."""

    id: str
    prompt_id: str
    prompt: str
    response: str
    human: float
    attributes: Mapping[str, float]
    turns: Messages = ()


def split_ids(ids: Iterable[str], *, test_fraction: float = 0.5, seed: int = 0) -> tuple[list[str], list[str]]:
    """``(train, test)``: the distinct ``ids`` sorted, shuffled with ``seed``, the first
    ``round(test_fraction * n)`` (at least 1 when ``0 < test_fraction``) on the test side. Deterministic."""
    if not 0.0 <= test_fraction <= 1.0:
        raise ValueError(f"split: test_fraction must be in [0, 1], got {test_fraction}")
    unique = sorted(set(ids))
    random.Random(seed).shuffle(unique)
    n_test = round(test_fraction * len(unique))
    if test_fraction > 0 and unique:
        n_test = max(n_test, 1)
    return sorted(unique[n_test:]), sorted(unique[:n_test])


# ------------------------------------------------------------------------------------------ reading


def _rows(source: Any, hub: str, split: str, where: str) -> tuple[str, list[tuple[str, Mapping[str, Any]]]]:
    """(description, [(location, row), ...]) from ``"hub"``, a JSONL/JSON file, a save_to_disk folder, or a
    list of mappings; the location is ``"line N"`` in a JSONL file, ``"row N"`` (from 0) elsewhere."""
    if isinstance(source, list | tuple):
        return where, _indexed(source)
    if source == "hub":
        from datasets import load_dataset

        return f"{hub} ({split})", _indexed(load_dataset(hub, split=split))
    path = Path(str(source))
    if path.is_dir():
        from datasets import DatasetDict, load_from_disk

        data = load_from_disk(str(path))
        if isinstance(data, DatasetDict):
            if split not in data:
                raise ValueError(f"{path}: no split {split!r} (splits: {sorted(data)})")
            data = data[split]
        return str(path), _indexed(data)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file or folder (expected JSONL, JSON or a save_to_disk folder)")
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{path}: a JSON file must hold a list of rows")
        return str(path), _indexed(data)
    from ..io.rows import DataError, numbered_jsonl_rows

    try:
        return str(path), [(f"line {n}", dict(r)) for n, r in numbered_jsonl_rows(path)]
    except DataError as exc:
        raise ValueError(str(exc)) from None


def _indexed(rows: Any) -> list[tuple[str, Mapping[str, Any]]]:
    return [(f"row {n}", row) for n, row in enumerate(rows)]


def _messages(value: Any, where: str) -> list[dict[str, str]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"{where}: expected a list of {{role, content}} messages (or its JSON)") from None
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: expected a non-empty list of {{role, content}} messages")
    out = []
    for n, m in enumerate(value):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise ValueError(f"{where}[{n}]: a message needs 'role' and 'content'")
        out.append({"role": str(m["role"]), "content": str(m["content"] or "")})
    return out


def _upto_turn(conv: list[dict[str, str]], turn: int, where: str) -> list[dict[str, str]]:
    """The conversation up to and including the ``turn``-th assistant message."""
    seen = 0
    for n, m in enumerate(conv):
        if m["role"] == "assistant":
            seen += 1
            if seen == turn:
                return conv[: n + 1]
    raise ValueError(f"{where}: turn {turn} has no assistant answer ({seen} in the conversation)")


def _task(conv: list[dict[str, str]]) -> str:
    users = [m["content"] for m in conv if m["role"] == "user"]
    if len(users) == 1:
        return users[0]
    return "\n\n".join(f"[Turn {n}] {u}" for n, u in enumerate(users, 1))


def load_mt_bench(source: Any = "hub", *, split: str = "human", turns: Sequence[int] = (1, 2),
                  aggregate: str = "majority") -> tuple[list[PairwiseRow], dict[str, int]]:
    """MT-Bench human pairwise judgments as :class:`PairwiseRow` s, plus counts of what was dropped.

    ``prompt_id`` is ``"<question_id>"`` (both turns of a question share it, so they split together);
    the row ``id`` is ``"<question_id>:t<turn>:<model_a>:<model_b>"`` (``:<judge>`` with ``votes``).
    """
    if aggregate not in ("majority", "votes"):
        raise ValueError(f"mt_bench: aggregate must be 'majority' or 'votes', got {aggregate!r}")
    where, rows = _rows(source, MT_BENCH_HUB, split, "mt_bench rows")
    if not rows:
        raise ValueError(f"{where}: no rows")
    groups: dict[tuple, list[tuple[str, str]]] = defaultdict(list)
    convs: dict[tuple, tuple[list, list]] = {}
    dropped: Counter[str] = Counter()
    for n, (loc, row) in enumerate(rows):
        at = f"{where}: {loc}"
        for f in ("question_id", "model_a", "model_b", "winner", "conversation_a", "conversation_b"):
            if row.get(f) in (None, ""):
                raise ValueError(f"{at}: missing field {f!r}")
        turn = int(row.get("turn", 1))
        if turn not in turns:
            dropped["other turn"] += 1
            continue
        winner = str(row["winner"]).strip().lower()
        if winner in _TIES:
            dropped["human tie"] += 1
            continue
        if winner not in ("model_a", "model_b"):
            raise ValueError(f"{at}: field 'winner' must be model_a, model_b or tie, got {row['winner']!r}")
        conv_a = _upto_turn(_messages(row["conversation_a"], f"{at}: conversation_a"), turn, f"{at}: conversation_a")
        conv_b = _upto_turn(_messages(row["conversation_b"], f"{at}: conversation_b"), turn, f"{at}: conversation_b")
        a, b = str(row["model_a"]), str(row["model_b"])
        pick = a if winner == "model_a" else b
        if a > b:  # one orientation per model pair, so votes on (a, b) and (b, a) meet
            a, b, conv_a, conv_b = b, a, conv_b, conv_a
        key = (str(row["question_id"]), turn, a, b)
        if aggregate == "votes":
            key = (*key, str(row.get("judge", n)), n)
        groups[key].append(("a" if pick == a else "b", str(row.get("judge", ""))))
        convs.setdefault(key, (conv_a, conv_b))
    out = []
    for key, votes in groups.items():
        count = Counter(v for v, _ in votes)
        if count["a"] == count["b"]:
            dropped["tied vote"] += 1
            continue
        conv_a, conv_b = convs[key]
        out.append(PairwiseRow(
            id=":".join([key[0], f"t{key[1]}", *key[2:4], *([key[4]] if aggregate == "votes" else [])]),
            prompt_id=key[0], task=_task(conv_a[:-1]), conversation_a=tuple(conv_a), conversation_b=tuple(conv_b),
            winner="a" if count["a"] > count["b"] else "b", votes=dict(count)))
    if not out:
        raise ValueError(f"{where}: no usable pairwise rows (dropped: {dict(dropped)})")
    return out, dict(dropped)


_HS2_TURN = re.compile(r"\n?<extra_id_1>(User|Assistant)\n")


def _hs2_turns(prompt: str, where: str) -> list[dict[str, str]]:
    """HelpSteer2's prompt text as messages: the first user turn, then each ``<extra_id_1>Role`` turn."""
    parts = _HS2_TURN.split(prompt)
    turns = [{"role": "user", "content": parts[0].strip()}]
    turns += [{"role": role.lower(), "content": text.strip()} for role, text in zip(parts[1::2], parts[2::2],
                                                                                      strict=True)]
    if turns[-1]["role"] != "user" or any(a["role"] == b["role"] for a, b in zip(turns, turns[1:], strict=False)):
        raise ValueError(f"{where}: field 'prompt' must alternate user and assistant turns and end on a user turn")
    return turns


def _prompt_id(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:12]


def load_helpsteer2(source: Any = "hub", *, split: str = "validation") -> list[PointwiseRow]:
    """HelpSteer2 rows as :class:`PointwiseRow` s (``human`` = mean of helpfulness, correctness, coherence).

    ``prompt_id`` is a hash of the prompt text (the responses to one prompt split together).
    """
    where, rows = _rows(source, HELPSTEER2_HUB, split, "helpsteer2 rows")
    if not rows:
        raise ValueError(f"{where}: no rows")
    out = []
    for n, (loc, row) in enumerate(rows):
        at = f"{where}: {loc}"
        prompt, response = row.get("prompt"), row.get("response")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"{at}: missing field 'prompt'")
        if not isinstance(response, str):
            raise ValueError(f"{at}: missing field 'response'")
        attrs = {}
        for f in (*_HS2_TARGET, "complexity", "verbosity"):
            v = row.get(f)
            if v is None and f not in _HS2_TARGET:
                continue
            try:
                attrs[f] = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"{at}: field {f!r} must be a number (0-4), got {v!r}") from None
        pid = _prompt_id(prompt)
        turns = _hs2_turns(prompt, at)
        text = turns[0]["content"] if len(turns) == 1 else "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in turns)
        out.append(PointwiseRow(id=f"{pid}:{n}", prompt_id=pid, prompt=text, response=response,
                                human=sum(attrs[f] for f in _HS2_TARGET) / len(_HS2_TARGET), attributes=attrs,
                                turns=tuple(turns)))
    return out
