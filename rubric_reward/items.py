"""What gets judged: a response to a prompt (a string or a conversation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Item", "Message", "as_messages", "response_text"]

Message = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Item:
    """One response to judge. ``prompt`` is a string, a list of chat messages, or None."""

    response: str
    prompt: str | Sequence[Message] | None = None
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.response, str):
            object.__setattr__(self, "response", response_text(self.response))
        if self.prompt is not None and not isinstance(self.prompt, str):
            object.__setattr__(self, "prompt", tuple(as_messages(self.prompt)))


def as_messages(conversation: Sequence[Message] | str) -> list[dict[str, str]]:
    """Normalise a conversation to ``[{"role", "content"}]``, validating each turn."""
    if isinstance(conversation, str):
        return [{"role": "user", "content": conversation}]
    out = []
    for i, m in enumerate(conversation):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise ValueError(f"prompt[{i}]: a message needs 'role' and 'content', got {m!r:.80}")
        out.append({"role": str(m["role"]), "content": _content_text(m["content"], f"prompt[{i}].content")})
    return out


def response_text(response: Any) -> str:
    """The text of a completion: a string, or TRL's conversational ``[{"role": "assistant", ...}]``."""
    if isinstance(response, str):
        return response
    if isinstance(response, Mapping) and "content" in response:
        return _content_text(response["content"], "response.content")
    if isinstance(response, Sequence):
        turns = [m for m in response if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant"]
        return "\n".join(_content_text(m.get("content", ""), "response.content") for m in turns)
    raise ValueError(f"response must be a string or assistant messages, got {type(response).__name__}")


def _content_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    raise ValueError(f"{where}: expected text, got {type(content).__name__}")
