"""A small client for the reward service (async core, sync facade): the adapters' remote mode.

    client = RewardClient("http://127.0.0.1:8000")          # token from $RUBRIC_REWARD_TOKEN if set
    results = client.score([{"prompt": "...", "response": "...", "rubric_id": "support"}])

Connection errors, 5xx and 503 (a draining server) are retried with backoff; a 4xx raises
:class:`RewardServiceError` at once with the server's code, field and message (a bad request does
not get better by repeating it).
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..util.loop import LoopSessions, SyncFacade

__all__ = ["RewardClient", "RewardServiceError"]


class RewardServiceError(RuntimeError):
    """The service refused a request (4xx) or could not be reached after every retry."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None, field: str | None = None):
        super().__init__(message)
        self.status, self.code, self.field = status, code, field


class RewardClient(SyncFacade):
    """``score`` / ``openrlhf`` / ``health`` (and their ``a``-prefixed async forms) against one service."""

    _loop_name = "reward-client"

    def __init__(self, url: str, *, token: str | None = None, token_env: str | None = "RUBRIC_REWARD_TOKEN",
                 timeout_s: float = 180.0, retries: int = 3, backoff_s: float = 0.5):
        self.url = url.rstrip("/")
        token = token if token is not None else (os.environ.get(token_env) if token_env else None)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        # the factory must not hold the client: the client's finalizer holds the sessions
        self._sessions = LoopSessions(functools.partial(_new_session, self.timeout_s, dict(self._headers)))

    def __repr__(self) -> str:  # never shows the token
        return f"RewardClient({self.url!r}, auth={'on' if self._headers else 'off'})"

    # ------------------------------------------------------------------ async core
    async def _http(self) -> Any:
        return self._own(self._sessions).get()  # closed with the client, on close, collection or exit

    async def _request(self, method: str, path: str, payload: Any = None) -> Any:
        import aiohttp

        session = await self._http()
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                async with session.request(method, self.url + path, json=payload) as resp:
                    text = await resp.text()
                    if resp.status < 400:
                        return _loads(text)
                    err = _loads(text, default={}).get("error") or {}
                    message = err.get("message") or text[:200]
                    if resp.status < 500 and resp.status != 429:
                        where = f" ({err['field']})" if err.get("field") else ""
                        raise RewardServiceError(f"reward service answered {resp.status}{where}: {message}",
                                                 status=resp.status, code=err.get("code"), field=err.get("field"))
                    last = f"HTTP {resp.status}: {message}"
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}"
        raise RewardServiceError(f"reward service at {self.url} unavailable after {self.retries + 1} tries: {last}")

    async def ascore(self, items: Sequence[Mapping[str, Any]], *, rubric: Any = None, rubric_id: str | None = None,
                     deadline_s: float | None = None) -> list[dict[str, Any]]:
        """Score items (``prompt``/``conversation``, ``response``, ``rubric``/``rubric_id``, ``id``)."""
        body: dict[str, Any] = {"items": list(items)}
        for key, value in (("rubric", rubric), ("rubric_id", rubric_id), ("deadline_s", deadline_s)):
            if value is not None:
                body[key] = value
        return (await self._request("POST", "/score", body))["results"]

    async def aopenrlhf(self, query: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None) -> dict:
        return await self._request("POST", "/openrlhf", {"query": list(query), "prompts": list(prompts),
                                                         "labels": None if labels is None else list(labels)})

    async def ahealth(self) -> dict[str, Any]:
        return await self._request("GET", "/health")

    async def aclose(self) -> None:
        await self._sessions.aclose()

    # ------------------------------------------------------------------ sync facade
    def score(self, items: Sequence[Mapping[str, Any]], **kw: Any) -> list[dict[str, Any]]:
        return self._run(self.ascore(items, **kw))

    def openrlhf(self, query: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None) -> dict:
        return self._run(self.aopenrlhf(query, prompts, labels))

    def health(self) -> dict[str, Any]:
        return self._run(self.ahealth())


def _new_session(timeout_s: float, headers: dict[str, str]) -> Any:
    import aiohttp

    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s),
                                 connector=aiohttp.TCPConnector(limit=0), headers=headers)


def _loads(text: str, default: Any = None) -> Any:
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if default is not None:
            return default
        raise RewardServiceError(f"reward service sent a body that is not JSON: {text[:200]!r}") from None
