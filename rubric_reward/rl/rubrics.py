"""Where a row's rubric comes from: one fixed rubric, or a dataset column.

A column value may be a mapping (an inline rubric, or AdvancedIF's ``prompt_metadata`` with a
``rubrics`` entry), a list (criteria, or AdvancedIF yes/no questions), a string holding YAML or JSON
of either (AdvancedIF's lists are JSON-encoded, sometimes twice), or a rubric id looked up in a
mapping/library of rubrics and then in ``rubric_dir`` (``<id>.yaml``, ``.yml`` or ``.json``).
Resolved rubrics are cached by their raw value, so a column repeated ``num_generations`` times is
parsed once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..rubric import Rubric, RubricError, load_rubric, load_rubrics

__all__ = ["RubricSource"]

_SUFFIXES = (".yaml", ".yml", ".json")


class RubricSource:
    """Resolves the rubric for each row; ``key(value)`` identifies equal rubrics for dedupe."""

    def __init__(self, rubric: Any = None, *, column: str = "rubric", rubric_dir: str | Path | None = None,
                 rubrics: Any = None, max_cached: int = 4096):
        self.fixed = load_rubric(rubric) if rubric is not None else None
        self.column = column
        self.rubric_dir = Path(rubric_dir) if rubric_dir is not None else None
        if isinstance(rubrics, str | Path):
            rubrics = load_rubrics(rubrics)
        self.library: dict[str, Any] = dict(rubrics or {})
        self._cache: dict[str, Rubric] = {}
        self._max_cached = max_cached

    def rows(self, n: int, columns: Mapping[str, Any]) -> list[Rubric | RubricError]:
        """One rubric (or the error that names why there is none) per row."""
        if self.fixed is not None:
            return [self.fixed] * n
        values = columns.get(self.column)
        if values is None:
            err = RubricError(f"no rubric: the config sets no fixed rubric and the batch has no column "
                              f"{self.column!r} (columns: {sorted(columns) or 'none'})")
            return [err] * n
        if len(values) != n:
            err = RubricError(f"column {self.column!r} has {len(values)} values for {n} completions")
            return [err] * n
        out: list[Rubric | RubricError] = []
        for i, v in enumerate(values):
            try:
                out.append(self.resolve(v))
            except RubricError as exc:
                out.append(RubricError(f"row {i}, column {self.column!r}: {exc}"))
            except Exception as exc:  # noqa: BLE001 - a bad row must not stop training
                out.append(RubricError(f"row {i}, column {self.column!r}: {type(exc).__name__}: {exc}"))
        return out

    def resolve(self, value: Any) -> Rubric:
        if isinstance(value, Rubric):
            return value
        key = self.key(value)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._load(value)
            if len(self._cache) >= self._max_cached:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    @staticmethod
    def key(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, Rubric):
            return "rubric:" + value.fingerprint()
        return "json:" + json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)

    # ------------------------------------------------------------------ parsing
    def _load(self, value: Any, depth: int = 0) -> Rubric:
        if value is None:
            raise RubricError("the rubric is empty (None)")
        if isinstance(value, Mapping):
            if "criteria" not in value and "rubrics" in value:  # AdvancedIF prompt_metadata
                return self._load(value["rubrics"], depth + 1)
            return Rubric.from_obj(value, source="inline rubric")
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            return Rubric.from_obj(list(value), source="inline rubric")
        if not isinstance(value, str):
            raise RubricError(f"a rubric must be a mapping, a list or a string, got {type(value).__name__}")
        text = value.strip()
        if not text:
            raise RubricError("the rubric is an empty string")
        if text in self.library:
            return load_rubric(self.library[text]) if not isinstance(self.library[text], Rubric) else self.library[text]
        path = self._find(text)
        if path is not None:
            return load_rubric(path)
        if text[0] in "[{\"" and depth < 3:
            try:
                decoded = json.loads(text)
            except json.JSONDecodeError as exc:
                raise RubricError(f"looks like JSON but does not parse: {exc}") from None
            return self._load(decoded, depth + 1)
        if "\n" in text or ":" in text or text.startswith("- "):
            import yaml

            try:
                decoded = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise RubricError(f"not valid YAML: {str(exc).splitlines()[0]}") from None
            if isinstance(decoded, Mapping | list):
                return self._load(decoded, depth + 1)
        where = f" or in {self.rubric_dir}" if self.rubric_dir is not None else ""
        raise RubricError(f"{text[:60]!r} is not an inline rubric and no rubric has that id "
                          f"(looked in {len(self.library)} named rubric(s){where})")

    def _find(self, rubric_id: str) -> Path | None:
        # ids name files inside rubric_dir only: no separators, no parent references
        if (self.rubric_dir is None or len(rubric_id) > 200 or any(ch in rubric_id for ch in "/\\\n\0")
                or rubric_id.startswith(".")):
            return None
        for suffix in ("", *_SUFFIXES):
            path = self.rubric_dir / f"{rubric_id}{suffix}"
            if path.is_file() and (suffix or path.suffix in _SUFFIXES):
                return path
        return None
