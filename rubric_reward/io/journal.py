"""``results.jsonl``: an append-only journal of item results that survives being killed.

While a run is in progress every finished item is appended as one JSON line (a single ``write`` of
the whole line, newline included), so a crash can only ever leave a partial *last* line. Readers
take the **last entry per key**; a final segment without its newline is a torn write and is dropped
(``repair`` truncates it away before appending again). When a run ends, ``compact`` rewrites the
file atomically (temporary file, fsync, rename) as the final view: exactly one line per item, in
dataset order. A crash at any moment therefore leaves either the old file or the new one.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["Journal", "write_atomic"]

log = logging.getLogger(__name__)

Entry = dict[str, Any]


def write_atomic(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (temporary file in the same folder, fsync, rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # not supported on this platform
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Journal:
    """One ``results.jsonl`` file. Every entry is a JSON object with a ``key``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fd: int | None = None
        self._reported: set[tuple[str, int]] = set()  # damage already logged (each read sees it again)

    def _report(self, what: tuple[str, int], message: str, *args: Any) -> None:
        if what not in self._reported:
            self._reported.add(what)
            log.warning(message, self.path, *args)

    # ------------------------------------------------------------------ reading
    def read(self, *, repair: bool = False) -> list[Entry]:
        """Every complete entry, in file order. With ``repair``, a torn last line is cut off the file."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1  # everything after the last newline is a torn write
        if end < len(data):
            self._report(("torn", end), "%s: ignoring a partial last line (%d bytes) left by an interrupted run",
                         len(data) - end)
            if repair:
                with open(self.path, "r+b") as f:
                    f.truncate(end)
                    f.flush()
                    os.fsync(f.fileno())
        entries = []
        for n, line in enumerate(data[:end].split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                self._report(("line", n), "%s: line %d is not valid JSON; ignored", n)
                continue
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                entries.append(entry)
        return entries

    def latest(self, *, repair: bool = False) -> dict[str, Entry]:
        """The last entry for each key (insertion order: first appearance)."""
        out: dict[str, Entry] = {}
        for entry in self.read(repair=repair):
            out[entry["key"]] = entry
        return out

    # ------------------------------------------------------------------ writing
    def append(self, entry: Mapping[str, Any]) -> None:
        """Append one entry as one line with a single write (O_APPEND)."""
        line = (json.dumps(entry, ensure_ascii=False, allow_nan=False) + "\n").encode()
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        view = memoryview(line)
        while view:  # a regular-file write is complete in practice; loop in case it is not
            written = os.write(self._fd, view)
            view = view[written:]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def compact(self, keys: Iterable[str], update: Callable[[Entry], Entry] | None = None) -> int:
        """Rewrite atomically as one line per key in ``keys`` order (the last entry for each key;
        keys without an entry are left out, entries for other keys dropped). Returns the line count."""
        self.close()
        latest = self.latest()
        lines = []
        for key in keys:
            entry = latest.get(key)
            if entry is not None:
                entry = update(entry) if update is not None else entry
                lines.append(json.dumps(entry, ensure_ascii=False, allow_nan=False))
        write_atomic(self.path, "".join(line + "\n" for line in lines))
        self._reported.clear()
        return len(lines)
