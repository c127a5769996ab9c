"""The one rubric resolver: whatever a sample names as its rubric, as a :class:`Rubric`.

A label (a dataset's rubric column, a service item's ``rubric``/``label``, OpenRLHF's label, verl's
ground truth) is a Rubric; a mapping (an inline rubric, AdvancedIF ``prompt_metadata`` with a
``rubrics`` entry, or ``{"rubric_id": id}``); a list (criteria, or AdvancedIF yes/no questions);
text holding JSON or YAML of any of these, decoded as deep as needed (AdvancedIF's lists come
JSON-encoded, sometimes twice); or a rubric id, looked up in ``rubrics`` (a mapping or a library
file) and then ``rubric_dir`` (a folder of ``<id>.yaml``/``.yml``/``.json`` files, or a library
file). An empty label (None, ``""``) takes the default rubric. Parsed labels are memoised by value,
so a label repeated for every generation of a prompt is parsed once. Every error is a
:class:`~rubric_reward.rewards.samples.SampleError` naming the field.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..rubric import Rubric, RubricError, load_rubric, load_rubrics
from .samples import SampleError

__all__ = ["RubricResolver"]

_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")
_SUFFIXES = (".yaml", ".yml", ".json")
_DEPTH = 4  # text inside text: JSON-encoded lists, encoded again


def _rubric_error(field: str, message: str, code: str = "invalid_rubric") -> SampleError:
    return SampleError(field, message, code=code, kind="rubric")


class RubricResolver:
    """Resolves sample labels to rubrics for one config (``default``, ``rubric_dir``, ``rubrics``)."""

    def __init__(self, default: Any = None, *, rubric_dir: str | Path | None = None, rubrics: Any = None,
                 memo: int = 4096):
        self.default = load_rubric(default) if default is not None else None
        self._library: dict[str, Rubric] = {}
        self._dir: Path | None = None
        if isinstance(rubrics, str | Path):
            self._library.update(load_rubrics(rubrics))
        elif isinstance(rubrics, Mapping):
            for key, value in rubrics.items():
                self._library[str(key)] = value if isinstance(value, Rubric) else Rubric.from_obj(
                    value, name=str(key), source=f"rubrics[{key}]")
        elif rubrics is not None:
            raise ValueError(f"RewardConfig: field 'rubrics' must be a mapping of id -> rubric or a library file, "
                             f"got {type(rubrics).__name__}")
        if rubric_dir is not None:
            path = Path(rubric_dir)
            if path.is_dir():
                self._dir = path
            elif path.is_file():
                self._library = {**load_rubrics(path), **self._library}
            else:
                raise ValueError(f"RewardConfig: field 'rubric_dir': {path} is neither a folder nor a file")
        self._by_id: dict[str, Rubric] = {}
        self._memo: OrderedDict[Any, Rubric] = OrderedDict()
        self._memo_size = memo
        self._lock = threading.Lock()

    @property
    def has_ids(self) -> bool:
        return bool(self._library) or self._dir is not None

    # ------------------------------------------------------------------ public
    def resolve(self, label: Any, field: str = "rubric", *, ids: bool = True) -> Rubric:
        """The rubric ``label`` names (``ids=False``: inline rubrics only); SampleError naming ``field``."""
        if isinstance(label, Rubric):
            return label
        if hasattr(label, "tolist") and not isinstance(label, str | bytes):  # numpy values from parquet
            label = label.tolist()
        if label is None or (isinstance(label, str) and not label.strip()):
            return self.default_for(field)
        key = _memo_key(label, ids)
        if key is not None:
            with self._lock:
                hit = self._memo.get(key)
                if hit is not None:
                    self._memo.move_to_end(key)
                    return hit
        rubric = self._parse(label, field, ids, 0)
        if key is not None:
            with self._lock:
                self._memo[key] = rubric
                if len(self._memo) > self._memo_size:
                    self._memo.popitem(last=False)
        return rubric

    def resolve_many(self, labels: Sequence[Any], field: Callable[[int], str]) -> list[Rubric | SampleError]:
        """One rubric (or the SampleError saying why there is none) per label; ``field(i)`` names label i."""
        out: list[Rubric | SampleError] = []
        prev: Any = object()
        for i, label in enumerate(labels):
            if label is prev and out:  # trainers repeat a prompt's label for each of its generations
                out.append(out[-1])
                continue
            prev = label
            try:
                out.append(self.resolve(label, field(i)))
            except SampleError as exc:
                out.append(exc)
            except Exception as exc:  # noqa: BLE001 - one bad label must not stop a batch
                out.append(_rubric_error(field(i), f"{type(exc).__name__}: {exc}"))
        return out

    def rows(self, n: int, columns: Mapping[str, Any], column: str | None = "rubric") -> list[Rubric | SampleError]:
        """A trainer batch's rubrics: ``columns[column]`` row by row, or the default when the column is
        absent (or ``column`` is None: the default for every row)."""
        values = None if column is None else columns.get(column)
        if values is None:
            if self.default is not None:
                return [self.default] * n
            err = _rubric_error(None, f"no rubric: the config sets no default 'rubric' and the batch has no column "
                                      f"{column!r} (columns: {sorted(columns) or 'none'})", "missing_field")
            return [err] * n
        from .samples import aligned

        return self.resolve_many(aligned(column, values, n), lambda i: f"row {i}, column {column!r}")

    def by_id(self, rubric_id: Any, field: str) -> Rubric:
        """The rubric named ``rubric_id`` in ``rubrics`` or ``rubric_dir``."""
        if not isinstance(rubric_id, str) or not _ID.fullmatch(rubric_id):
            raise SampleError(field, f"a rubric id is letters, digits, '_', '-', '.', got {rubric_id!r:.80}",
                              code="invalid_field", kind="rubric")
        found = self._lookup(rubric_id, field)
        if found is None:
            raise _rubric_error(field, self._missing(rubric_id), "unknown_rubric_id")
        return found

    def default_for(self, field: str) -> Rubric:
        if self.default is None:
            raise _rubric_error(field, "no rubric given and the config sets no default 'rubric'", "missing_field")
        return self.default

    # ------------------------------------------------------------------ parsing
    def _parse(self, obj: Any, field: str, ids: bool, depth: int) -> Rubric:
        if isinstance(obj, Rubric):
            return obj
        if isinstance(obj, Mapping):
            if set(obj) == {"rubric_id"}:
                return self.by_id(obj["rubric_id"], f"{field}.rubric_id")
            if "rubrics" in obj and "criteria" not in obj:  # AdvancedIF prompt_metadata
                return self._parse(obj["rubrics"], f"{field}.rubrics", False, depth + 1)
            return self._from_obj(obj, field)
        if isinstance(obj, list | tuple):
            return self._from_obj(list(obj), field)
        if isinstance(obj, str):
            return self._parse_text(obj, field, ids, depth)
        raise _rubric_error(field, "a rubric is a mapping, a list of criteria or questions, JSON/YAML text of one, "
                                   f"or a rubric id; got {type(obj).__name__}")

    def _parse_text(self, text: str, field: str, ids: bool, depth: int) -> Rubric:
        s = text.strip()
        if not s:
            raise _rubric_error(field, "the rubric is an empty string")
        if ids:
            found = self._lookup(s, field)
            if found is not None:
                return found
        decoded: Any = None
        if depth < _DEPTH and s[0] in "[{\"":
            try:
                decoded = json.loads(s)
            except RecursionError:
                raise _rubric_error(field, "the rubric text is nested too deeply") from None
            except json.JSONDecodeError as exc:
                try:  # YAML flow style: [Is it short?, Is it kind?]
                    decoded = _yaml(s) if s[0] != '"' else None
                except ValueError:
                    decoded = None
                if not isinstance(decoded, Mapping | list):
                    raise _rubric_error(field, f"looks like JSON but does not parse: {exc}") from None
        elif depth < _DEPTH and ("\n" in s or ":" in s or s.startswith("- ")):
            try:
                decoded = _yaml(s)
            except ValueError as exc:
                raise _rubric_error(field, str(exc)) from None
        if isinstance(decoded, Mapping | list | str):
            return self._parse(decoded, field, ids, depth + 1)
        if ids and _ID.fullmatch(s):
            raise _rubric_error(field, self._missing(s), "unknown_rubric_id")
        what = "a rubric (a mapping or a list of criteria or questions, or JSON/YAML text of one)"
        raise _rubric_error(field, f"{s[:60]!r} is not {what}" + (" and no rubric has that id" if ids else ""))

    @staticmethod
    def _from_obj(obj: Any, field: str) -> Rubric:
        try:
            return Rubric.from_obj(obj, source=field or "inline rubric")
        except RubricError as exc:
            raise _rubric_error(field, str(exc)) from None

    # ------------------------------------------------------------------ ids
    def _lookup(self, rubric_id: str, field: str) -> Rubric | None:
        found = self._library.get(rubric_id)
        if found is None:
            found = self._by_id.get(rubric_id)
        if found is not None or self._dir is None or not _ID.fullmatch(rubric_id):
            return found
        for suffix in ("", *_SUFFIXES):  # ids name files inside rubric_dir only: no separators, no '..' start
            path = self._dir / f"{rubric_id}{suffix}"
            if path.is_file() and (suffix or path.suffix in _SUFFIXES):
                try:
                    found = load_rubric(path)
                except RubricError as exc:
                    raise _rubric_error(field, f"rubric {rubric_id!r}: {exc}") from None
                self._by_id[rubric_id] = found
                return found
        return None

    def _missing(self, rubric_id: str) -> str:
        if not self.has_ids:
            return f"rubric id {rubric_id!r} given, but the config names no 'rubric_dir' or 'rubrics'"
        where = f" or in {self._dir}" if self._dir is not None else ""
        return f"no rubric with id {rubric_id!r} (looked in {len(self._library)} named rubric(s){where})"


def _memo_key(label: Any, ids: bool) -> Any:
    if isinstance(label, str):
        return (ids, label)
    try:
        return (ids, json.dumps(label, sort_keys=True, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        return None


def _yaml(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise ValueError("the rubric text is nested too deeply") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML: {str(exc).splitlines()[0]}") from None
