"""A judge: a config plus the backend that reaches it, behind the transport layer."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from .base import Backend, ChatReply, ChatRequest, ReplyCache
from .config import JudgeConfig, load_judges
from .transport import Transport

__all__ = ["Judge", "as_judges", "build_backend"]


def build_backend(config: JudgeConfig) -> Backend:
    """The backend object for ``config`` (heavy libraries are imported only here, on demand)."""
    kind = config.resolved_backend()
    if kind == "http":
        from .http import OpenAIHTTPBackend

        return OpenAIHTTPBackend(config)
    if kind == "litellm":
        from .litellm_backend import LiteLLMBackend

        return LiteLLMBackend(config)
    if kind == "transformers":
        from .transformers_backend import TransformersBackend

        return TransformersBackend(config)
    if kind == "vllm":
        from .vllm_backend import VLLMBackend

        return VLLMBackend(config)
    raise ValueError(f"judge {config.name!r}: unknown backend {kind!r}")


class Judge:
    """Sends chat requests for one judge model through the transport. ``complete`` never raises.

    ``cache`` (optional) is consulted before any request; limits are shared per endpoint.
    """

    def __init__(self, config: JudgeConfig, backend: Backend | None = None, *, cache: ReplyCache | None = None,
                 dedupe: bool = True):
        self.config = config
        self.backend = backend if backend is not None else build_backend(config)
        self.transport = Transport(config, self.backend, cache=cache, dedupe=dedupe)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def caches(self) -> bool:
        """Whether replies are cached (the grader then vets replies before they are stored)."""
        return self.transport.cache is not None

    @property
    def limiter(self) -> Any:
        """The endpoint limiter this judge's calls take slots of (shared by the judges of one endpoint)."""
        return self.transport.limiter

    def nonce_salt(self) -> bytes | None:
        """The key of this judge's group-mode response ids kept by its reply cache (reruns draw the same ids
        and hit the cache), or None when the cache keeps none (:meth:`~.cache.SQLiteCache.nonce_salt`)."""
        get = getattr(self.transport.cache, "nonce_salt", None)  # an optional part of a ReplyCache
        return get() if callable(get) else None

    def complete(self, request: ChatRequest, *,
                 accept: Callable[[ChatReply], bool] | None = None) -> Coroutine[Any, Any, ChatReply]:
        """Answer ``request`` (awaitable; the transport's own coroutine, no extra layer per call)."""
        return self.transport.complete(request, accept)

    def pool_stats(self) -> dict[str, Any]:
        """The endpoint's cap (this process's calls holding it, whether shared across processes) and, for a
        pool of several base URLs, each replica's calls, in flight, affinity share, spills and failovers."""
        slots = self.transport.limiter.slots
        replicas = getattr(self.backend, "replicas", None)
        return {"judge": self.name, "cap": slots.capacity, "cap_in_use": slots.in_use,
                "cap_shared": self.transport.limiter.shared,
                "replicas": replicas.stats() if replicas is not None and len(replicas.urls) > 1 else []}

    async def aclose(self) -> None:
        await self.backend.aclose()

    def __repr__(self) -> str:
        return f"Judge({self.config.name!r}, backend={type(self.backend).__name__})"


def as_judges(spec: Any, *, base_url: str | None = None, cache: ReplyCache | None = None) -> list[Judge]:
    """Judges from a model string, a JudgeConfig, a Judge, a YAML path, or a list of those.

    ``base_url`` applies to model strings and judge mappings that name none (see :func:`load_judges`).
    """
    if isinstance(spec, Judge):
        return [spec]
    is_list = isinstance(spec, Sequence) and not isinstance(spec, str)
    if is_list and (not spec or any(isinstance(s, Judge) for s in spec)):  # built judges are taken as they are
        return [j for s in spec for j in as_judges(s, base_url=base_url, cache=cache)]
    return [Judge(c, cache=cache) for c in load_judges(spec, base_url=base_url)]
