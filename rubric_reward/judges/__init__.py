"""Judge clients: configs, backends and the transport to reach them."""

from .base import Backend, ChatReply, ChatRequest, TokenLogprob
from .config import JudgeConfig, load_judges
from .judge import Judge, as_judges, build_backend

__all__ = [
    "Backend", "ChatReply", "ChatRequest", "Judge", "JudgeConfig", "TokenLogprob", "as_judges",
    "build_backend", "load_judges",
]
