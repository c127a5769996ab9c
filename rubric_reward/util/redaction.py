"""Remove credentials from text before it is stored or printed (error bodies, exception messages).

Servers, gateways and libraries sometimes echo request headers or keys in their errors. :func:`redact`
replaces, in this order: the secrets it is given, the value of every credential-like environment
variable (``*_API_KEY``, ``*_TOKEN``, ``*SECRET*``, ...), any ``Bearer ...``, ``Authorization``,
``api-key`` or ``x-api-key`` header value, and the ``user:password@`` of a URL. Truncation comes after
redaction, never before, so a key cut in two by a length limit cannot survive in part.
"""

from __future__ import annotations

import os
import re

__all__ = ["MASK", "redact"]

MASK = "[redacted]"
_MIN_SECRET = 8  # shorter environment values are too likely to occur by chance ("true", "1", a port)
_SECRET_ENV = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|ACCESS_KEY)", re.I)
_BEARER = re.compile(r"\b(Bearer|Basic)\s+(?:\[redacted\])*+[^\s\"',;}\]]+", re.I)  # a lone mask stays as it is
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")
_HEADER = re.compile(
    r"""(?P<name>\b(?:x-api-key|api[-_]?key|authorization|x-goog-api-key|proxy-authorization)\b["']?\s*[:=]\s*["']?)"""
    r"""(?P<value>(?!(?:Bearer|Basic)\s)(?:\[redacted\])*+[^\s"',;}\]]+)""",
    re.I,
)


def _env_secrets() -> list[str]:
    return [v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= _MIN_SECRET]


def redact(text: str, *secrets: str | None, limit: int | None = None) -> str:
    """``text`` without credentials, then cut to ``limit`` characters (when given)."""
    if not text:
        return text
    for secret in sorted({s for s in (*secrets, *_env_secrets()) if s}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _HEADER.sub(lambda m: m.group("name") + MASK, text)
    text = _USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "..."
    return text
