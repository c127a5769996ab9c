"""The row model every loader returns, and the parsing they share.

A row is a plain dict::

    {"id": str, "prompt": [{"role", "content"}, ...],   # messages ending on the user turn to answer
     "rubric": list[str] | dict | str,                   # questions, an inline rubric, or a rubric id
     "benchmark": str | None}                            # the stratum of the split

:class:`PromptRows` is a list of them plus where they came from and what was left out; a bad row is a
:class:`BadRow` inside a loader, and either stops loading (a one-line ``DataError`` naming source, row and
field) or is recorded as a :class:`SkippedRow`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ....io.files import json_problem
from ....io.rows import DataError, DataSource, read_rows

__all__ = ["ROLES", "BadRow", "OnBadRow", "PromptRows", "SkippedRow", "bad_row", "benchmark_filter", "check_found",
           "content_id", "conversation", "decode", "open_source", "opt_str", "source_rows", "unique_id"]

OnBadRow = Literal["error", "skip"]
ROLES = frozenset({"system", "developer", "user", "assistant"})


class PromptRows(list):
    """Rows (dicts: id, prompt, rubric, benchmark) plus where they came from and what was left out.

    ``skipped`` lists the bad rows dropped under ``on_bad_row="skip"``; ``filtered`` counts rows of
    benchmarks that were not asked for.
    """

    def __init__(self, rows: Iterable[dict[str, Any]] = (), *, source: str = "rows",
                 skipped: Sequence[SkippedRow] = (), filtered: int = 0) -> None:
        super().__init__(rows)
        self.source = source
        self.skipped: list[SkippedRow] = list(skipped)
        self.filtered = filtered
        self.columns: list[str] = []  # of the source's first row, for error messages

    def benchmarks(self) -> dict[str | None, int]:
        """Rows per benchmark, in order of first appearance."""
        return dict(Counter(r.get("benchmark") for r in self))

    def skipped_reasons(self) -> dict[str, int]:
        """Skipped rows per field that made them unusable."""
        return dict(Counter(s.field for s in self.skipped))

    def describe(self) -> str:
        """One line: how many rows, per benchmark, and how many were skipped (and why)."""
        per = ", ".join(f"{b}: {n}" for b, n in self.benchmarks().items())
        text = f"{self.source}: {len(self)} rows ({per})"
        if self.skipped:
            why = ", ".join(f"{f}: {n}" for f, n in self.skipped_reasons().items())
            text += f"; skipped {len(self.skipped)} bad rows ({why})"
        if self.filtered:
            text += f"; {self.filtered} rows of other benchmarks left out"
        return text


@dataclass(frozen=True, slots=True)
class SkippedRow:
    """A row left out under ``on_bad_row="skip"``: its number in the source (from 0), the field, why."""

    row: int
    field: str
    reason: str


class BadRow(Exception):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field, self.reason = field, reason


def open_source(source: Any, *, split: str = "train", revision: str | None = None) -> tuple[str, Iterable[Mapping]]:
    """Local paths are read locally; any other string is a hub dataset id."""
    if isinstance(source, Path) or (isinstance(source, str) and (Path(source).exists() or _looks_local(source))):
        return read_rows(DataSource(path=str(source)))
    if isinstance(source, str):
        hub = DataSource(hf=source, split=split, revision=revision)
        try:
            return read_rows(hub)
        except DataError:
            raise
        except Exception as exc:  # offline, gated, unknown id: one clear line instead of a deep traceback
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise DataError(f"{hub.describe()}: could not load it from the Hugging Face hub "
                            f"({type(exc).__name__}: {first[:300]}); give a local CSV / JSONL / save_to_disk path "
                            "instead, or check the name and the network") from exc
    return read_rows(source)


def _looks_local(text: str) -> bool:
    return text.startswith((".", "/", "~")) or text.endswith((".csv", ".jsonl", ".json")) or text.count("/") != 1


def decode(value: Any, field_name: str, want: type | tuple[type, ...]) -> Any:
    """Decode JSON text up to twice (AdvancedIF nests a JSON list inside a JSON object's string)."""
    for _ in range(3):
        if isinstance(value, want) and not isinstance(value, str):
            return value
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise BadRow(field_name, f"field {field_name!r}: not valid JSON ({json_problem(exc)} at char {exc.pos})") \
                from None
    names = " or ".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
    names = names.replace("Mapping", "object").replace("list", "JSON list")
    raise BadRow(field_name, f"field {field_name!r}: expected a {names}, got {type(value).__name__}")


def conversation(value: Any, field_name: str) -> list[dict[str, str]]:
    if value is None or value == "" or value == []:
        raise BadRow(field_name, f"field {field_name!r} is missing or empty")
    if isinstance(value, str) and value.lstrip()[:1] != "[":
        return [{"role": "user", "content": value}]
    messages = decode(value, field_name, list)
    if not messages:
        raise BadRow(field_name, f"field {field_name!r} is an empty conversation")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise BadRow(field_name, f"field {field_name!r}: message {i} needs 'role' and 'content', got {m!r:.80}")
        role, content = str(m["role"]), m["content"]
        if role not in ROLES:
            raise BadRow(field_name, f"field {field_name!r}: message {i} has unknown role {role!r}")
        if isinstance(content, list):  # OpenAI content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        if not isinstance(content, str):
            raise BadRow(field_name, f"field {field_name!r}: message {i} content is not text")
        out.append({"role": role, "content": content})
    if out[-1]["role"] != "user":
        raise BadRow(field_name, f"field {field_name!r}: the conversation ends on a {out[-1]['role']!r} turn, "
                                  "not on the user turn to answer")
    return out


def opt_str(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    return text or None


def content_id(prompt: Any, rubric: Any, benchmark: str | None) -> str:
    blob = json.dumps([benchmark, prompt, rubric], sort_keys=True, ensure_ascii=False)
    return "advif-" + hashlib.sha1(blob.encode("utf-8")).hexdigest()[:12]


def unique_id(row_id: str, seen: dict[str, int]) -> str:
    """Identical rows get ``-2``, ``-3`` ... in order of appearance."""
    seen[row_id] = seen.get(row_id, 0) + 1
    return row_id if seen[row_id] == 1 else f"{row_id}-{seen[row_id]}"


def source_rows(rows: Iterable[Mapping[str, Any]], out: PromptRows, benchmark_field: str,
                wanted: frozenset[str] | None, limit: int | None) -> Iterator[tuple[int, Mapping[str, Any], str | None]]:
    """``(row number, row, benchmark)`` for each row a loader should parse: records the first row's columns
    on ``out``, counts rows of unwanted benchmarks in ``out.filtered``, stops after ``limit`` kept rows."""
    for row_no, raw in enumerate(rows):
        if limit is not None and len(out) >= limit:
            return
        if row_no == 0:
            out.columns = sorted(map(str, raw)) if isinstance(raw, Mapping) else []
        benchmark = opt_str(raw.get(benchmark_field))
        if wanted is not None and benchmark not in wanted:
            out.filtered += 1
            continue
        yield row_no, raw, benchmark


def bad_row(out: PromptRows, name: str, row_no: int, bad: BadRow, on_bad_row: str) -> None:
    if on_bad_row == "skip":
        out.skipped.append(SkippedRow(row_no, bad.field, bad.reason))
        return
    if on_bad_row != "error":
        raise ValueError(f"on_bad_row must be 'error' or 'skip', got {on_bad_row!r}")
    raise DataError(f"{name}: row {row_no}: {bad.reason} (on_bad_row='skip' leaves such rows out)")


def benchmark_filter(benchmarks: Iterable[str] | str | None) -> frozenset[str] | None:
    if benchmarks is None:
        return None
    chosen = frozenset([benchmarks] if isinstance(benchmarks, str) else benchmarks)
    if not chosen:
        raise ValueError("benchmarks: give at least one benchmark name, or None for all")
    return chosen


def check_found(out: PromptRows, name: str, wanted: frozenset[str] | None) -> None:
    if out:
        return
    if wanted is not None and out.filtered:
        raise DataError(f"{name}: no row of benchmark(s) {sorted(wanted)} ({out.filtered} rows of others)")
    detail = ""
    if out.skipped:
        reason = Counter(s.reason for s in out.skipped).most_common(1)[0][0]
        detail = f" ({len(out.skipped)} skipped, most often: {reason}; the first row's columns: {out.columns[:20]})"
    raise DataError(f"{name}: no usable rows{detail}")
