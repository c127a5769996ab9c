"""What gets judged: a response to a prompt (a string or a conversation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Item", "Message", "as_messages", "response_text", "unencodable_at", "valid_text"]

Message = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Item:
    """One response to judge. ``prompt`` is a string, a list of chat messages, or None."""

    response: str
    prompt: str | Sequence[Message] | None = None
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.id, str) and (at := unencodable_at(self.id)) is not None:
            raise ValueError(f"field 'id' is not valid text (a lone surrogate at character {at})")
        response = self.response if isinstance(self.response, str) else response_text(self.response)
        object.__setattr__(self, "response", valid_text(response))
        if isinstance(self.prompt, str):
            object.__setattr__(self, "prompt", valid_text(self.prompt))
        elif self.prompt is not None:
            object.__setattr__(self, "prompt", tuple(as_messages(self.prompt)))


def unencodable_at(text: str) -> int | None:
    """Where ``text`` first holds what UTF-8 cannot carry (a lone surrogate, valid in JSON), or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def valid_text(text: str) -> str:
    """``text`` with what UTF-8 cannot carry replaced by U+FFFD (a surrogate pair is joined)."""
    if unencodable_at(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def as_messages(conversation: Sequence[Message] | str) -> list[dict[str, str]]:
    """Normalise a conversation to ``[{"role", "content"}]``, validating each turn."""
    if isinstance(conversation, str):
        return [{"role": "user", "content": conversation}]
    out = []
    for i, m in enumerate(conversation):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise ValueError(f"prompt[{i}]: a message needs 'role' and 'content', got {m!r:.80}")
        out.append({"role": valid_text(str(m["role"])),
                    "content": valid_text(_content_text(m["content"], f"prompt[{i}].content"))})
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
