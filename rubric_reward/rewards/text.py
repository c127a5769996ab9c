"""Model output made judgeable: OpenRLHF queries split into prompt and response, chat templates read back
into messages, trailing special tokens removed. Pure functions of text (the think-block rule is
:func:`rubric_reward.util.think.strip_think`)."""

from __future__ import annotations

import re

__all__ = ["chat_text_to_prompt", "openrlhf_sample", "split_query", "strip_special_tail"]

# End-of-turn / padding tokens that decoding "with special tokens" leaves after a response.
_SPECIAL_LAST = re.compile(r"(?:<\|[A-Za-z0-9_]+\|>|</s>|<eos>|<pad>|<end_of_turn>|\[PAD\])$")
_SPECIAL_ANY = re.compile(r"<\|[A-Za-z0-9_]+\|>|</?s>|<eos>|<pad>|<bos>|<start_of_turn>|<end_of_turn>")
_CHATML = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|\Z)", re.S)
_LLAMA3 = re.compile(r"<\|start_header_id\|>(\w+)<\|end_header_id\|>\n\n(.*?)(?:<\|eot_id\|>|\Z)", re.S)


def strip_special_tail(text: str) -> str:
    """Remove end-of-turn / padding tokens (``<|im_end|>``, ``</s>``, ...) after a response."""
    text = text.rstrip()
    while True:  # one token at a time from the end: a short window each, whatever the text's length
        m = _SPECIAL_LAST.search(text[-64:])
        if m is None:
            return text
        text = text[: len(text) - (len(text[-64:]) - m.start())].rstrip()


def split_query(query: str, prompt: str) -> str | None:
    """The response inside an OpenRLHF ``query`` (prompt + response, decoded with special tokens).

    The query normally holds the whole prompt (a BOS token in front or normalised edges are
    tolerated). OpenRLHF cuts prompts that are too long before generating, but still sends the full
    prompt string: v0.11 cuts tokens from the left (the query starts inside the prompt), v0.9's
    tokenizer from the right (the prompt's end is missing). The response is what follows the longest
    suffix (left cut) or prefix (right cut) of the prompt that the query starts with, or failing
    those what follows the chat template's assistant marker the prompt ends with. None when the
    query holds no recognisable part of the prompt. (After a right cut, a response that starts with
    the very characters the prompt went on with loses them: the text cannot tell them apart.)
    """
    at = _prompt_end(query, prompt)
    return None if at is None else strip_special_tail(query[at:]).strip()


# chat-template markers that end a generation prompt: the response starts after them
_ASSISTANT_MARKERS = ("<|im_start|>assistant", "<|start_header_id|>assistant<|end_header_id|>",
                      "<start_of_turn>model", "<|assistant|>", "<|Assistant|>", "[/INST]", "Assistant:")
_ANCHOR = 16  # characters of the prompt's end looked for in a query cut from the left
_HEAD_SLACK = 8  # characters before a cut prompt that may be a BOS token or a split multi-byte character


def _prompt_end(query: str, prompt: str) -> int | None:
    """Where the prompt part of ``query`` ends (see :func:`split_query`)."""
    if not prompt.strip():
        return 0
    for probe in (prompt, prompt.strip()):
        at = query.find(probe)
        if at >= 0:
            return at + len(probe)
    left = _left_cut_end(query, prompt)
    if left is not None:
        return left
    common = _common_prefix(query, prompt)
    if common >= min(32, len(prompt) // 2) and prompt[-_ANCHOR:] not in query[common:]:
        while query.startswith("\ufffd", common):  # the bytes of a character the cut split
            common += 1
        return common  # cut from the right: the query is a prefix of the prompt, then the response
    marker = next((m for m in _ASSISTANT_MARKERS if prompt.rstrip().endswith(m)), None)
    if marker is not None and marker in query:
        return query.rfind(marker) + len(marker)
    return None


def _left_cut_end(query: str, prompt: str) -> int | None:
    """The end of the longest suffix of ``prompt`` that ``query`` starts with (up to a short head)."""
    anchor = prompt[-_ANCHOR:]
    start = query.find(anchor)
    while start >= 0:
        end = start + len(anchor)
        matched = _common_suffix(query[:end], prompt)
        head = query[: end - matched]
        if len(head) <= _HEAD_SLACK or not _SPECIAL_ANY.sub("", head).strip("\ufffd \n"):
            return end
        start = query.find(anchor, start + 1)
    return None


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_suffix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i


def chat_text_to_prompt(text: str) -> str | list[dict[str, str]]:
    """A chat-templated prompt (ChatML or Llama 3) as messages; other text with its special tokens removed."""
    for pattern in (_CHATML, _LLAMA3):
        turns = [{"role": role, "content": content.strip()} for role, content in pattern.findall(text)]
        turns = [t for t in turns if t["content"] or t["role"] != "assistant"]
        while turns and turns[-1]["role"] == "assistant" and not turns[-1]["content"]:
            turns.pop()
        if turns:
            return turns
    return _SPECIAL_ANY.sub("", text).strip()


def openrlhf_sample(query: str, prompt: str) -> tuple[str | list[dict[str, str]] | None, str] | None:
    """One OpenRLHF sample as (prompt: text or messages, response); None when ``query`` does not hold ``prompt``."""
    response = split_query(query, prompt)
    if response is None:
        return None
    return chat_text_to_prompt(prompt) or None, response
