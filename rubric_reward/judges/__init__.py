"""Judge clients: configs, backends and the transport to reach them."""

from .base import Backend, ChatReply, ChatRequest, TokenLogprob
from .cache import SQLiteCache
from .config import JudgeConfig, load_judges
from .judge import Judge, as_judges, build_backend
from .retry import RetryPolicy
from .transport import Transport, batch_scope

__all__ = [
    "Backend", "ChatReply", "ChatRequest", "Judge", "JudgeConfig", "RetryPolicy", "SQLiteCache", "TokenLogprob",
    "Transport", "as_judges", "batch_scope", "build_backend", "load_judges",
]
