"""Result types and input validation shared by the statistics modules.

Conventions used throughout ``rubric_reward.stats``:

* Input of length zero is a caller error: ``ValueError`` naming the argument.
* Paired inputs of different lengths: ``ValueError`` naming both arguments.
* ``None`` (and float NaN) marks a missing value, e.g. a judge that abstained.
  Paired statistics drop an item when either side is missing.
* A statistic that is undefined for the data that remains (nothing left after
  dropping missing values, a single category, constant input, ...) is returned
  as ``None``, never as a silent NaN. Reports should print ``None`` as "n/a".
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Hashable, Sequence
from fractions import Fraction
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

#: Two scores closer than this are equal: their difference is a tie, never "better" or "worse".
TIE_TOLERANCE = 1e-9
# A float within this of a fraction with a denominator up to _MAX_DENOMINATOR is taken as that fraction
# (5/7 stored as 0.7142857142857143): differences equal in exact arithmetic then come out equal.
_SNAP = 1e-12
_MAX_DENOMINATOR = 10**6

LabelSeq: TypeAlias = Sequence[Hashable | None] | npt.NDArray[Any]
NumSeq: TypeAlias = Sequence[float | None] | npt.NDArray[Any]


class _Result:
    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-serialisable; undefined values are ``None``)."""
        return dataclasses.asdict(self)  # type: ignore[call-overload]


@dataclasses.dataclass(frozen=True)
class TestResult(_Result):
    """A test statistic, its p-value and the number of complete pairs used."""

    __test__ = False  # not a pytest test class

    statistic: float
    pvalue: float
    n: int


@dataclasses.dataclass(frozen=True)
class Interval(_Result):
    """A point estimate with a confidence interval.

    ``low``/``high`` are ``None`` when the interval is undefined (fewer than
    two resampling units); ``estimate`` is ``None`` when no data remained.
    """

    estimate: float | None
    low: float | None
    high: float | None
    confidence: float
    n: int


def is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def as_labels(values: LabelSeq, name: str) -> list[Hashable | None]:
    """1-D list of labels with NaN normalised to ``None``."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of labels, not a single string")
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {values.shape}")
        items = values.tolist()
    else:
        items = list(values)
    if not items:
        raise ValueError(f"{name} is empty")
    return [None if is_missing(v) else v for v in items]


def as_numeric(values: NumSeq, name: str) -> npt.NDArray[np.float64]:
    """1-D float array; ``None`` becomes NaN (missing)."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric (use None or NaN for missing values)") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if np.isinf(arr).any():
        raise ValueError(f"{name} contains infinite values")
    return arr


def check_same_length(a: Sequence[Any] | np.ndarray, b: Sequence[Any] | np.ndarray, name_a: str, name_b: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"{name_a} and {name_b} have different lengths ({len(a)} != {len(b)})")


def paired_numeric(
    a: NumSeq, b: NumSeq, name_a: str = "a", name_b: str = "b"
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Both arrays restricted to the items where neither side is missing."""
    x, y = as_numeric(a, name_a), as_numeric(b, name_b)
    check_same_length(x, y, name_a, name_b)
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


def rng_kwargs(func: Callable[..., Any], seed: int | None) -> dict[str, np.random.Generator]:
    # scipy >= 1.15 takes ``rng``; older releases only ``random_state``.
    key = "rng" if "rng" in inspect.signature(func).parameters else "random_state"
    return {key: np.random.default_rng(seed)}


def _rational(x: float) -> Fraction:
    exact = Fraction(x)
    near = exact.limit_denominator(_MAX_DENOMINATOR)
    return near if abs(near - exact) <= _SNAP else exact


def exact_differences(a: NumSeq, b: NumSeq, name_a: str = "a", name_b: str = "b", *,
                      tolerance: float = TIE_TOLERANCE) -> npt.NDArray[np.float64]:
    """``a - b`` per pair, NaN where either side is missing, computed in exact arithmetic.

    Each score is read as the fraction it stands for (a float within 1e-12 of a fraction with denominator
    up to 10**6, else its exact binary value), so differences that are equal in exact arithmetic
    (5/7 - 3/7 and 3/7 - 1/7) come out as the same float and rank as ties; a difference within
    ``tolerance`` of zero is exactly 0 (a tie).
    """
    x, y = as_numeric(a, name_a), as_numeric(b, name_b)
    check_same_length(x, y, name_a, name_b)
    out = np.full(x.size, np.nan)
    for i, (u, v) in enumerate(zip(x.tolist(), y.tolist())):
        if math.isnan(u) or math.isnan(v):
            continue
        d = _rational(u) - _rational(v)
        out[i] = 0.0 if abs(d) <= tolerance else float(d)
    return out
