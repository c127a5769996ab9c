"""Model output made judgeable: reasoning removed (:func:`strip_think`, the one rule every path uses),
OpenRLHF queries split into prompt and response, chat templates read back into messages, trailing
special tokens removed. Pure functions of text."""

from __future__ import annotations

import re

__all__ = ["chat_text_to_prompt", "openrlhf_sample", "split_query", "strip_special_tail", "strip_think"]

# End-of-turn / padding tokens that decoding "with special tokens" leaves after a response.
_SPECIAL_LAST = re.compile(r"(?:<\|[A-Za-z0-9_]+\|>|</s>|<eos>|<pad>|<end_of_turn>|\[PAD\])$")
_SPECIAL_ANY = re.compile(r"<\|[A-Za-z0-9_]+\|>|</?s>|<eos>|<pad>|<bos>|<start_of_turn>|<end_of_turn>")
_CHATML = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|\Z)", re.S)
_LLAMA3 = re.compile(r"<\|start_header_id\|>(\w+)<\|end_header_id\|>\n\n(.*?)(?:<\|eot_id\|>|\Z)", re.S)


def strip_think(text: str) -> str:
    """The answer in a reasoning model's output: the text after the last ``</think>``.

    Chat templates that open ``<think>`` in the generation prompt (Qwen3) give completions that hold
    only the closing tag, so ``reasoning</think>answer`` and ``<think>reasoning</think>answer`` both
    give ``answer``. A ``<think>`` that no ``</think>`` follows (generation stopped while reasoning)
    leaves no answer: ``""``. Text with neither tag comes back unchanged; an answer cut from around
    a tag is stripped of surrounding whitespace.
    """
    if "think>" not in text:
        return text
    answer = text.rsplit("</think>", 1)[-1]
    return "" if "<think>" in answer else answer.strip()


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

    The prompt is a prefix of the query; tokenizers may add a BOS token in front or normalise the
    prompt's edges, so the prompt is also looked for inside the query. None when it is not found.
    """
    if query.startswith(prompt):
        rest = query[len(prompt):]
    else:
        for probe in (prompt, prompt.strip()):
            at = query.find(probe) if probe else -1
            if at >= 0:
                rest = query[at + len(probe):]
                break
        else:
            return None
    return strip_special_tail(rest).strip()


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
