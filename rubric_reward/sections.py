"""Typed config sections: a YAML mapping checked against a dataclass's fields before it is built.

Every config section of the generation commands (``generation:``, ``meta:``, ``preferences:``,
``heldout:``, the ``loop:`` itself) is read by :func:`from_section` once, when the config is built:
unknown keys and values of the wrong type are one ``ValueError`` naming the section and the field, so
``preferences: {k: three}`` fails at load time, not as a ``TypeError`` an hour into a run.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["from_section"]

T = TypeVar("T")

_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _accepts(tp: Any, value: Any) -> bool | None:
    """Whether ``value`` fits the annotation ``tp`` (None: not a simple type, left to the class)."""
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        verdicts = [_accepts(a, value) for a in typing.get_args(tp)]
        return True if any(verdicts) else None if None in verdicts else False
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    return None


def _describe(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
    text = " or ".join(_NAMES.get(a, getattr(a, "__name__", str(a))) for a in args)
    return text + (" or null" if type(None) in typing.get_args(tp) else "")


def from_section(cls: type[T], data: Any, where: str, **extra: Any) -> T:
    """``cls(**data, **extra)`` after checking ``data`` is a mapping of known fields with values of the
    annotated simple types (int, float, str, bool, optional); errors name ``where`` and the field."""
    if isinstance(data, cls):
        return data
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a mapping of fields, got {type(data).__name__} {data!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in extra]
    unknown = sorted(set(map(str, data)) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; known: {sorted(known)}")
    for name, value in data.items():
        tp = hints.get(name, Any)
        if _accepts(tp, value) is False:
            raise ValueError(f"{where}: field {name!r} must be {_describe(tp)}, got {value!r}")
    values = {k: float(v) if hints.get(k) is float and isinstance(v, int) else v for k, v in data.items()}
    return cls(**values, **extra)
