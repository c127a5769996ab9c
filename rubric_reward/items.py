"""What gets judged: a response to a prompt (a string or a conversation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Conversation", "Item", "Message", "as_messages", "prompt_key", "response_text", "unencodable_at",
           "valid_text"]

Message = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Item:
    """One response to judge. ``prompt`` is a string, a list of chat messages, or None.

    ``group`` says which responses a ``mode: group`` judge judges together: those with the same
    rubric, prompt and group label (None: the prompt alone decides; with no prompt either, the item
    is judged alone). Other judges ignore it.
    """

    response: str
    prompt: str | Sequence[Message] | None = None
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    group: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.id, str) and (at := unencodable_at(self.id)) is not None:
            raise ValueError(f"field 'id' is not valid text (a lone surrogate at character {at})")
        response = self.response if isinstance(self.response, str) else response_text(self.response)
        object.__setattr__(self, "response", valid_text(response))
        if isinstance(self.prompt, str):
            object.__setattr__(self, "prompt", valid_text(self.prompt))
        elif self.prompt is not None and not isinstance(self.prompt, Conversation):
            object.__setattr__(self, "prompt", Conversation(as_messages(self.prompt)))


class Conversation(tuple):
    """Chat messages already normalised by :func:`as_messages` (so they are not normalised again)."""

    __slots__ = ()


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
    if isinstance(conversation, Conversation):
        return list(conversation)
    if isinstance(conversation, Mapping | bytes) or not isinstance(conversation, Sequence):
        raise ValueError(f"must be a string or a list of chat messages, got {type(conversation).__name__}")
    out = []
    for i, m in enumerate(conversation):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise ValueError(f"[{i}]: a message needs 'role' and 'content', got {m!r:.80}")
        out.append({"role": valid_text(str(m["role"])),
                    "content": valid_text(_content_text(m["content"], f"[{i}].content"))})
    return out


def prompt_key(prompt: Any) -> str | None:
    """The one answer to "are two prompts the same", on every path (the reward engine's normalisation, the
    grader's identical pairs and groups, a group judge's seeds, the TRL plugin's metrics and length penalty):
    a text prompt is itself; a conversation is the text of its messages as :func:`as_messages` normalises
    them (role and content, what a judge sees), so equal copies, a list and its :class:`Conversation`, and
    messages whose dicts differ only in key order or extra keys are the same prompt; None is no prompt. A
    conversation that does not normalise (a malformed one, which is unscored anyway) keys by its ``repr``."""
    if prompt is None or isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Conversation):
        return repr(prompt)
    plain = _plain_messages(prompt)  # the common case, keyed without normalising each copy
    if plain is not None:
        return repr(plain)
    try:
        return repr(Conversation(as_messages(prompt)))
    except (ValueError, TypeError):
        return repr(prompt)


def _plain_messages(prompt: Any) -> tuple[dict[str, str], ...] | None:
    """What :func:`as_messages` makes of ``prompt`` when every message has text role and content that UTF-8
    carries (it would change nothing); None otherwise."""
    if isinstance(prompt, Mapping | bytes) or not isinstance(prompt, Sequence):
        return None
    out = []
    for m in prompt:
        if not isinstance(m, Mapping):
            return None
        role, content = m.get("role"), m.get("content")
        if not (isinstance(role, str) and isinstance(content, str)) or unencodable_at(role) is not None \
                or unencodable_at(content) is not None:
            return None
        out.append({"role": role, "content": content})
    return tuple(out)


def response_text(response: Any) -> str:
    """The text of a completion: a string, an assistant message, or TRL's conversational
    ``[{"role": "assistant", "content": ...}]`` (assistant turns joined). Anything else (bytes, numbers,
    nested lists, a list holding no assistant turn) raises ValueError saying what it got."""
    if isinstance(response, str):
        return response
    if isinstance(response, Mapping):
        response = [response]
    if isinstance(response, bytes) or not isinstance(response, Sequence):
        raise ValueError(f"must be a string or assistant messages, got {type(response).__name__}")
    texts, roles = [], []
    for i, m in enumerate(response):
        if not isinstance(m, Mapping) or "content" not in m:
            raise ValueError(f"[{i}]: a message needs 'role' and 'content', got {type(m).__name__} {m!r:.60}")
        role = m.get("role", "assistant")
        roles.append(str(role))
        if role == "assistant":
            texts.append(_content_text(m["content"], f"[{i}].content"))
    if not texts:
        raise ValueError(f"holds no assistant turn (roles: {', '.join(roles) or 'none'})")
    return "\n".join(texts)


def _content_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes):  # OpenAI content parts
        if not all(isinstance(p, Mapping) for p in content):
            raise ValueError(f"{where}: content parts must be objects, got {content!r:.60}")
        return "".join(str(p.get("text") or "") for p in content)
    raise ValueError(f"{where}: expected text, got {type(content).__name__}")
