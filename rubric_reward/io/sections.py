"""Typed config sections: one reader that checks a mapping against a dataclass's fields before it is built.

Every config of the package (``RewardConfig`` and its ``guards:`` / ``length_penalty:``, ``ServeConfig``'s
``serve:``, ``JudgeConfig``, ``EvalConfig``, the generation sections, the dpo-loop's ``loop:`` and the GRPO
watch) is read by :func:`from_section` and re-checked by :func:`check_fields` from its ``__post_init__``
(so a config built in Python is held to the same rules as one read from YAML):

* unknown keys are one error listing the known ones;
* values must fit the field's annotation: ``bool`` is only ``true``/``false`` (YAML ``"no"`` is a string,
  not false), ``int`` is an integer (not a bool, not 1.5), ``float`` a finite number (NaN and infinity are
  refused unless the field says ``"finite": False``), ``str`` a string, ``X | None`` also null,
  ``Literal``/``Enum`` one of their values, ``tuple[X, ...]``/``list[X]`` a list of X (a list becomes a
  tuple for a tuple field), ``Mapping``/``dict`` a mapping;
* a field annotated with a dataclass (alone or in a union with a mapping) is a nested section: a mapping
  given there is read by :func:`from_section` once, into that class, and its errors name ``section.field``;
* the field's ``metadata`` declares its range next to it: ``ge``, ``gt``, ``le``, ``lt`` (numbers) and
  ``choices``; ``metadata["help"]`` documents the field (:func:`field_help`; docs tables are checked
  against it by a test); ``"raw": True`` leaves a field's value to its class (a spec it parses itself).

Errors are one ``ValueError``: ``"<section>: field '<name>' must be ..., got ..."``; the loaders put the
file's path in front.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import os
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

__all__ = ["check_fields", "field_help", "from_section"]

T = TypeVar("T")

_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false", type(None): "null"}


class _Misfit(Exception):
    """A value does not fit an annotation (caught and turned into the one-line ValueError)."""


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls) if f.init}


def _describe(tp: Any) -> str:
    if tp in _NAMES:
        return _NAMES[tp]
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_describe(a) for a in typing.get_args(tp)))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(repr(e.value) for e in tp)
    if origin in (tuple, list) or origin is Sequence:
        return "a list"
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return f"a mapping of {tp.__name__} fields"
    return getattr(tp, "__name__", str(tp))


def _fit(tp: Any, value: Any, where: str) -> Any:
    """``value`` as the field holds it (nested sections built, lists made tuples, ints made floats), or
    _Misfit. Annotations this reader does not know (a class that parses its own spec) take any value."""
    if tp is Any or isinstance(tp, TypeVar):
        return value
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise _Misfit
        if isinstance(value, Mapping):  # a mapping given for a section: the section's class reads it
            for a in args:
                if dataclasses.is_dataclass(a):
                    return from_section(a, value, where)
        unknown = False
        for a in args:
            if a is type(None):
                continue
            try:
                return _fit(a, value, where)
            except _Misfit:
                continue
            except _Unknown:
                unknown = True
        if unknown:
            return value
        raise _Misfit
    if tp is type(None):
        if value is None:
            return None
        raise _Misfit
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _Misfit
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Misfit
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise _Misfit
    if tp is str:
        if isinstance(value, str | os.PathLike):  # a path given in Python
            return value
        raise _Misfit
    if origin is typing.Literal:
        if any(value == a and type(value) is type(a) for a in typing.get_args(tp)):
            return value
        raise _Misfit
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if isinstance(value, tp) or value in {e.value for e in tp}:
            return value
        raise _Misfit
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if isinstance(value, Mapping):
            return from_section(tp, value, where)
        raise _Misfit
    if origin in (tuple, list) or origin is Sequence or tp in (tuple, list):
        if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
            raise _Misfit
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        items = [_element(args[0], v, where) for v in value] if len(args) == 1 else list(value)
        return tuple(items) if origin is tuple or tp is tuple else items
    if origin in (dict, Mapping) or tp in (dict, Mapping) or origin is typing.MutableMapping:
        if not isinstance(value, Mapping):
            raise _Misfit
        return value
    raise _Unknown


def _element(tp: Any, value: Any, where: str) -> Any:
    try:
        return _fit(tp, value, where)
    except _Unknown:
        return value


class _Unknown(Exception):
    """An annotation this reader leaves to the class."""


def _range_text(meta: Mapping[str, Any]) -> str:
    lo = ("[", meta["ge"]) if "ge" in meta else ("(", meta["gt"]) if "gt" in meta else None
    hi = ("]", meta["le"]) if "le" in meta else (")", meta["lt"]) if "lt" in meta else None
    if lo and hi:
        return f"in {lo[0]}{lo[1]}, {hi[1]}{hi[0]}"
    if lo:
        return f"{'>=' if lo[0] == '[' else '>'} {lo[1]}"
    return f"{'<=' if hi[0] == ']' else '<'} {hi[1]}"  # type: ignore[index]


def _check_range(meta: Mapping[str, Any], value: Any) -> str | None:
    """Why ``value`` is out of the field's declared range (None: it is in)."""
    if "choices" in meta and value is not None and value not in meta["choices"]:
        return "must be one of " + ", ".join(map(str, meta["choices"]))
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value) and meta.get("finite", True):
        return "must be a finite number"
    tests = {"ge": lambda b: value >= b, "gt": lambda b: value > b, "le": lambda b: value <= b,
             "lt": lambda b: value < b}
    if all(test(meta[key]) for key, test in tests.items() if key in meta):
        return None
    return f"must be {_range_text(meta)}"


def _value(cls: type, f: dataclasses.Field, value: Any, where: str) -> Any:
    meta = f.metadata
    if meta.get("raw"):
        return value
    tp = _hints(cls).get(f.name, Any)
    try:
        out = _fit(tp, value, f"{where}.{f.name}")
    except _Unknown:
        out = value
    except _Misfit:
        raise ValueError(f"{where}: field {f.name!r} must be {_describe(tp)}, got {value!r:.80}") from None
    why = _check_range(meta, out)
    if why:
        raise ValueError(f"{where}: field {f.name!r} {why}, got {value!r:.80}")
    return out


def from_section(cls: type[T], data: Any, where: str, **extra: Any) -> T:
    """``cls(**data, **extra)`` after checking that ``data`` is a mapping of known fields whose values fit
    their annotations and declared ranges (see the module docstring); errors name ``where`` and the field."""
    if isinstance(data, cls):
        return data
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a mapping of fields, got {type(data).__name__} {data!r:.80}")
    known = {name: f for name, f in _fields(cls).items() if name not in extra}
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; known: {sorted(known)}")
    values = {name: _value(cls, known[name], value, where) for name, value in data.items()}
    return cls(**values, **extra)


def check_fields(obj: Any, where: str) -> None:
    """Hold a built config (``self`` in ``__post_init__``) to the same rules as :func:`from_section`:
    every field's value fits its annotation and range; nested sections given as mappings are built (once)."""
    cls = type(obj)
    for name, f in _fields(cls).items():
        value = getattr(obj, name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            continue  # a section already built (and checked) by its own class
        out = _value(cls, f, value, where)
        if out is not value:
            object.__setattr__(obj, name, out)


def field_help(cls: type) -> dict[str, str | None]:
    """Each init field's ``metadata["help"]`` (None where a field has none)."""
    return {name: f.metadata.get("help") for name, f in _fields(cls).items()}
