"""Whether the judge answers, for ``GET /health``: one cheap request per judge endpoint, remembered a few seconds.

A judge endpoint (``base_url``) is reachable when ``GET {base_url}/models`` gets any HTTP answer
(even 401 or 404: something is listening); a refused connection or no answer within the timeout is
unreachable. Judges without an endpoint (a provider model string, an in-process model) are not
probed: their reachability is ``None``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from ..util.redaction import redact

__all__ = ["JudgeProbe"]


class JudgeProbe:
    """``await probe.status()`` -> ``{"judge_reachable": True | False | None, "judge_error": str | None}``."""

    def __init__(self, judge_configs: Sequence[Any], *, ttl_s: float = 5.0, timeout_s: float = 2.0):
        urls: list[str] = []
        for cfg in judge_configs:
            base = getattr(cfg, "base_url", None)
            for url in (base,) if isinstance(base, str) else tuple(base or ()):
                if url.rstrip("/") not in urls:
                    urls.append(url.rstrip("/"))
        self.urls, self.ttl_s, self.timeout_s = urls, ttl_s, timeout_s
        self._last: tuple[float, dict[str, Any]] | None = None
        self._session: Any = None
        self._lock = asyncio.Lock()

    async def status(self) -> dict[str, Any]:
        if not self.urls:
            return {"judge_reachable": None, "judge_error": None}
        async with self._lock:  # concurrent health checks share one probe
            if self._last is None or time.monotonic() - self._last[0] > self.ttl_s:
                errors = await asyncio.gather(*(self._probe(url) for url in self.urls))
                failed = [e for e in errors if e is not None]
                self._last = (time.monotonic(), {"judge_reachable": not failed,
                                                 "judge_error": failed[0] if failed else None})
            return dict(self._last[1])

    async def _probe(self, url: str) -> str | None:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        try:
            async with self._session.get(url + "/models") as resp:
                await resp.read()
            return None
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            return redact(f"{url}: {type(exc).__name__}: {exc}".rstrip(": "), limit=300)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
