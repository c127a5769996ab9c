"""Numbers and tables for reports, one way everywhere: an undefined statistic is "n/a" (never NaN) in text
and ``null`` in JSON."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["ci_text", "fmt", "interval_dict", "jsonable", "markdown_table", "pct", "pvalue"]


def fmt(x: Any, digits: int = 3, *, signed: bool = False) -> str:
    """A number for a report; None (an undefined statistic) is "n/a"; ``signed`` writes "+" on positives."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return f"{x:+d}" if signed else str(x)
    if isinstance(x, float):
        return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"
    return str(x)


def pct(x: float | None, digits: int = 2, *, signed: bool = False) -> str:
    """A fraction in percent (points when ``signed``); None is "n/a"."""
    return "n/a" if x is None else fmt(100 * float(x), digits, signed=signed)


def pvalue(p: float | None) -> str:
    """A p-value with three significant digits; None is "n/a"."""
    return "n/a" if p is None else f"{p:.3g}"


def ci_text(ci: Mapping[str, Any] | None, *, signed: bool = False, estimate: bool = True) -> str:
    """``"0.512 [0.401, 0.622]"`` from an interval dict (``estimate``, ``low``, ``high``); the bracket alone
    with ``estimate=False``; "n/a" for a missing part."""
    if not ci or (estimate and ci.get("estimate") is None):
        return "n/a"
    low, high = ci.get("low"), ci.get("high")
    bracket = "[n/a]" if low is None else f"[{fmt(low, signed=signed)}, {fmt(high, signed=signed)}]"
    if not estimate:
        return "n/a" if low is None else bracket
    return f"{fmt(ci['estimate'], signed=signed)} {bracket}"


def jsonable(obj: Any) -> Any:
    """``obj`` as JSON values: NaN/inf become None (undefined), tuples lists, objects with ``to_dict`` their
    dict, anything else its str."""
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if obj is None or isinstance(obj, str | int | bool):
        return obj
    if hasattr(obj, "to_dict"):
        return jsonable(obj.to_dict())
    return str(obj)


def interval_dict(iv: Any) -> dict[str, Any]:
    """A :class:`~rubric_reward.stats.Interval` as a JSON dict (``estimate``, ``low``, ``high``, ``confidence``,
    ``n``; undefined values None)."""
    return jsonable(iv.to_dict())


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table (cells as given; pipes and newlines escaped)."""
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
