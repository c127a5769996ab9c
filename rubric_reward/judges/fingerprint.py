"""Which part of a judge config decides a verdict: the fingerprint that run keys and generation keys hash.

Operational settings (concurrency, rate limits, retries and backoff, deadlines, breakers, prices) and
the key's variable are left out, so raising a rate limit or rotating a key does not re-judge anything.
Which fields those are is declared on JudgeConfig itself (``metadata=OPERATIONAL``), and read here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .config import JudgeConfig, judge_fields

__all__ = ["judge_fingerprint", "plain", "public_judge"]

_OPERATIONAL = judge_fields("nothing")  # never change a verdict: left out of the fingerprint
_SECRET_NAME = re.compile(r"(^|[_-])(api_?key|key|token|secret|password|authorization|auth|bearer)$", re.I)


def plain(obj: Any) -> Any:
    """``obj`` as plain JSON values (anything else becomes its ``str``)."""
    return json.loads(json.dumps(obj, default=str))


def _scrub(obj: Any) -> Any:
    """Redact values under secret-looking names (a token in ``extra_body``, say)."""
    if isinstance(obj, Mapping):
        return {k: "<redacted>" if _SECRET_NAME.search(str(k)) else _scrub(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_scrub(v) for v in obj]
    return obj


def public_judge(config: JudgeConfig) -> dict[str, Any]:
    """The whole judge config, JSON-able and secret-free (for manifests)."""
    d = plain(config.to_dict())
    d["extra_body"] = _scrub(d.get("extra_body") or {})
    return d


def judge_fingerprint(config: JudgeConfig) -> dict[str, Any]:
    """The verdict-relevant part of a judge config (no secrets, no operational settings)."""
    d = {k: v for k, v in plain(config.to_dict()).items() if k not in _OPERATIONAL}
    d["backend"] = config.resolved_backend()
    return d
