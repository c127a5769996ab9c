"""Read a YAML or JSON file into plain objects, with one-line errors that name the file.

Every way a config or rubric file can be unreadable (missing, a directory, not UTF-8, bad syntax)
becomes a :class:`FileError` (a ``ValueError``) whose message names the file and, for syntax errors,
the line and column, never a multi-line parser dump or a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["FileError", "json_problem", "read_structured"]


class FileError(ValueError):
    """A file could not be read or parsed. The message names the file (and line) on one line."""


def json_problem(exc: json.JSONDecodeError) -> str:
    """The parser's complaint without its position (some end in a dangling "at": "Invalid control
    character '\\n' at"), for a message that gives the position its own way."""
    return exc.msg.removesuffix(" at")


def read_structured(path: str | Path, what: str = "file") -> Any:
    """The parsed content of a ``.json`` file, or of any other file as YAML."""
    path = Path(path)
    if not path.exists():
        raise FileError(f"{path}: no such file ({what})")
    if path.is_dir():
        raise FileError(f"{path}: is a directory, not a {what}")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileError(f"{path}: not UTF-8 text (byte {exc.start} is 0x{exc.object[exc.start]:02x})") from None
    except OSError as exc:
        raise FileError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise FileError(f"{path}: line {exc.lineno}, column {exc.colno}: not valid JSON: {json_problem(exc)}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FileError(f"{path}: {where}not valid YAML: {problem}") from None
