"""Rubrics a request names: inline (mapping, criteria list, question list, JSON/YAML text), by id
from ``rubric_dir``, or the config's default. Errors name the request field."""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..rubric import Rubric, RubricError, load_rubric, load_rubrics
from .errors import RequestError

__all__ = ["RubricResolver"]

_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")
_SUFFIXES = (".yaml", ".yml", ".json")


class RubricResolver:
    """Turns whatever a request carries into a :class:`Rubric`; parsed text labels are memoised."""

    def __init__(self, default: Any = None, rubric_dir: str | Path | None = None, *, memo: int = 4096):
        self.default = load_rubric(default) if default is not None else None
        self._dir: Path | None = None
        self._library: dict[str, Rubric] | None = None
        if rubric_dir is not None:
            path = Path(rubric_dir)
            if path.is_dir():
                self._dir = path
            elif path.is_file():
                self._library = load_rubrics(path)
            else:
                raise ValueError(f"serve config: field 'rubric_dir': {path} is neither a folder nor a file")
        self._by_id: dict[str, Rubric] = {}
        self._memo: OrderedDict[str, Rubric] = OrderedDict()
        self._memo_size = memo
        self._lock = threading.Lock()

    @property
    def has_ids(self) -> bool:
        return self._dir is not None or self._library is not None

    # ------------------------------------------------------------------ by id
    def by_id(self, rubric_id: Any, field: str) -> Rubric:
        if not isinstance(rubric_id, str) or not _ID.fullmatch(rubric_id):
            raise RequestError(422, "invalid_field", field,
                               f"a rubric id is letters, digits, '_', '-', '.', got {rubric_id!r:.80}")
        found = self._by_id.get(rubric_id)
        if found is not None:
            return found
        if self._library is not None:
            found = self._library.get(rubric_id)
        elif self._dir is not None:
            for suffix in _SUFFIXES:
                path = self._dir / f"{rubric_id}{suffix}"
                if path.is_file():
                    try:
                        found = load_rubric(path)
                    except RubricError as exc:
                        raise RequestError(422, "invalid_rubric", field, f"rubric {rubric_id!r}: {exc}") from None
                    break
        else:
            raise RequestError(422, "unknown_rubric_id", field,
                               f"rubric id {rubric_id!r} given, but the service has no 'rubric_dir'")
        if found is None:
            raise RequestError(422, "unknown_rubric_id", field, f"no rubric with id {rubric_id!r}")
        self._by_id[rubric_id] = found
        return found

    # ------------------------------------------------------------------ inline
    def inline(self, obj: Any, field: str) -> Rubric:
        """A rubric given in the request: a mapping, a list of criteria/questions, or JSON/YAML text."""
        if isinstance(obj, str):
            return self._memoised(obj, field, allow_id=False)
        return self._parse(obj, field)

    def from_label(self, label: Any, field: str) -> Rubric:
        """A trainer label (OpenRLHF ``labels[i]``, verl ``ground_truth``): inline rubric, question list,
        AdvancedIF ``prompt_metadata`` (``{"rubrics": ...}``), ``{"rubric_id": ...}``, a rubric id, or
        empty for the default rubric."""
        if label is None or (isinstance(label, str) and not label.strip()):
            return self.default_for(field)
        if isinstance(label, str):
            return self._memoised(label, field, allow_id=True)
        return self._parse(label, field)

    def default_for(self, field: str) -> Rubric:
        if self.default is None:
            raise RequestError(422, "missing_field", field, "no rubric given and the service has no default 'rubric'")
        return self.default

    def _memoised(self, text: str, field: str, *, allow_id: bool) -> Rubric:
        key = f"{int(allow_id)}{text}"
        with self._lock:
            hit = self._memo.get(key)
            if hit is not None:
                self._memo.move_to_end(key)
                return hit
        rubric = self._parse_text(text, field, allow_id=allow_id)
        with self._lock:
            self._memo[key] = rubric
            if len(self._memo) > self._memo_size:
                self._memo.popitem(last=False)
        return rubric

    def _parse_text(self, text: str, field: str, *, allow_id: bool) -> Rubric:
        s = text.strip()
        if allow_id and _ID.fullmatch(s) and self.has_ids:
            return self.by_id(s, field)
        obj: Any = None
        if s[:1] in "[{":
            try:
                obj = json.loads(s)
            except json.JSONDecodeError:
                obj = None
        if obj is None:
            import yaml

            try:
                obj = yaml.safe_load(s)
            except yaml.YAMLError as exc:
                raise RequestError(422, "invalid_rubric", field, f"not valid JSON or YAML: {exc}"[:300]) from None
        if not isinstance(obj, Mapping | list):
            if allow_id and _ID.fullmatch(s):
                return self.by_id(s, field)
            raise RequestError(422, "invalid_rubric", field,
                               "expected a rubric (JSON/YAML mapping or list of criteria) or a rubric id")
        return self._parse(obj, field)

    def _parse(self, obj: Any, field: str) -> Rubric:
        if isinstance(obj, Mapping):
            if set(obj) == {"rubric_id"}:
                return self.by_id(obj["rubric_id"], f"{field}.rubric_id")
            if "rubrics" in obj and "criteria" not in obj:  # AdvancedIF prompt_metadata
                questions = obj["rubrics"]
                if isinstance(questions, str):
                    try:
                        questions = json.loads(questions)
                    except json.JSONDecodeError:
                        raise RequestError(422, "invalid_rubric", f"{field}.rubrics",
                                           "a string 'rubrics' must be a JSON list of questions") from None
                obj = questions
        if not isinstance(obj, Mapping) and not (isinstance(obj, Sequence) and not isinstance(obj, str | bytes)):
            raise RequestError(422, "invalid_rubric", field,
                               f"a rubric is a mapping or a list of criteria, got {type(obj).__name__}")
        try:
            return Rubric.from_obj(obj, source=field)
        except RubricError as exc:
            raise RequestError(422, "invalid_rubric", field, str(exc)) from None
