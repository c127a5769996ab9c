"""The one think-block rule: the answer in a reasoning model's output (:func:`strip_think`).

Every path that reads model output (judge replies, rewards, rollouts, generated rubrics) calls this.
"""

from __future__ import annotations

__all__ = ["strip_think"]


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
