"""One-line notes the commands print for the user (the bundled 135M model's verdicts mean nothing)."""

from __future__ import annotations

from pathlib import Path

from ..io.models import DEFAULT_LOCAL_MODEL

__all__ = ["bundled_model_note"]


def _is_bundled(spec: object) -> bool:
    """Whether a judge / generator spec (model string, JudgeConfig, mapping, judge YAML, list) names the bundled
    model."""
    if isinstance(spec, list | tuple):
        return any(_is_bundled(s) for s in spec)
    if isinstance(spec, dict):
        return _is_bundled(spec.get("model")) or _is_bundled(spec.get("judges"))
    if isinstance(spec, str | Path) and Path(spec).suffix in (".yaml", ".yml", ".json") and Path(spec).is_file():
        try:
            from ..judges.config import load_judges

            return _is_bundled(load_judges(spec))
        except Exception:  # noqa: BLE001 - a broken file is reported where it is used
            return False
    model = getattr(spec, "model", spec)
    return isinstance(model, str) and model.strip().lower() == DEFAULT_LOCAL_MODEL


def bundled_model_note(spec: object, role: str = "judge") -> str | None:
    """One line for the user when ``spec`` (a judge or generator) is the bundled 135M model, else None: its
    verdicts (or rubrics) carry no information about quality, and how to use a real one."""
    if not _is_bundled(spec):
        return None
    how = {"judge": "--judge MODEL --base-url URL, or a judge YAML (docs/judges.md)",
           "eval": "the config's judges: a model behind an endpoint or an API model (docs/judges.md)",
           "generator": "--generator MODEL --base-url URL (docs/generation.md)"}[role]
    who = "generator" if role == "generator" else "judge"
    what = ("what it writes shows the plumbing, not rubrics worth using" if role == "generator" else
            "its verdicts carry no information about quality, so the numbers below mean nothing")
    return (f"note: the {who} is the bundled SmolLM2-135M-Instruct ({DEFAULT_LOCAL_MODEL}); it exercises every "
            f"path offline, but {what}. For results you mean to read, use a real {who} (a 7B+ instruction model "
            f"or an API model): {how}.")
