"""Fast path: OpenAI-compatible chat completions over pooled keep-alive connections.

For ``vllm serve``, local servers and gateways. Attempts spread over the configured base URLs
(replicas of one model, see :mod:`.replicas`). Retries, limits and deduplication live in the
transport layer (:mod:`.transport`), not here: ``complete`` makes exactly one HTTP attempt.

Hot-path choices: the request body is serialised once to bytes from a prebuilt template (memoised
escaped prefixes spliced in), the response is read as bytes and decoded with one ``json.loads``, one
aiohttp session per event loop. aiohttp does the HTTP: framing (an answer with bytes beyond its framing
fails its call and closes the connection, so it never becomes another request's answer), keep-alive,
and the per-attempt timeout.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from collections.abc import Callable
from typing import Any

from ..util.loop import LoopSessions
from ..util.redaction import redact
from ..results import ErrorKind, JudgeError, Usage
from .base import ChatReply, ChatRequest, TokenLogprob
from .config import JudgeConfig
from .pricing import Pricing
from .replicas import Replicas, affinity_hash, all_busy_reply, usable
from .retry import parse_retry_after

__all__ = ["OpenAIHTTPBackend", "classify_status", "parse_chat_completion", "redact", "request_fields"]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_escape = json.encoder.encode_basestring  # what _dumps writes for one string: '"' + escaped + '"'
# stands in for the messages while the rest of a body is encoded; no string of a real body equals it
_SLOT = f"\x00messages-{secrets.token_hex(8)}\x00"
_SLOT_JSON = _escape(_SLOT)


def classify_status(status: int) -> ErrorKind:
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if status == 408:
        return ErrorKind.TIMEOUT
    if status >= 500:
        return ErrorKind.SERVER
    return ErrorKind.CLIENT


def request_fields(config: JudgeConfig, request: ChatRequest) -> dict[str, Any]:
    """The per-request OpenAI chat fields (both the fast path and litellm send exactly these)."""
    fields: dict[str, Any] = {}
    if request.max_tokens:
        fields["max_tokens"] = request.max_tokens
    if config.seed is not None:
        fields["seed"] = config.seed + request.sample_index
    if request.schema is not None and config.structured_output:
        fields["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": request.schema, "strict": True},
        }
    if request.logprobs:
        fields["logprobs"] = True
        fields["top_logprobs"] = request.top_logprobs or config.top_logprobs
    return fields


class OpenAIHTTPBackend:
    """One HTTP attempt per ``complete`` call against an OpenAI-compatible ``/chat/completions``."""

    def __init__(self, config: JudgeConfig):
        if not config.base_urls:
            raise ValueError(f"judge {config.name!r}: the http backend needs 'base_url'")
        self.config = config
        self.name = config.name
        self.replicas = Replicas(
            [f"{u}/chat/completions" for u in config.base_urls], per_replica=config.replica_concurrency,
            failures=config.breaker_failures, cooldown_s=config.breaker_cooldown_s,
            load_factor=config.replica_load_factor,
        )
        self._pricing = Pricing(config)
        self._sessions = LoopSessions(self._new_session)
        if config.api_key_env:
            config.require_key()
        self._key = config.api_key()
        self._headers = {"Content-Type": "application/json"}
        if self._key:
            if any("@" in u.split("/", 3)[2] for u in config.base_urls if u.count("/") >= 2):
                raise ValueError(f"judge {config.name!r}: base_url carries credentials (user:password@) and "
                                 f"api_key_env sets a bearer key; use one of them")
            self._headers["Authorization"] = f"Bearer {self._key}"
        c = config
        template: dict[str, Any] = {"model": c.model, "temperature": c.temperature, "max_tokens": c.max_tokens}
        if c.top_p is not None:
            template["top_p"] = c.top_p
        self._template = template
        self._extra = dict(c.extra_body)
        self._escaped: dict[str, str] = {}  # message text -> its escaped JSON (system prompts)
        self._escaped_heads: dict[str, str] = {}  # shared prefix -> its escaped JSON without the closing quote
        self._timeouts: dict[float, Any] = {}  # seconds -> aiohttp.ClientTimeout

    def __repr__(self) -> str:
        return f"OpenAIHTTPBackend({self.name!r}, urls={self.config.base_urls!r})"

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body for ``request`` (the config's ``extra_body`` applied last)."""
        c = self.config
        body = self._template.copy()
        body["messages"] = request.messages
        body.update(request_fields(c, request))
        if self._extra:
            body.update(self._extra)
        return body

    def encode(self, request: ChatRequest) -> bytes:
        """The body of ``request`` as sent: exactly ``json.dumps`` of :meth:`body` (compact, UTF-8).

        One response's calls share the system prompt and the prefix ``request.affinity`` of the user
        message; their escaped JSON is memoised, so each call escapes only its own tail.
        """
        body = self.body(request)
        messages = self._messages_json(request) if body.get("messages") is request.messages else None
        if messages is None:
            return _dumps(body).encode()
        body["messages"] = _SLOT
        return _dumps(body).replace(_SLOT_JSON, messages, 1).encode()

    def _messages_json(self, request: ChatRequest) -> str | None:
        """``request.messages`` as ``_dumps`` writes them, from memoised pieces; None for other shapes."""
        memo, heads, prefix, parts = self._escaped, self._escaped_heads, request.affinity, []
        for m in request.messages:
            if type(m) is not dict or len(m) != 2 or tuple(m) != ("role", "content"):
                return None
            role, content = m["role"], m["content"]
            if type(role) is not str or type(content) is not str:
                return None
            if prefix and len(content) > len(prefix) and content.startswith(prefix):
                head = heads.get(prefix)
                if head is None:
                    head = heads[prefix] = _escape(prefix)[:-1]
                text = head + _escape(content[len(prefix):])[1:]
            else:
                text = memo.get(content)
                if text is None:
                    text = memo[content] = _escape(content)
            parts.append(f'{{"role":{_escape(role)},"content":{text}}}')
        if len(memo) > 256 or len(heads) > 256:
            memo.clear()
            heads.clear()
        return "[" + ",".join(parts) + "]"

    def _new_session(self) -> Any:
        import aiohttp

        return aiohttp.ClientSession(
            # the transport holds at most max_concurrency calls in flight: the pool never needs more connections
            # (idle ones are kept alive for aiohttp's keepalive_timeout, 15 s)
            connector=aiohttp.TCPConnector(limit=self.config.max_concurrency, ttl_dns_cache=300),
            headers=self._headers,
            timeout=aiohttp.ClientTimeout(total=self.config.timeout_s),
            skip_auto_headers=("User-Agent", "Accept-Encoding"),
            auto_decompress=False,
        )

    def _timeout(self, seconds: float) -> Any:
        t = self._timeouts.get(seconds)
        if t is None:
            import aiohttp

            if len(self._timeouts) > 256:
                self._timeouts.clear()
            t = self._timeouts[seconds] = aiohttp.ClientTimeout(total=seconds)
        return t

    async def complete(self, request: ChatRequest, timeout_s: float | None = None, *,
                       accept: Callable[[ChatReply], bool] | None = None) -> ChatReply:
        """One attempt. ``accept`` (the caller's vetting, see :meth:`.Transport.complete`): in a pool of
        several replicas, an answer it refuses counts against the replica that gave it."""
        import aiohttp

        timeout = self.config.timeout_s if timeout_s is None else timeout_s
        start = time.perf_counter()
        key = 0 if self.replicas.trivial else affinity_hash(request)
        i = 0 if self.replicas.trivial else await self.replicas.acquire(timeout, key)
        if i is None:
            return all_busy_reply(timeout, start)
        url = self.replicas.urls[i]
        ok: bool | None = None
        refused = False
        try:
            data = self.encode(request)
            async with self._sessions.get().post(url, data=data, timeout=self._timeout(timeout)) as resp:
                status, raw = resp.status, await resp.read()
                if status != 200:
                    kind = classify_status(status)
                    ok = False if kind in (ErrorKind.SERVER, ErrorKind.TIMEOUT) else None
                    msg = redact(raw.decode("utf-8", "replace"), self._key, limit=300)  # redact, then cut
                    return ChatReply(
                        None, JudgeError(kind, f"HTTP {status} from {redact(url)}: {msg}", status),
                        latency_s=time.perf_counter() - start,
                        retry_after_s=parse_retry_after(resp.headers.get("Retry-After")),
                    )
            reply = parse_chat_completion(raw, latency_s=time.perf_counter() - start)
            ok = reply.error is None or reply.error.kind is not ErrorKind.SERVER
            if accept is not None and reply.error is None and not self.replicas.trivial:
                refused = not usable(reply, accept)
        except TimeoutError:
            ok = False
            return ChatReply(None, JudgeError(ErrorKind.TIMEOUT, f"no answer from {redact(url)} within {timeout:.3g}s"),
                             latency_s=time.perf_counter() - start)
        except aiohttp.ClientError as exc:
            ok = False
            return ChatReply(None, JudgeError(ErrorKind.CONNECTION, redact(f"{type(exc).__name__}: {exc}", self._key)),
                             latency_s=time.perf_counter() - start)
        finally:
            self.replicas.release(i, ok, key, refused=refused)
        if reply.usage.prompt_tokens or reply.usage.completion_tokens:
            reply = _with_cost(reply, self._pricing.cost(reply.usage))
        return reply

    async def aclose(self) -> None:
        """Close every session, each on the loop it lives on (a trainer's loop thread included)."""
        await self._sessions.aclose()


def _with_cost(reply: ChatReply, cost: float) -> ChatReply:
    return dataclasses.replace(reply, cost=cost) if cost else reply


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
        if text is not None and not isinstance(text, str):
            raise TypeError(f"message content is a {type(text).__name__}")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return ChatReply(None, JudgeError(ErrorKind.SERVER, f"malformed completion body: {exc!r:.200}"),
                         latency_s=latency_s)
    if finish == "content_filter":
        return ChatReply(text, JudgeError(ErrorKind.CONTENT_FILTER, "the provider filtered the answer"),
                         usage=usage, latency_s=latency_s, finish_reason=finish)
    return ChatReply(text, usage=usage, latency_s=latency_s, logprobs=logprobs, finish_reason=finish)
