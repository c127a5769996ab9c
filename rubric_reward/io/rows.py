"""Rows of a data file or dataset: JSONL, CSV, a ``save_to_disk`` folder or a Hugging Face hub dataset.

The one JSONL reader of the package lives here; every error names the source, the line (or row) and
the problem on one line.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .files import json_problem

__all__ = ["DataError", "DataSource", "located_rows", "numbered_jsonl_rows", "read_rows"]


class DataError(ValueError):
    """A dataset row could not be used. The message names the source, the row and the field."""


@dataclass(frozen=True, slots=True)
class DataSource:
    """Where rows come from: a local file (``format`` jsonl, csv, or hf for a ``save_to_disk`` folder)
    or a Hugging Face hub dataset (``hf``, with ``subset``, ``split`` and ``revision``)."""

    path: str | None = None
    format: str = "auto"
    hf: str | None = None
    subset: str | None = None
    split: str = "train"
    revision: str | None = None

    def __post_init__(self) -> None:
        if (self.path is None) == (self.hf is None):
            raise ValueError("data: give exactly one of 'path' (a local file) or 'hf' (a Hugging Face dataset)")
        if self.format not in ("auto", "jsonl", "csv", "hf"):
            raise ValueError(f"data: field 'format' must be auto, jsonl, csv or hf, got {self.format!r}")

    @classmethod
    def parse(cls, obj: Any) -> DataSource:
        if isinstance(obj, DataSource):
            return obj
        if isinstance(obj, str | Path):
            return cls(path=str(obj))
        if isinstance(obj, Mapping):
            return cls(**obj)
        raise ValueError(f"data: expected a path or a mapping, got {type(obj).__name__}")

    def describe(self) -> str:
        return self.path if self.path is not None else f"hf:{self.hf}" + (f"[{self.split}]" if self.split else "")



def read_rows(source: Any) -> tuple[str, Iterator[Mapping[str, Any]]]:
    """``(name, rows)`` for a :class:`DataSource`, a path, a ``datasets.Dataset`` or an iterable of mappings."""
    name, located = located_rows(source)
    return name, (row for _, row in located)


def located_rows(source: Any) -> tuple[str, Iterator[tuple[str, Mapping[str, Any]]]]:
    """``(name, (where, row) ...)``, like :func:`read_rows`; ``where`` names the row within the source for
    error messages: ``"line N"`` in a JSONL or CSV file, ``"row N"`` (from 0) in a dataset or a list."""
    if isinstance(source, str | Path | Mapping) and not _is_hf_dataset(source):
        source = DataSource.parse(source)
    if isinstance(source, DataSource):
        if source.hf is not None:
            return source.describe(), _indexed(_load_hf(source))
        path = Path(source.path or "")
        fmt = source.format
        if fmt == "auto":
            fmt = "hf" if path.is_dir() else {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv"}.get(path.suffix, "")
            if not fmt:
                raise DataError(f"{path}: cannot tell the format from the suffix; set data.format to jsonl, csv or hf")
        if not path.exists():
            raise DataError(f"{path}: no such file or folder")
        if fmt == "jsonl":
            return str(path), ((f"line {n}", row) for n, row in numbered_jsonl_rows(path))
        if fmt == "csv":
            return str(path), _csv_rows(path)
        return str(path), _indexed(_load_hf(source))
    if _is_hf_dataset(source):
        return "dataset", _indexed(source)
    if isinstance(source, Iterable):
        return "rows", _indexed(source)
    raise DataError(f"cannot read items from a {type(source).__name__}")


def _indexed(rows: Iterable[Mapping[str, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    return ((f"row {i}", row) for i, row in enumerate(rows))


def _is_hf_dataset(obj: Any) -> bool:
    return type(obj).__module__.startswith("datasets.") and hasattr(obj, "column_names")


def numbered_jsonl_rows(path: Path, *, torn_ok: bool = False) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSONL file. ``torn_ok``: a file this package
    appends to, where a line that is not a JSON object (one torn by a crash) is skipped instead of an error."""
    if not path.is_file():
        raise DataError(f"{path}: {'is a directory, not a JSONL file' if path.is_dir() else 'no such file'}")
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError:
                if torn_ok:
                    continue
                raise DataError(f"{path}: line {n}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:  # one line number, the file's (json's own counts within the row)
                if torn_ok:
                    continue
                raise DataError(f"{path}: line {n}: not valid JSON at column {exc.colno}: {json_problem(exc)}") from None
            if not isinstance(row, Mapping):
                if torn_ok:
                    continue
                raise DataError(f"{path}: line {n}: expected a JSON object, got {type(row).__name__}")
            yield n, row


def _csv_rows(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        for row in reader:  # line_num: the line the record ends on (the header is line 1)
            yield f"line {reader.line_num}", {k: (None if v == "" else v) for k, v in row.items()}


def _load_hf(source: DataSource) -> Any:
    try:
        import datasets
    except ImportError:
        raise DataError(f"{source.describe()}: reading a Hugging Face dataset needs 'datasets' "
                        "(pip install datasets)") from None

    if source.path is not None:
        ds = datasets.load_from_disk(source.path)
    else:
        ds = datasets.load_dataset(source.hf, source.subset, split=source.split, revision=source.revision)
    if isinstance(ds, datasets.DatasetDict):
        if source.split not in ds:
            raise DataError(f"{source.describe()}: no split {source.split!r}; available: {sorted(ds)}")
        ds = ds[source.split]
    return ds
