"""Reading free-text answers of generators and judges: reasoning blocks dropped, JSON found in chatter."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from ..util.think import strip_think

__all__ = ["json_values"]

_DECODER = json.JSONDecoder()


def json_values(text: str, opening: str = "[{") -> Iterator[Any]:
    """Every JSON value that parses from a position of ``text`` holding one of ``opening``, in order
    (code fences and prose around them are skipped; nested values are visited too)."""
    cleaned = strip_think(text)
    for m in re.finditer(f"[{re.escape(opening)}]", cleaned):
        try:
            yield _DECODER.raw_decode(cleaned, m.start())[0]
        except json.JSONDecodeError:
            continue
