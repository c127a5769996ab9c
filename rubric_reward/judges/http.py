"""Fast path: OpenAI-compatible chat completions over one pooled aiohttp session.

For ``vllm serve``, local servers and gateways. Requests are spread round-robin over the configured
base URLs (replicas of one model). Retries, limits and deduplication live in the transport layer
(:mod:`rubric_reward.judges.transport`), not here: this class makes exactly one HTTP attempt.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

from ..results import ErrorKind, JudgeError, Usage
from .base import ChatReply, ChatRequest, TokenLogprob
from .config import JudgeConfig

__all__ = ["OpenAIHTTPBackend", "classify_status"]


def classify_status(status: int) -> ErrorKind:
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if status >= 500:
        return ErrorKind.SERVER
    return ErrorKind.CLIENT


class OpenAIHTTPBackend:
    """One HTTP attempt per ``complete`` call against an OpenAI-compatible ``/chat/completions``."""

    def __init__(self, config: JudgeConfig):
        if not config.base_urls:
            raise ValueError(f"judge {config.name!r}: the http backend needs 'base_url'")
        self.config = config
        self.name = config.name
        self._urls = [f"{u}/chat/completions" for u in config.base_urls]
        self._next_url = itertools.cycle(range(len(self._urls)))
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        key = config.api_key()
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        c = self.config
        body: dict[str, Any] = {
            "model": c.model,
            "messages": list(request.messages),
            "temperature": c.temperature,
            "max_tokens": request.max_tokens or c.max_tokens,
        }
        if c.top_p is not None:
            body["top_p"] = c.top_p
        if c.seed is not None:
            body["seed"] = c.seed + request.sample_index
        if request.schema is not None and c.structured_output:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "schema": request.schema, "strict": True},
            }
        if request.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = request.top_logprobs or c.top_logprobs
        body.update(c.extra_body)
        return body

    async def _get_session(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            import aiohttp

            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers=self._headers,
                json_serialize=json.dumps,
                timeout=aiohttp.ClientTimeout(total=None),
            )
            self._loop = loop
        return self._session

    async def complete(self, request: ChatRequest, url_index: int | None = None) -> ChatReply:
        import aiohttp

        start = time.perf_counter()
        url = self._urls[next(self._next_url) if url_index is None else url_index]
        try:
            session = await self._get_session()
            async with session.post(
                url, json=self._body(request), timeout=aiohttp.ClientTimeout(total=self.config.timeout_s)
            ) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    msg = raw[:300].decode("utf-8", "replace")
                    return ChatReply(
                        None,
                        JudgeError(classify_status(resp.status), f"HTTP {resp.status}: {msg}", resp.status),
                        latency_s=time.perf_counter() - start,
                        retry_after_s=_retry_after(resp.headers.get("Retry-After")),
                    )
        except TimeoutError:
            return ChatReply(None, JudgeError(ErrorKind.TIMEOUT, f"no answer within {self.config.timeout_s}s"),
                             latency_s=time.perf_counter() - start)
        except aiohttp.ClientError as exc:
            return ChatReply(None, JudgeError(ErrorKind.CONNECTION, f"{type(exc).__name__}: {exc}"),
                             latency_s=time.perf_counter() - start)
        return parse_chat_completion(raw, latency_s=time.perf_counter() - start)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # HTTP-date form: let the backoff decide


def parse_chat_completion(raw: bytes | str | dict, latency_s: float = 0.0) -> ChatReply:
    """Turn an OpenAI-style chat completion body into a :class:`ChatReply` (never raises)."""
    try:
        data = raw if isinstance(raw, dict) else json.loads(raw)
        choice = data["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content")
        finish = choice.get("finish_reason")
        u = data.get("usage") or {}
        details = u.get("prompt_tokens_details") or {}
        usage = Usage(
            int(u.get("prompt_tokens") or 0),
            int(u.get("completion_tokens") or 0),
            int(details.get("cached_tokens") or 0),
        )
        logprobs = None
        lp = choice.get("logprobs")
        if lp and lp.get("content"):
            logprobs = tuple(
                TokenLogprob(t["token"], float(t["logprob"]),
                             {a["token"]: float(a["logprob"]) for a in t.get("top_logprobs") or ()})
                for t in lp["content"]
            )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return ChatReply(None, JudgeError(ErrorKind.SERVER, f"malformed completion body: {exc!r:.200}"),
                         latency_s=latency_s)
    if finish == "content_filter":
        return ChatReply(text, JudgeError(ErrorKind.CONTENT_FILTER, "the provider filtered the answer"),
                         usage=usage, latency_s=latency_s, finish_reason=finish)
    return ChatReply(text, usage=usage, latency_s=latency_s, logprobs=logprobs, finish_reason=finish)
