"""Shared helpers for the cache, runner, metrics and report tests (not a conftest on purpose)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

REPO = Path(__file__).resolve().parents[1]

RUBRIC = {
    "name": "toy",
    "criteria": [
        {"name": "accurate", "requirement": "The response is factually accurate.", "weight": 2},
        {"name": "concise", "requirement": "The response is concise.", "weight": 1},
        {
            "name": "tone", "kind": "ordinal", "requirement": "How polite is the response?", "weight": 1,
            "options": [
                {"label": "rude", "value": 0.0}, {"label": "neutral", "value": 0.5}, {"label": "warm", "value": 1.0},
            ],
        },
    ],
}
TONES = ("rude", "neutral", "warm")


def _h(*parts: str) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(parts).encode(), digest_size=4).digest(), "big")


def judge_label(criterion: str, response: str) -> str:
    """The scripted judge's deterministic verdict for one criterion of one response."""
    if criterion == "tone":
        return TONES[_h(criterion, response) % 3]
    return "MET" if _h(criterion, response) % 3 else "UNMET"


def human_label(criterion: str, response: str) -> str:
    """Human labels: the judge's verdict, changed for about one decision in four."""
    label = judge_label(criterion, response)
    if _h("human", criterion, response) % 4:
        return label
    if criterion == "tone":
        return TONES[(TONES.index(label) + 1) % 3]
    return "UNMET" if label == "MET" else "MET"


@contextlib.contextmanager
def serve(judge: ScriptedJudge | None = None, **kw: Any) -> Iterator[JudgeServer]:
    """A loopback judge server whose event loop is closed afterwards (``JudgeServer.stop`` leaves it
    open, and its sockets would otherwise surface as ResourceWarnings in whichever test runs next)."""
    server = JudgeServer(judge or scripted_judge(), **kw).start()
    loop = server._loop
    try:
        yield server
    finally:
        server.stop()
        if loop is not None and not loop.is_running() and not loop.is_closed():
            loop.close()


def scripted_judge() -> ScriptedJudge:
    return ScriptedJudge({name: (lambda n: lambda response, body: judge_label(n, response))(name)
                          for name in ("accurate", "concise", "tone")})


def make_rows(n: int, *, groups: int = 4, prefix: str = "") -> list[dict[str, Any]]:
    """``n`` items of equal length (so every item costs the same), with labels and groups."""
    rows = []
    for i in range(n):
        response = f"{prefix}Answer number {i:04d}: water boils at 100 C at sea level."
        rows.append({
            "id": f"item-{i:04d}",
            "prompt": f"Question {i:04d}: at what temperature does water boil?",
            "response": response,
            "labels": {c: human_label(c, response) for c in ("accurate", "concise", "tone")},
            "group": f"g{i % groups}",
        })
    return rows


def write_jsonl(path: Path, rows: list[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_dataset(tmp: Path, n: int = 12, **kw: Any) -> tuple[Path, Path]:
    """A JSONL dataset and the rubric file; returns (data path, rubric path)."""
    rubric = tmp / "rubric.yaml"
    rubric.write_text(yaml.safe_dump(RUBRIC, sort_keys=False))
    return write_jsonl(tmp / "items.jsonl", make_rows(n, **kw)), rubric


def config_dict(tmp: Path, server: JudgeServer, *, out: str = "run", judge: Mapping[str, Any] | None = None,
                **overrides: Any) -> dict[str, Any]:
    """A plain eval config (YAML-shaped) against ``server``."""
    data, rubric = tmp / "items.jsonl", tmp / "rubric.yaml"
    d: dict[str, Any] = {
        "data": str(data),
        "rubric": str(rubric),
        "judges": [{"model": "scripted", "base_url": server.base_url, "max_retries": 0, **(judge or {})}],
        "out_dir": str(tmp / out),
        "progress": False,
        "report": False,
        "concurrency": 4,
    }
    d.update(overrides)
    return d


def eval_config(tmp: Path, server: JudgeServer, **kw: Any):
    from rubric_reward.evaluation import EvalConfig

    return EvalConfig.from_dict(config_dict(tmp, server, **kw))


def read_results(run_dir: Path) -> list[dict[str, Any]]:
    text = (run_dir / "results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def verdict_view(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    """What must match between two runs: the score and every verdict."""
    verdicts = tuple(
        (v["criterion"], v["label"], v["value"], v["reason"], v["abstained"], v["error"])
        for v in entry["result"]["verdicts"]
    )
    return entry["status"], entry["score"], verdicts
