"""Rubrics: typed, immutable, validated once where they are loaded.

A rubric is a list of criteria. Each criterion is judged on its own and yields a value in [0, 1]
that is multiplied by its weight; negative weights are penalties (for them MET means "the flaw is
present"). A criterion with ``monitor: true`` (or weight 0) is a *monitor*: judged and logged like any other,
it adds nothing to the score. Three judged kinds exist, plus programmatic checks:

* ``binary``  -- MET (1.0) / UNMET (0.0), with CANNOT_ASSESS as the abstention.
* ``ordinal`` -- ordered options, each with an explicit value in [0, 1] and a behavioural anchor.
* ``nominal`` -- unordered options, each with an explicit value in [0, 1].
* ``check``   -- a local programmatic check (e.g. ``ifeval:punctuation:no_comma``); no judge call.

Files may be YAML or JSON: a mapping with ``criteria`` (and optional ``name``, ``guidelines``), or a
bare list. A criterion may be a plain string (an AdvancedIF-style yes/no question: binary, weight 1).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from .items import unencodable_at

__all__ = [
    "ABSTAIN_LABEL",
    "BINARY_LABELS",
    "Criterion",
    "CriterionKind",
    "MET",
    "NA_LABEL",
    "Option",
    "Rubric",
    "RubricError",
    "UNMET",
    "load_rubric",
    "load_rubrics",
]

MET = "MET"
UNMET = "UNMET"
ABSTAIN_LABEL = "CANNOT_ASSESS"
NA_LABEL = "N/A"
BINARY_LABELS = (MET, UNMET)


class RubricError(ValueError):
    """A rubric failed validation. The message names the criterion and the field."""


class CriterionKind(StrEnum):
    BINARY = "binary"
    ORDINAL = "ordinal"
    NOMINAL = "nominal"
    CHECK = "check"


@dataclass(frozen=True, slots=True)
class Option:
    """One answer a judge may give for an ordinal or nominal criterion."""

    label: str
    value: float
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"label": self.label, "value": self.value}
        if self.description:
            d["description"] = self.description
        return d


@dataclass(frozen=True, slots=True)
class Criterion:
    """One thing a response is judged on.

    ``options`` is derived for binary criteria (MET=1, UNMET=0) so every judged criterion has an
    explicit option list; ``allow_abstain`` adds CANNOT_ASSESS (binary) or N/A (options). ``monitor``
    keeps the criterion out of the score (its ``weight`` still says which way it points, for the judge's
    verdicts, pass rates and a later promotion back into the reward).
    """

    name: str
    requirement: str
    weight: float = 1.0
    kind: CriterionKind = CriterionKind.BINARY
    options: tuple[Option, ...] = ()
    allow_abstain: bool = True
    check: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    monitor: bool = False

    @property
    def reward_weight(self) -> float:
        """The weight the criterion counts with in the score: 0 for a monitor, else ``weight``."""
        return 0.0 if self.monitor else self.weight

    @property
    def is_monitor(self) -> bool:
        """Judged and logged, adding nothing to the score (``monitor: true`` or weight 0)."""
        return self.reward_weight == 0

    @property
    def is_judged(self) -> bool:
        return self.kind is not CriterionKind.CHECK

    @property
    def abstain_label(self) -> str | None:
        if not self.allow_abstain or not self.is_judged:
            return None
        return ABSTAIN_LABEL if self.kind is CriterionKind.BINARY else NA_LABEL

    @property
    def labels(self) -> tuple[str, ...]:
        """Every verdict label on offer, abstention included, in canonical order."""
        labels = tuple(o.label for o in self.options)
        return labels + ((self.abstain_label,) if self.abstain_label else ())

    def value_of(self, label: str) -> float | None:
        """The value of an option label; None for the abstention label."""
        for option in self.options:
            if option.label == label:
                return option.value
        if label == self.abstain_label:
            return None
        raise KeyError(f"criterion {self.name!r} has no option {label!r}")

    @property
    def best_value(self) -> float:
        return max((o.value for o in self.options), default=1.0)

    @property
    def worst_value(self) -> float:
        return min((o.value for o in self.options), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.kind is CriterionKind.CHECK:
            d["check"] = self.check
            if self.kwargs:
                d["kwargs"] = dict(self.kwargs)
            if self.requirement:
                d["requirement"] = self.requirement
        else:
            d["requirement"] = self.requirement
            if self.kind is not CriterionKind.BINARY:
                d["kind"] = self.kind.value
                d["options"] = [o.to_dict() for o in self.options]
        d["weight"] = self.weight
        if self.monitor:
            d["monitor"] = True
        default_abstain = self.kind is CriterionKind.BINARY
        if self.is_judged and self.allow_abstain != default_abstain:
            d["allow_abstain"] = self.allow_abstain
        return d


@dataclass(frozen=True, slots=True)
class Rubric:
    """An analytic rubric: named criteria plus optional rubric-wide guidelines for the judge."""

    criteria: tuple[Criterion, ...]
    name: str = "rubric"
    guidelines: str = ""

    def __post_init__(self) -> None:
        _validate_rubric(self)

    def __len__(self) -> int:
        return len(self.criteria)

    def __iter__(self):
        return iter(self.criteria)

    def __getitem__(self, name: str) -> Criterion:
        for c in self.criteria:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def judged(self) -> tuple[Criterion, ...]:
        return tuple(c for c in self.criteria if c.is_judged)

    @property
    def positive_weight(self) -> float:
        """The sum of the positive weights the score counts (monitors left out)."""
        return sum(c.reward_weight for c in self.criteria if c.reward_weight > 0)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_obj(cls, obj: Any, *, name: str | None = None, source: str = "rubric") -> Rubric:
        """Build from parsed YAML/JSON: a mapping with ``criteria`` or a bare list of criteria."""
        if isinstance(obj, str):
            # AdvancedIF stores its rubric as a JSON-encoded list inside a JSON field.
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError:
                raise RubricError(f"{source}: a string rubric must be a JSON list of criteria") from None
        guidelines = ""
        if isinstance(obj, Mapping):
            unknown = set(obj) - {"name", "guidelines", "criteria", "id", "description"}
            if unknown:
                raise RubricError(f"{source}: unknown field(s) {sorted(unknown)}; expected name, guidelines, criteria")
            if "criteria" not in obj:
                raise RubricError(f"{source}: missing field 'criteria'")
            name = name or _as_str(obj.get("name") or obj.get("id") or "rubric", f"{source}: field 'name'")
            guidelines = _as_str(obj.get("guidelines") or "", f"{source}: field 'guidelines'")
            items = obj["criteria"]
        else:
            items = obj
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise RubricError(f"{source}: 'criteria' must be a list, got {type(items).__name__}")
        if not items:
            raise RubricError(f"{source}: 'criteria' is empty")
        criteria = tuple(_criterion_from_obj(x, i, source) for i, x in enumerate(items))
        try:
            return cls(criteria=criteria, name=name or "rubric", guidelines=guidelines.strip())
        except RubricError as exc:
            raise RubricError(f"{source}: {exc}") from None

    @classmethod
    def from_questions(cls, questions: Sequence[str], *, name: str = "rubric") -> Rubric:
        """AdvancedIF-style rubric: each question is a binary criterion of weight 1."""
        return cls.from_obj(list(questions), name=name)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.guidelines:
            d["guidelines"] = self.guidelines
        d["criteria"] = [c.to_dict() for c in self.criteria]
        return d

    def save(self, path: str | Path) -> None:
        path = Path(path)
        if path.suffix == ".json":
            path.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")
        else:
            import yaml

            path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True))

    def fingerprint(self) -> str:
        """A stable hash of the rubric's content (for caches and resumable runs)."""
        import hashlib

        blob = json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------- loading
def _read_structured(path: Path) -> Any:
    from .io.files import FileError, read_structured

    try:
        return read_structured(path, "rubric file")
    except FileError as exc:
        raise RubricError(str(exc)) from None


def load_rubric(source: str | Path | Mapping | Sequence | Rubric) -> Rubric:
    """Load one rubric from a YAML/JSON file, a parsed object, or pass a Rubric through."""
    if isinstance(source, Rubric):
        return source
    if isinstance(source, str | Path) and not (isinstance(source, str) and source.lstrip().startswith("[")):
        path = Path(source)
        obj = _read_structured(path)
        named = isinstance(obj, Mapping) and (obj.get("name") or obj.get("id"))
        return Rubric.from_obj(obj, source=str(path), name=None if named else path.stem)
    return Rubric.from_obj(source)


def load_rubrics(path: str | Path) -> dict[str, Rubric]:
    """Load a rubric library: a mapping of rubric id -> rubric (for datasets that name rubrics by id)."""
    path = Path(path)
    obj = _read_structured(path)
    if not isinstance(obj, Mapping) or "criteria" in obj:
        rubric = Rubric.from_obj(obj, source=str(path))
        return {rubric.name: rubric}
    return {str(k): Rubric.from_obj(v, name=str(k), source=f"{path}[{k}]") for k, v in obj.items()}


_CRITERION_FIELDS = {
    "name", "requirement", "weight", "kind", "type", "options", "allow_abstain", "check", "kwargs",
    "description", "question", "monitor",
}


def _criterion_from_obj(obj: Any, index: int, source: str) -> Criterion:
    where = f"{source}: criteria[{index}]"
    if isinstance(obj, str):
        obj = {"requirement": obj}
    if not isinstance(obj, Mapping):
        raise RubricError(f"{where}: a criterion must be a mapping or a string, got {type(obj).__name__}")
    name = obj.get("name")
    if name is not None:
        name = _as_str(name, f"{where}: field 'name'").strip()
        if not name:
            raise RubricError(f"{where}: field 'name' is empty")
    name = name or f"c{index + 1}"
    where = f"{source}: criterion {name!r} (criteria[{index}])"
    if "\n" in name or "\r" in name or name.lstrip().startswith("#"):
        raise RubricError(f"{where}: field 'name' must be one line and not a Markdown heading (names go into prompts)")
    unknown = set(obj) - _CRITERION_FIELDS
    if unknown:
        raise RubricError(f"{where}: unknown field(s) {sorted(unknown)}")

    requirement = obj.get("requirement", obj.get("question", obj.get("description", "")))
    requirement = _as_str(requirement if requirement is not None else "", f"{where}: field 'requirement'").strip()

    weight = obj.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise RubricError(f"{where}: field 'weight' must be a number, got {weight!r}")
    weight = float(weight)
    if not math.isfinite(weight):
        raise RubricError(f"{where}: field 'weight' must be finite, got {weight}")

    monitor = obj.get("monitor", False)
    if not isinstance(monitor, bool):
        raise RubricError(f"{where}: field 'monitor' must be true or false")

    check = obj.get("check")
    kind_raw = obj.get("kind", obj.get("type"))
    if check is not None:
        if kind_raw not in (None, "check"):
            raise RubricError(f"{where}: field 'check' cannot be combined with kind {kind_raw!r}")
        check = _as_str(check, f"{where}: field 'check'").strip()
        if not re.fullmatch(r"[a-z_]+:[\w:.-]+", check):
            raise RubricError(f"{where}: field 'check' must look like 'family:name', got {check!r}")
        kwargs = obj.get("kwargs") or {}
        if not isinstance(kwargs, Mapping):
            raise RubricError(f"{where}: field 'kwargs' must be a mapping")
        if "options" in obj:
            raise RubricError(f"{where}: a check criterion takes no 'options'")
        try:
            from .checks import validate_check

            validate_check(check, kwargs)
        except ValueError as exc:
            raise RubricError(f"{where}: field 'check': {exc}") from None
        return Criterion(
            name=name, requirement=requirement, weight=weight, kind=CriterionKind.CHECK,
            allow_abstain=False, check=check, kwargs=dict(kwargs), monitor=monitor,
        )
    if "kwargs" in obj:
        raise RubricError(f"{where}: field 'kwargs' is only for check criteria")
    if not requirement:
        present = any(k in obj for k in ("requirement", "question", "description"))
        raise RubricError(f"{where}: field 'requirement' is {'empty' if present else 'missing'}")

    try:
        kind = CriterionKind(kind_raw or ("ordinal" if "options" in obj else "binary"))
    except ValueError:
        raise RubricError(
            f"{where}: field 'kind' is {kind_raw!r}; expected one of binary, ordinal, nominal, check"
        ) from None
    if kind is CriterionKind.CHECK:
        raise RubricError(f"{where}: kind 'check' needs a field 'check'")

    allow_abstain = obj.get("allow_abstain", kind is CriterionKind.BINARY)
    if not isinstance(allow_abstain, bool):
        raise RubricError(f"{where}: field 'allow_abstain' must be true or false")

    if kind is CriterionKind.BINARY:
        if "options" in obj:
            raise RubricError(f"{where}: a binary criterion takes no 'options' (use kind: ordinal or nominal)")
        options = (Option(MET, 1.0), Option(UNMET, 0.0))
    else:
        options = _options_from_obj(obj.get("options"), where)
    return Criterion(
        name=name, requirement=requirement, weight=weight, kind=kind, options=options,
        allow_abstain=allow_abstain, monitor=monitor,
    )


def _options_from_obj(raw: Any, where: str) -> tuple[Option, ...]:
    if raw is None:
        raise RubricError(f"{where}: field 'options' is missing (ordinal and nominal criteria need options)")
    if isinstance(raw, Mapping):  # {label: value} shorthand
        raw = [{"label": k, "value": v} for k, v in raw.items()]
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        raise RubricError(f"{where}: field 'options' must be a list")
    if len(raw) < 2:
        raise RubricError(f"{where}: field 'options' needs at least two options, got {len(raw)}")
    options = []
    for j, o in enumerate(raw):
        at = f"{where}: options[{j}]"
        if not isinstance(o, Mapping):
            raise RubricError(f"{at}: an option must be a mapping with 'label' and 'value'")
        unknown = set(o) - {"label", "value", "description"}
        if unknown:
            raise RubricError(f"{at}: unknown field(s) {sorted(unknown)}")
        if "label" not in o:
            raise RubricError(f"{at}: field 'label' is missing")
        label = _as_str(o["label"], f"{at}: field 'label'").strip()
        if not label:
            raise RubricError(f"{at}: field 'label' is empty")
        if label in (ABSTAIN_LABEL, NA_LABEL):
            raise RubricError(f"{at}: label {label!r} is reserved for abstention (use allow_abstain: true)")
        if "value" not in o:
            raise RubricError(f"{at}: field 'value' is missing (every option needs an explicit value in [0, 1])")
        value = o["value"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise RubricError(f"{at}: field 'value' must be a number in [0, 1], got {value!r}")
        if not 0.0 <= value <= 1.0:
            raise RubricError(f"{at}: field 'value' must be in [0, 1], got {value}")
        desc = _as_str(o.get("description") or "", f"{at}: field 'description'").strip()
        options.append(Option(label, float(value), desc))
    labels = [o.label for o in options]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise RubricError(f"{where}: field 'options' has duplicate labels {dupes}")
    return tuple(options)


def _validate_rubric(rubric: Rubric) -> None:
    if not rubric.criteria:
        raise RubricError(f"rubric {rubric.name!r}: no criteria")
    names = [c.name for c in rubric.criteria]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RubricError(f"rubric {rubric.name!r}: duplicate criterion names {dupes}")
    for sign, total in (("positive", sum(c.weight for c in rubric.criteria if c.weight > 0)),
                        ("negative", sum(c.weight for c in rubric.criteria if c.weight < 0))):
        if not math.isfinite(total):
            raise RubricError(f"rubric {rubric.name!r}: the {sign} weights sum to {total}; use smaller weights")
    if all(c.weight == 0 for c in rubric.criteria):
        raise RubricError(f"rubric {rubric.name!r}: every weight is zero; at least one criterion needs a non-zero weight")
    if all(c.is_monitor for c in rubric.criteria):
        raise RubricError(f"rubric {rubric.name!r}: every criterion is a monitor; at least one must count toward the "
                          "score (monitor: false and a non-zero weight)")


def _as_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RubricError(f"{where} must be a string, got {type(value).__name__}")
    if (at := unencodable_at(value)) is not None:
        raise RubricError(f"{where} is not valid text (a lone surrogate at character {at})")
    return value
