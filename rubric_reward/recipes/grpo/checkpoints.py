"""Which saved checkpoints a GRPO run may resume from or score: a kill during a save leaves a half-written one.

The trainer writes a checkpoint in place (``checkpoint-N/``): the weights first, then the optimizer, scheduler
and RNG state, and ``trainer_state.json`` last. A checkpoint is **complete** when ``trainer_state.json`` parses
(a mapping with an integer ``global_step``) and its weights exist and parse (an adapter's or a model's
``.safetensors`` header and size, a ``.bin`` that is a whole archive, or a sharded index whose shards exist);
anything less is a run killed mid-save, which resuming or scoring would trip over at every rerun.

:func:`resume_checkpoint` is the one reading of ``resume_from_checkpoint`` (the pre-flight check and the run
both call it): ``true``/``last`` is the newest *complete* checkpoint (the incomplete ones newer than it are
named, and skipped); a path must be a complete checkpoint. No heavy imports here.
"""

from __future__ import annotations

import json
import re
import struct
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["ResumeError", "adapter_sha256", "complete_checkpoints", "incomplete_reason", "numbered_checkpoints",
           "resume_checkpoint", "trained_steps"]

STATE_FILE = "trainer_state.json"
# weight files a checkpoint may hold (an adapter under LoRA, the model otherwise), most usual first
_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin", "model.safetensors", "pytorch_model.bin",
            "model.safetensors.index.json", "pytorch_model.bin.index.json")
_NAME = re.compile(r"^checkpoint-(\d+)$")
_LAST = ("true", "last")


class ResumeError(ValueError):
    """``resume_from_checkpoint`` names a checkpoint that cannot be resumed (one line, naming it and why)."""


def numbered_checkpoints(output_dir: str | Path) -> list[tuple[int, Path]]:
    """Every ``checkpoint-N`` folder of ``output_dir`` as ``(N, path)``, oldest first (complete or not)."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = []
    for folder in root.iterdir():
        m = _NAME.match(folder.name)
        if m and folder.is_dir():
            found.append((int(m.group(1)), folder))
    return sorted(found)


def _state(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    path = folder / STATE_FILE
    if not path.is_file():
        return None, f"no {STATE_FILE}"
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None, f"{STATE_FILE} is not valid JSON (cut off mid-write)"
    if not isinstance(state, dict) or not isinstance(state.get("global_step"), int):
        return None, f"{STATE_FILE} has no integer global_step"
    return state, None


def _weights_problem(path: Path) -> str | None:
    """Why the weight file ``path`` is unusable (None when it parses)."""
    try:
        size = path.stat().st_size
        if path.name.endswith(".safetensors"):
            with path.open("rb") as fh:
                head = fh.read(8)
                if len(head) < 8:
                    return f"{path.name} is cut off"
                (n,) = struct.unpack("<Q", head)
                if n > size - 8:
                    return f"{path.name} is cut off"
                header = json.loads(fh.read(n).decode("utf-8"))
            ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
            if 8 + n + max(ends, default=0) > size:
                return f"{path.name} is cut off"
            return None
        if path.name.endswith(".index.json"):
            index = json.loads(path.read_text(encoding="utf-8"))
            missing = sorted({s for s in index["weight_map"].values() if not (path.parent / s).is_file()})
            return f"{path.name} names missing shard {missing[0]}" if missing else None
        if not zipfile.is_zipfile(path):  # torch.save writes a zip archive: a cut one has no central directory
            return f"{path.name} is cut off"
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, struct.error):
        return f"{path.name} does not parse"


def incomplete_reason(folder: str | Path) -> str | None:
    """Why the checkpoint ``folder`` is not complete (see the module docstring); None when it is."""
    folder = Path(folder)
    if not folder.is_dir():
        return "no such folder"
    weights = [folder / name for name in _WEIGHTS if (folder / name).is_file()]
    if not weights:
        return "no weights (adapter_model.* or model.*)"
    for path in weights:
        problem = _weights_problem(path)
        if problem is not None:
            return problem
    _, problem = _state(folder)
    return problem


def complete_checkpoints(output_dir: str | Path) -> tuple[list[tuple[int, Path]], list[tuple[Path, str]]]:
    """``(complete, incomplete)``: the complete checkpoints as ``(N, path)``, oldest first, and the
    incomplete ones as ``(path, why)``."""
    complete, incomplete = [], []
    for step, folder in numbered_checkpoints(output_dir):
        why = incomplete_reason(folder)
        if why is None:
            complete.append((step, folder))
        else:
            incomplete.append((folder, why))
    return complete, incomplete


def trained_steps(checkpoint: str | Path) -> int:
    """The optimizer steps behind a complete checkpoint (its ``trainer_state.json`` ``global_step``)."""
    state, problem = _state(Path(checkpoint))
    if state is None:
        raise ResumeError(f"{checkpoint}: {problem}")
    return state["global_step"]


def resume_checkpoint(value: Any, output_dir: str | Path) -> tuple[str | None, list[str]]:
    """The checkpoint to resume from for ``resume_from_checkpoint`` = ``value``, and notes to print.

    None/empty/false: none. ``true``/``last``: the newest complete checkpoint in ``output_dir`` (None when there
    is none: training starts from step 0), the incomplete ones newer than it named in the notes. A path: that
    checkpoint, which must be complete (:class:`ResumeError` otherwise, naming the newest complete one).
    """
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in ("", "false", "none")):
        return None, []
    complete, incomplete = complete_checkpoints(output_dir)
    if value is True or (isinstance(value, str) and value.strip().lower() in _LAST):
        chosen = complete[-1] if complete else None
        newest = chosen[0] if chosen else -1
        notes = [f"skipped incomplete {folder} ({why}): a save cut off by a kill" for folder, why in incomplete
                 if _NAME.match(folder.name) and int(folder.name.split("-")[1]) > newest]
        if chosen is None:
            if notes:
                notes.append(f"no complete checkpoint in {output_dir}: training starts from step 0")
            return None, notes
        return str(chosen[1]), [*notes, f"resuming from {chosen[1]} (step {trained_steps(chosen[1])})"]
    why = incomplete_reason(value)
    if why is not None:
        hint = f"; the newest complete one is {complete[-1][1]}" if complete else ""
        raise ResumeError(f"{value} cannot be resumed: {why}{hint} (resume_from_checkpoint: true picks the newest "
                          "complete checkpoint)")
    return str(value), []


def adapter_sha256(checkpoint: str | Path | None) -> str | None:
    """SHA-256 of a checkpoint's adapter weights (None for no checkpoint, or one without adapter weights)."""
    if checkpoint is None:
        return None
    import hashlib

    for name in ("adapter_model.safetensors", "adapter_model.bin"):
        path = Path(checkpoint) / name
        if path.is_file():
            return hashlib.sha256(path.read_bytes()).hexdigest()
    return None
