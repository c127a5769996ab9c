"""The judge gate: qualify the training judge on the base model's completions before training (docs/qualify.md).

With a ``qualify:`` section (:class:`GateConfig`: the fields of
:class:`~rubric_reward.evaluation.qualify.QualifyConfig` plus the ones below), before training the main process

1. samples ``completions`` completions (default: ``num_generations``) of the first ``prompts`` selection prompts
   (default: all) from the base policy at the training temperature, as a GRPO step would;
2. judges them ``repeats`` times with the training reward's judge, scoring and rubrics, and writes the judge card
   to ``<output_dir>/qualify/`` (``card.json``, ``card.md``, ``card.png``, ``qualified_rubric.yaml``);
3. when the card is not ``usable``: ``on_fail: stop`` ends the run with one line naming the failing criteria
   (exit 2, before any training); ``warn`` says so and trains. The summary carries the card either way.

Other processes wait for the main one's card and take the same decision.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...evaluation.qualify.config import QualifyConfig
from .ranks import is_main_process, say

__all__ = ["GATE_DIR", "GateConfig", "GateStop", "add_card_to_summary", "qualify_gate"]

GATE_DIR = "qualify"


class GateStop(ValueError):
    """The gate stops the run: the judge failed under ``on_fail: stop``, or there is nothing to qualify (one line;
    the recipe exits 2 before training)."""


@dataclass(frozen=True)
class GateConfig(QualifyConfig):
    """The GRPO recipe's ``qualify:`` section."""

    on_fail: str = field(default="stop", metadata={"choices": ("stop", "warn"), "help": (
        "when the card is not usable: stop before training (exit 2, one line), or warn and train")})
    prompts: int | None = field(default=None, metadata={"ge": 1, "help": (
        "how many selection prompts the base model answers (default: all)")})
    completions: int | None = field(default=None, metadata={"ge": 2, "help": (
        "completions per prompt, a GRPO group (default: num_generations)")})

    @classmethod
    def coerce(cls, value: Any) -> GateConfig | None:
        """The section as a GateConfig (None: no gate); a bad key or value is one ValueError naming it."""
        from ...io.sections import from_section

        if value is None or value is False or isinstance(value, GateConfig):
            return value or None
        if value is True:
            return cls()
        return from_section(cls, value, "qualify")


def _rows(training: Any, policy: str, reward: Any, gate: GateConfig, selection: list[Any],
          generation: Mapping[str, Any]) -> list:
    from ...evaluation.qualify import QualifyRow
    from ...evaluation.rollouts import generate_responses
    from ...items import Item
    from ...rewards.samples import SampleError

    column = reward.config.rubric_column or "rubric"
    rubrics = reward.source.rows(len(selection), {column: [r.get(column) for r in selection]}, column)
    bad = next((r for r in rubrics if isinstance(r, SampleError)), None)
    if bad is not None:
        raise GateStop(f"qualify: a selection row has no usable rubric: {bad}")
    n = gate.completions or int(getattr(training, "num_generations", 0) or 4)
    texts = generate_responses([r["prompt"] for r in selection for _ in range(n)], model=policy, seed=training.seed,
                               temperature=float(getattr(training, "temperature", 1.0) or 1.0), **generation)
    return [QualifyRow(rubric, Item(response=texts[i * n + j] or "", prompt=row["prompt"]), str(row.get("id", i)))
            for i, (row, rubric) in enumerate(zip(selection, rubrics, strict=True)) for j in range(n)]


def qualify_gate(recipe: Any, training: Any, model: Any, splits: Any) -> dict[str, Any] | None:
    """Run the gate (see the module docstring) with the training reward (its judge, scoring and rubrics) on the
    selection split; the card's data, or None without a ``qualify:`` section. :class:`GateStop` stops the run."""
    gate = GateConfig.coerce(recipe.qualify)
    if gate is None:
        return None
    out = Path(training.output_dir) / GATE_DIR
    if not is_main_process():
        return _decide(_wait_for_card(out, time.time()), gate, out)
    from ...evaluation.qualify import qualify
    from ...io.models import resolve_model
    from .builders import build_reward, generation_kwargs

    generation = generation_kwargs(recipe, training.max_completion_length)
    generation.pop("merge_adapter")
    reward = build_reward(recipe)
    try:
        cfg = reward.config
        judges = cfg.judge_configs()
        if not judges:
            raise GateStop("qualify: the reward has no judge to qualify (its rubrics are programmatic checks); "
                           "remove the qualify section")
        selection = list(splits.selection)[: gate.prompts]
        say(f"[grpo] qualify: {len(selection)} selection prompts x {gate.completions or training.num_generations} "
            f"base-model completions, each judged {gate.repeats} times")
        rows = _rows(training, resolve_model(model.model_name_or_path), reward, gate, selection, generation)
        card = qualify(rows, judges, config=gate, scoring=cfg.scoring_config(), grading=cfg.grading_config(),
                       field=cfg.reward, out_dir=out, say=lambda line: say(f"[grpo] {line}"))
    finally:
        reward.close()
    return _decide(card.to_dict(), gate, out)


def _failing(data: Mapping[str, Any]) -> dict[str, list[str]]:
    from ...evaluation.qualify.card import Card

    return Card(dict(data), {}).failing()


def _decide(data: dict[str, Any], gate: GateConfig, out: Path) -> dict[str, Any]:
    failing = _failing(data)
    said = ", ".join(f"{n} ({'/'.join(s)})" for n, s in failing.items()) or "no criterion failed"
    if data["overall"] == "usable":
        say(f"[grpo] qualify: the judge is usable for this rubric; card: {out / 'card.md'}")
        return data
    line = (f"qualify: the judge card says {data['overall']}: {said}; card: {out / 'card.md'}")
    if gate.on_fail == "stop":
        qualified = (out / "qualified_rubric.yaml").is_file()
        raise GateStop(line + " (qualify.on_fail: warn trains anyway" + ("; qualified_rubric.yaml there has the "
                                                                         "failing criteria as monitors)" if qualified
                                                                         else ")"))
    say(f"[grpo] warning: {line}; training anyway (qualify.on_fail: warn)")
    return data


def _wait_for_card(out: Path, since: float, poll_s: float = 1.0) -> dict[str, Any]:
    """The main process's card, once it is written (a card older than ``since`` is an earlier run's)."""
    path = out / "card.json"
    while not (path.is_file() and path.stat().st_mtime >= since):
        time.sleep(poll_s)
    return json.loads(path.read_text())


def add_card_to_summary(summary_path: str | Path, data: Mapping[str, Any], output_dir: str | Path) -> None:
    """Put the gate's card in the run's summary: a ``qualify`` entry in ``summary.json`` and a section at the end of
    ``summary.md``."""
    from ...io.journal import write_atomic

    summary_path = Path(summary_path)
    run_dir = summary_path.parent
    card_dir = Path(output_dir) / GATE_DIR
    failing = _failing(data)
    entry = {"overall": data["overall"], "failing": failing, "card": str(card_dir.relative_to(run_dir) / "card.md"),
             "noise_share": ((data["reward"]["rubric"].get("noise_share") or {}).get("estimate")),
             "criteria": {n: c["status"] for n, c in data["criteria"].items()}}
    json_path = run_dir / "summary.json"
    if json_path.is_file():
        summary = json.loads(json_path.read_text())
        summary["qualify"] = entry
        write_atomic(json_path, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    said = ", ".join(f"`{n}` ({', '.join(s)})" for n, s in failing.items()) or "every criterion ok"
    section = (f"\n## Judge card (before training)\n\nThe training judge on the base model's completions: "
               f"**{data['overall']}**; {said}. The card: [{entry['card']}]({entry['card']}).\n")
    write_atomic(summary_path, summary_path.read_text() + section)
