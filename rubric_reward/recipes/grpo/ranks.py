"""Which process speaks: under ``accelerate launch`` only the main rank prints and writes reports."""

from __future__ import annotations

import os

__all__ = ["is_main_process", "say"]


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def say(text: str) -> None:
    if is_main_process():
        print(text, flush=True)
