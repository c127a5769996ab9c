"""Reading a generator's answer: a validated :class:`~rubric_reward.rubric.Rubric` from JSON or a
numbered list, after trivial repairs that are recorded; and the canonical answer text of a rubric.

Programmatic checks are criteria too. In the list format a check is a line
``N. [check] <check> [key=value ...] [weight]``, e.g. ``3. [check] ifeval:punctuation:no_comma [4]``
or ``[check] ifeval:startend:end_checker end_phrase="See you soon" [3]``; in JSON a criterion's
``check`` holds the same text (or the check id with a ``kwargs`` object). Values are JSON (numbers,
``"strings"``, ``["lists"]``) or bare words. A check is validated like any rubric check (the id
must exist, its kwargs must fit): a bad one makes the answer unusable, with the reason sent back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..rubric import Rubric, RubricError
from ..util.think import strip_think
from .answers import json_values
from .config import GenerationConfig
from .grounding import ground_check

__all__ = ["CUT_OFF", "CUT_OFF_KEPT", "check_spec_text", "complete_lines", "parse_check_spec", "parse_rubric",
           "rubric_text", "slug"]

_DECODER = json.JSONDecoder()
_CHECK_ITEM = re.compile(r"\[check\]\s*", re.I)
_CHECK_ID = re.compile(r"\S+")
_SETTING = re.compile(r"\s+([A-Za-z_]\w*)\s*=\s*")


def parse_check_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"<family:name> key=value ..."`` -> ``(check, kwargs)``; raises RubricError naming what it cannot read."""
    spec = spec.strip()
    m = _CHECK_ID.match(spec)
    if m is None:
        raise RubricError("a [check] line names no check (write e.g. [check] ifeval:punctuation:no_comma)")
    check, pos, kwargs = m.group(0), m.end(), {}
    if ":" not in check:
        raise RubricError(f"a [check] line must name a check such as ifeval:punctuation:no_comma, got {spec!r}")
    while pos < len(spec):
        setting = _SETTING.match(spec, pos)
        if setting is None:
            raise RubricError(f"check {check}: cannot read the settings {spec[pos:].strip()!r} (write key=value)")
        key, pos = setting.group(1), setting.end()
        try:
            value, pos = _DECODER.raw_decode(spec, pos)
        except json.JSONDecodeError:
            bare = _CHECK_ID.match(spec, pos)
            if bare is None:
                raise RubricError(f"check {check}: setting {key!r} has no value") from None
            value, pos = bare.group(0), bare.end()
        kwargs[key] = value
    return check, kwargs


def check_spec_text(check: str, kwargs: Mapping[str, Any] | None = None) -> str:
    """The check-line text of a check (the inverse of :func:`parse_check_spec`)."""
    return check + "".join(f" {k}={json.dumps(v, ensure_ascii=False)}" for k, v in (kwargs or {}).items())


def rubric_text(rubric: Rubric, format: str = "json") -> str:
    """A rubric as the canonical answer a generator should give in ``format`` (used for DPO targets)."""
    if format == "list":
        return "\n".join(f"{i}. {_list_line(c)} [{c.weight:g}]" for i, c in enumerate(rubric.criteria, 1))
    return json.dumps(rubric.to_dict(), ensure_ascii=False)


def _list_line(c: Any) -> str:
    if c.check:
        return f"[check] {check_spec_text(c.check, c.kwargs)}"
    return c.requirement or c.name


_RENAMED = {"criterion": "requirement", "text": "requirement", "statement": "requirement",
            "points": "weight", "score": "weight", "title": "name", "id": "name"}
_CRITERION_KEEP = {"name", "requirement", "weight", "kind", "options", "allow_abstain", "description", "question",
                   "check", "kwargs"}


def _extract_json(text: str) -> Any:
    """The first JSON object or list in ``text`` (code fences and chatter around it are ignored)."""
    for obj in json_values(text):
        if isinstance(obj, dict | list) and obj:
            return obj
    raise RubricError("the answer holds no JSON object")


_LIST_ITEM = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*\u2022])\s+(.+?)\s*$")


_MAX_ITEM_WEIGHT = 20
_ITEM_WEIGHT = re.compile(r"\s*[\[(](?:weight:?\s*)?([+-]?\d+(?:\.\d+)?)[\])]\.?$", re.I)


def _extract_list(text: str) -> list[dict[str, Any]]:
    """The items of the numbered or bulleted list in ``text`` (markdown emphasis removed) as criteria,
    with the weight a line ends with (``[3]``, ``(-2)``, ``(weight 2)``), else 1. An item that starts
    with ``[check]`` is a programmatic check in the check-line syntax (:func:`parse_check_spec`)."""
    items = []
    for line in strip_think(text).splitlines():
        m = _LIST_ITEM.match(line)
        if not m:
            continue
        item = m.group(1).strip()
        check = _CHECK_ITEM.match(item)
        if check is None:
            item = re.sub(r"[*_`]{1,3}", "", item).strip()
        w = _ITEM_WEIGHT.search(item)
        if w is not None and abs(float(w.group(1))) > _MAX_ITEM_WEIGHT:  # "(2019)" is a year, not a weight
            w = None
        weight = float(w.group(1)) if w else 1.0
        item = item[:w.start()].strip() if w else item
        if check is not None:
            name, kwargs = parse_check_spec(item[check.end():])
            items.append({"check": name, **({"kwargs": kwargs} if kwargs else {}), "weight": weight})
        elif len(item) > 3 and weight != 0:
            items.append({"requirement": item, "weight": weight})
    return items


CUT_OFF = "cut off at max_tokens"  # the words every cut-off message and repair holds (counted by held-out reports)
CUT_OFF_KEPT = f"kept the complete lines of an answer {CUT_OFF}"  # the repair's words


def complete_lines(text: str | None) -> str:
    """``text`` without what follows its last line break: the unfinished line of an answer cut off
    at max_tokens (an answer that ends with a line break loses nothing)."""
    text = text or ""
    return text[:text.rfind("\n") + 1]


def slug(text: str, fallback: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())[:5]
    return "_".join(words) or fallback


def parse_rubric(text: str | None, *, config: GenerationConfig | None = None,
                 name: str = "rubric", task: str | None = None) -> tuple[Rubric, list[str]]:
    """Parse a generator's answer into a validated Rubric; returns it with the list of repairs made.
    With ``config.ground_checks`` and the ``task`` text, checks are grounded in the task (:func:`ground_check`).

    Raises :class:`RubricError` (a message fit to send back to the generator) when the answer is not
    usable even after trivial repairs.
    """
    config = config or GenerationConfig()
    if not text or not text.strip():
        raise RubricError("the answer is empty")
    repairs: list[str] = []
    obj = _rubric_object(_answer_object(text, config, repairs), name, repairs)
    items = obj["criteria"]
    fixed, seen, identities = [], set(), set()
    for i, c in enumerate(items):
        c = _repaired_criterion(i, c, config, task, repairs)
        if c is None:
            continue
        identity = _identity(c)
        if identity:
            if identity in identities:
                repairs.append(f"criteria[{i}]: dropped an exact repeat of an earlier criterion")
                continue
            identities.add(identity)
        _name_criterion(i, c, seen, repairs)
        fixed.append(c)
    if not config.min_criteria <= len(fixed) <= config.max_criteria:
        repeats = " distinct" if len(fixed) < len(items) else ""
        raise RubricError(f"the rubric has {len(fixed)}{repeats} criteria; write between {config.min_criteria} "
                          f"and {config.max_criteria}")
    obj["criteria"] = fixed
    rubric = Rubric.from_obj(obj, source="generated rubric")
    return rubric, repairs


def _answer_object(text: str, config: GenerationConfig, repairs: list[str]) -> Any:
    """The answer's JSON value, or its numbered list of criteria (asked for, or accepted instead of JSON)."""
    if config.format == "list" and (listed := _extract_list(text)):
        return {"criteria": listed}  # asked for a list: "[5]" is a weight, not a JSON array
    try:
        return _extract_json(text)
    except RubricError:
        if config.format == "list":
            raise RubricError("the answer holds no numbered list of criteria") from None
        listed = _extract_list(text) if config.accept_lists else []
        if len(listed) < config.min_criteria:
            raise
        repairs.append(f"read a list of {len(listed)} criteria instead of JSON")
        return {"criteria": listed}


def _rubric_object(obj: Any, name: str, repairs: list[str]) -> dict[str, Any]:
    """``obj`` as a rubric mapping: unwrapped, with only the rubric's fields, named, holding a criteria list."""
    if isinstance(obj, dict) and "criteria" not in obj and isinstance(obj.get("rubric"), dict | list):
        obj = obj["rubric"]
        repairs.append("unwrapped 'rubric'")
    if isinstance(obj, list):
        obj = {"criteria": obj}
        repairs.append("wrapped a bare list of criteria")
    if "criteria" not in obj:
        raise RubricError("the JSON object has no 'criteria' list")
    extra = set(obj) - {"name", "criteria", "guidelines"}
    if extra:
        obj = {k: v for k, v in obj.items() if k not in extra}
        repairs.append(f"dropped field(s) {sorted(extra)}")
    if not isinstance(obj.get("name"), str) or not obj["name"].strip():
        obj["name"] = name
        repairs.append("named the rubric")
    if not isinstance(obj["criteria"], list):
        raise RubricError(f"'criteria' must be a list, got {type(obj['criteria']).__name__}")
    return obj


def _repaired_criterion(i: int, c: Any, config: GenerationConfig, task: str | None,
                        repairs: list[str]) -> dict[str, Any] | None:
    """Criterion ``i`` with trivial repairs (a bare string, renamed or unknown fields, a weight as text, a
    check spec with arguments, a check grounded in the task); None when grounding drops its check."""
    if isinstance(c, str):
        c = {"requirement": c}
        repairs.append(f"criteria[{i}]: a bare string became the requirement")
    if not isinstance(c, dict):
        raise RubricError(f"criteria[{i}] must be an object with name, requirement and weight")
    c = dict(c)
    for old, new in _RENAMED.items():
        if old in c and new not in c:
            c[new] = c.pop(old)
            repairs.append(f"criteria[{i}]: renamed {old!r} to {new!r}")
    unknown = set(c) - _CRITERION_KEEP
    if unknown:
        for k in unknown:
            c.pop(k)
        repairs.append(f"criteria[{i}]: dropped field(s) {sorted(unknown)}")
    w = c.get("weight")
    if isinstance(w, str):
        try:
            c["weight"] = float(w.strip())
            repairs.append(f"criteria[{i}]: weight {w!r} read as a number")
        except ValueError:
            raise RubricError(f"criteria[{i}]: weight {w!r} is not a number") from None
    if "check" in c and c["check"] is None:
        c.pop("check")  # the schema's null: a judged criterion
    elif isinstance(c.get("check"), str) and " " in c["check"].strip():
        name, kwargs = parse_check_spec(c["check"])
        if not isinstance(c.get("kwargs", {}), Mapping):
            raise RubricError(f"criteria[{i}]: 'kwargs' must be an object")
        c["check"], c["kwargs"] = name, {**(c.get("kwargs") or {}), **kwargs}
    if config.ground_checks and task is not None and c.get("check"):
        grounded, why = ground_check(str(c["check"]), c.get("kwargs") or {}, task)
        if grounded is None:
            repairs.append(f"criteria[{i}]: dropped check {c['check']}: {why[0]}")
            return None
        if why:
            c["kwargs"] = grounded
            repairs.append(f"criteria[{i}]: grounded in the task: {'; '.join(why)}")
    return c


def _requirement(c: Mapping[str, Any]) -> Any:
    return c.get("requirement") or c.get("question") or c.get("description") or ""


def _identity(c: Mapping[str, Any]) -> str:
    """What makes two criteria exact repeats: the check and its arguments, or the requirement's words."""
    if "check" in c:
        return json.dumps([c["check"], c.get("kwargs") or {}], sort_keys=True, default=str)
    requirement = _requirement(c)
    return " ".join(str(requirement).lower().split()) if isinstance(requirement, str) else ""


def _name_criterion(i: int, c: dict[str, Any], seen: set[str], repairs: list[str]) -> None:
    """Give criterion ``i`` a name when it has none, and a distinct one when an earlier criterion has it."""
    cname = c.get("name")
    if not isinstance(cname, str) or not cname.strip():
        label = str(c["check"]).rsplit(":", 1)[-1] if "check" in c else str(_requirement(c))
        c["name"] = slug(label, f"c{i + 1}")
        repairs.append(f"criteria[{i}]: named it {c['name']!r}")
    if c["name"] in seen:
        base, n = c["name"], 2
        while f"{base}_{n}" in seen:
            n += 1
        c["name"] = f"{base}_{n}"
        repairs.append(f"criteria[{i}]: renamed a duplicate name to {c['name']!r}")
    seen.add(c["name"])


