"""A trainer's batch made judgeable: the shape checks, and the error one bad sample is reported with.

A batch whose shape cannot be aligned (a bare string for ``completions``, a mapping for ``prompts``,
lists of different lengths) is a programming error: one ``BatchShapeError`` (a ``ValueError``) naming
the argument. One malformed sample (bytes, numbers, nested lists, a conversation with no assistant
turn, a bad rubric label) is data: a :class:`SampleError` naming the field, which each path turns
into an unscored sample (trainers) or a 4xx naming the field (the service's request bodies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BatchShapeError", "SampleError", "aligned", "as_list"]


class SampleError(ValueError):
    """One sample cannot be judged. ``field`` names the input at fault (``labels[3]``,
    ``items[0].response``); ``code`` says how (``invalid_field``, ``missing_field``, ``invalid_rubric``,
    ``unknown_rubric_id``, ``no_judge``: the service answers 422 with it); ``kind`` is the error kind an
    unscored record carries (``data`` or ``rubric``)."""

    def __init__(self, field: str | None, message: str, *, code: str = "invalid_field", kind: str = "data"):
        super().__init__(f"{field}: {message}" if field else message)
        self.field, self.message, self.code, self.kind = field, message, code, kind


class BatchShapeError(ValueError):
    """A batch whose shape cannot be aligned (a caller's bug, not a bad sample)."""


def _kind(value: Any) -> str:
    return type(value).__name__


def as_list(name: str, values: Any) -> list[Any]:
    """``values`` as a list with one entry per sample; a bare string, bytes, a mapping or a scalar is a
    ValueError naming ``name`` (a string would otherwise be judged one character at a time)."""
    if hasattr(values, "tolist") and not isinstance(values, str | bytes):  # numpy / torch columns
        values = values.tolist()
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Sequence):
        raise BatchShapeError(f"rubric reward: {name!r} must be a list with one entry per completion, "
                              f"got {_kind(values)}")
    return list(values)


def aligned(name: str, values: Any, n: int) -> list[Any]:
    """:func:`as_list`, checked to hold ``n`` entries (one per completion)."""
    out = as_list(name, values)
    if len(out) != n:
        raise BatchShapeError(f"rubric reward: {name!r} has {len(out)} entries for {n} completions")
    return out

