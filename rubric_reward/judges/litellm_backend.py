"""litellm backend: any provider model string (``gemini/...``, ``openai/...``, ``anthropic/...``,
``hosted_vllm/...``), one attempt per ``complete`` call.

litellm is imported on first use with the offline cost map (``LITELLM_LOCAL_MODEL_COST_MAP``) and
its debug printing off; its own retries (``num_retries``) and the OpenAI SDK's hidden ones
(``max_retries``) are set to 0 so that the transport's policy is the only retry layer. Exceptions
become :class:`ErrorKind` data, with the API key scrubbed from every message.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..results import ErrorKind, JudgeError, Usage
from .base import ChatReply, ChatRequest, TokenLogprob
from .config import JudgeConfig
from .http import classify_status, redact, request_fields
from .pricing import Pricing
from .replicas import Replicas, affinity_hash, all_busy_reply, usable
from .retry import parse_retry_after

__all__ = ["LiteLLMBackend", "import_litellm"]

_IMPORT_LOCK = threading.Lock()
_CONNECT_FAILURES = ("Cannot connect to host", "Connect call failed", "Connection refused", "ConnectError")


def import_litellm() -> Any:
    """Import litellm quietly and offline (seconds, once per process)."""
    with _IMPORT_LOCK:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True
        litellm.set_verbose = False
        litellm.num_retries = 0
        return litellm


class LiteLLMBackend:
    """One litellm ``acompletion`` per ``complete`` call; base URLs are replicas as in the http path."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        self.name = config.name
        self.litellm = import_litellm()
        if config.api_key_env:
            config.require_key()
        elif not config.base_urls:
            config.require_key(_provider_key_vars(self.litellm, config.model))
        self._key = config.api_key()
        if self._key is None and config.base_urls and not config.model.startswith("hosted_vllm/"):
            self._key = "EMPTY"  # OpenAI-compatible servers need some key client-side; never a real one
        self.replicas = Replicas(list(config.base_urls) or [None], per_replica=config.replica_concurrency,
                                 failures=config.breaker_failures, cooldown_s=config.breaker_cooldown_s,
                                 load_factor=config.replica_load_factor)
        self._pricing = Pricing(config, use_cost_map=False)
        self._map_known = True  # litellm prices this model (until it says otherwise)
        c = config
        kwargs: dict[str, Any] = {
            "model": c.model, "temperature": c.temperature, "max_tokens": c.max_tokens,
            "num_retries": 0, "max_retries": 0,
        }
        if c.top_p is not None:
            kwargs["top_p"] = c.top_p
        if c.extra_body:
            kwargs["extra_body"] = dict(c.extra_body)
        if self._key is not None:
            kwargs["api_key"] = self._key
        self._kwargs = kwargs

    def __repr__(self) -> str:
        return f"LiteLLMBackend({self.name!r}, model={self.config.model!r})"

    def kwargs(self, request: ChatRequest, timeout: float) -> dict[str, Any]:
        return dict(self._kwargs, messages=list(request.messages), timeout=timeout,
                    **request_fields(self.config, request))

    async def complete(self, request: ChatRequest, timeout_s: float | None = None, *,
                       accept: Callable[[ChatReply], bool] | None = None) -> ChatReply:
        """One attempt; ``accept`` as in :meth:`.OpenAIHTTPBackend.complete`."""
        timeout = self.config.timeout_s if timeout_s is None else timeout_s
        start = time.perf_counter()
        key = 0 if self.replicas.trivial else affinity_hash(request)
        i = await self.replicas.acquire(timeout, key)
        if i is None:
            return all_busy_reply(timeout, start)
        kw = self.kwargs(request, timeout)
        url = self.replicas.urls[i]
        if url is not None:
            kw["api_base"] = url
        ok: bool | None = None
        refused = False
        try:
            response = await self.litellm.acompletion(**kw)
            reply = self._reply(response, time.perf_counter() - start)
            ok = reply.error is None or reply.error.kind is not ErrorKind.SERVER
            if accept is not None and reply.error is None and not self.replicas.trivial:
                refused = not usable(reply, accept)
            return reply
        except Exception as exc:  # noqa: BLE001 - every failure becomes data
            error, retry_after = self._error(exc)
            ok = False if error.kind in (ErrorKind.SERVER, ErrorKind.TIMEOUT, ErrorKind.CONNECTION) else None
            return ChatReply(None, error, latency_s=time.perf_counter() - start, retry_after_s=retry_after)
        finally:
            self.replicas.release(i, ok, key, refused=refused)

    async def aclose(self) -> None:
        """litellm owns its HTTP clients; drain and stop its logging worker if it is bound to this loop."""
        # Never litellm's first import: it would fetch the cost map online (a stand-in litellm in tests).
        if "litellm" not in sys.modules:
            return
        try:
            from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER as worker
        except ImportError:
            return
        if getattr(worker, "_bound_loop", None) is asyncio.get_running_loop():
            try:
                await asyncio.wait_for(worker.flush(), 2.0)
            except Exception:  # noqa: BLE001 - best effort at shutdown (TimeoutError included)
                pass
            try:
                await worker.stop(timeout=1.0)
            except Exception:  # noqa: BLE001
                pass

    def _reply(self, response: Any, latency_s: float) -> ChatReply:
        try:
            choice = response.choices[0]
            text = choice.message.content
            finish = choice.finish_reason
            u = getattr(response, "usage", None)
            details = getattr(u, "prompt_tokens_details", None)
            usage = Usage(
                int(getattr(u, "prompt_tokens", 0) or 0),
                int(getattr(u, "completion_tokens", 0) or 0),
                int(getattr(details, "cached_tokens", 0) or 0),
            )
            logprobs = None
            lp = getattr(choice, "logprobs", None)
            content = getattr(lp, "content", None) if lp is not None and not isinstance(lp, dict) else (
                lp.get("content") if isinstance(lp, dict) else None)
            if content:
                logprobs = tuple(
                    TokenLogprob(_get(t, "token"), float(_get(t, "logprob")),
                                 {_get(a, "token"): float(_get(a, "logprob")) for a in _get(t, "top_logprobs") or ()})
                    for t in content
                )
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            return ChatReply(None, JudgeError(ErrorKind.SERVER, f"malformed completion: {exc!r:.200}"),
                             latency_s=latency_s)
        cost = self._cost(response, usage)
        if finish == "content_filter":
            return ChatReply(text, JudgeError(ErrorKind.CONTENT_FILTER, "the provider filtered the answer"),
                             usage=usage, cost=cost, latency_s=latency_s, finish_reason=finish)
        return ChatReply(text, usage=usage, cost=cost, latency_s=latency_s, logprobs=logprobs, finish_reason=finish)

    def _cost(self, response: Any, usage: Usage) -> float:
        if self._pricing.explicit or not self._map_known:
            return self._pricing.cost(usage)
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost")
        if cost is None:
            try:
                cost = self.litellm.completion_cost(completion_response=response)
            except Exception:  # noqa: BLE001 - unmapped model: no price known
                self._map_known = False
                return self._pricing.cost(usage)
        return float(cost or 0.0)

    def _error(self, exc: Exception) -> tuple[JudgeError, float | None]:
        name = type(exc).__name__
        status = getattr(exc, "status_code", None)
        status = status if isinstance(status, int) else None
        if name == "Timeout" or isinstance(exc, TimeoutError) or "Timeout" in name:
            kind = ErrorKind.TIMEOUT
        elif name == "APIConnectionError" or any(m in str(exc) for m in _CONNECT_FAILURES):
            kind = ErrorKind.CONNECTION
        elif name == "ContentPolicyViolationError":
            kind = ErrorKind.CONTENT_FILTER
        elif name == "RateLimitError":
            kind = ErrorKind.RATE_LIMIT
        elif status is not None and status >= 400:
            kind = classify_status(status)
        elif name in ("APIError", "InternalServerError", "ServiceUnavailableError", "BadGatewayError",
                      "JSONDecodeError", "APIResponseValidationError"):
            kind = ErrorKind.SERVER
        else:
            kind = ErrorKind.CLIENT if name.endswith("RequestError") else ErrorKind.SERVER
        message = redact(f"{name}: {exc}", self._key if self._key != "EMPTY" else None, limit=300 + len(name) + 2)
        return JudgeError(kind, message, status), _retry_after(exc)


def _provider_key_vars(litellm: Any, model: str) -> tuple[str, ...]:
    """The key variables litellm would read for ``model`` when none of them is set (else ``()``)."""
    try:
        env = litellm.validate_environment(model=model)
    except Exception:  # noqa: BLE001 - an unknown provider: let the first call say what is wrong
        return ()
    if env.get("keys_in_environment", True):
        return ()
    return tuple(k for k in env.get("missing_keys") or () if "KEY" in k or "TOKEN" in k)


def _get(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def _retry_after(exc: Exception) -> float | None:
    for holder in (getattr(exc, "response", None), exc):
        headers = getattr(holder, "headers", None) or getattr(holder, "litellm_response_headers", None)
        if headers is not None:
            try:
                value = headers.get("retry-after") or headers.get("Retry-After")
            except Exception:  # noqa: BLE001 - odd header containers
                value = None
            if value is not None:
                return parse_retry_after(str(value))
    return None
