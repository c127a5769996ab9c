"""``rubric-reward generate``: training-free rubrics for a file of prompts, journalled and resumable.

Two granularities:

* **instance-level**: one rubric per prompt (``min_criteria``-``max_criteria`` criteria, 3-10 by default);
* **dataset-level**: one rubric for a whole dataset, written from a seeded sample of its prompts.

The output file is an append-only journal: rows already generated with the same generator, settings and
prompt are kept on a rerun, failed rows are asked again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judges.base import ReplyCache
from .config import GenerationConfig
from .generator import RubricGenerator
from .jobs import job_cache, run_batch
from .prompt_rows import PromptRow, load_prompts

__all__ = ["GenerateSummary", "generate_rubrics"]


@dataclass(frozen=True, slots=True)
class GenerateSummary:
    """What ``generate_rubrics`` did: counts, new spend, where the rubrics are."""

    out: Path
    n: int
    ok: int
    failed: int
    resumed: int
    cost: float
    failures: tuple[str, ...] = field(default=())


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False, default=str).encode()).hexdigest()[:32]


def generate_rubrics(input: str | Path | Sequence[Any], out: str | Path, *, generator: Any = None,
                     config: GenerationConfig | Mapping[str, Any] | None = None, base_url: str | None = None,
                     cache: str | Path | ReplyCache | None = "auto", temperature: float | None = None,
                     samples: int = 1, progress: bool = True) -> GenerateSummary:
    """Write rubrics for the prompts in ``input`` to ``out`` (JSONL, one line per prompt, or one line
    for a dataset-level rubric). Resumable: ``out`` is a journal; rows already generated with the same
    generator, settings and prompt are kept, failed rows are asked again. ``cache="auto"`` puts the
    reply cache (the judges' SQLite format) beside ``out`` as ``cache.sqlite``; None turns it off.
    ``samples`` rubrics per prompt (instance level; sample indexes 0..samples-1, one line each).

    Each line: ``{key, id, ok, rubric, error, text, attempts, repairs, ...}`` (see GeneratedRubric).
    """
    from ..io.journal import Journal

    prompts = load_prompts(input)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with job_cache(cache, out.parent / "cache.sqlite") as reply_cache:
        gen = RubricGenerator(generator, config=config, base_url=base_url, cache=reply_cache,
                              temperature=temperature)
        fp = gen.fingerprint()
        if gen.config.level == "dataset":
            name = Path(input).stem if isinstance(input, str | Path) else "dataset"
            jobs = [(name, _key(fp, "dataset", [(p.id, p.prompt) for p in prompts]), None, 0)]
        else:
            jobs = [(p.id, _key(fp, "instance", p.id, p.prompt, *([s] if s else [])), p, s)
                    for p in prompts for s in range(samples)]
        journal = Journal(out)
        done = {k: e for k, e in journal.latest(repair=True).items() if e.get("ok")}
        todo = [j for j in jobs if j[1] not in done]
        failures: list[str] = []
        spent = 0.0

        async def one(job: tuple[str, str, PromptRow | None, int]) -> tuple[float, bool]:
            nonlocal spent
            pid, key, row, s = job
            if row is None:
                result = await gen.agenerate_dataset([p.prompt for p in prompts], name=pid)
            else:
                result = await gen.agenerate(row.prompt, prompt_id=pid, sample_index=s)
            entry = {"key": key, "id": pid, "level": gen.config.level, "generator": gen.name, **result.to_dict()}
            if row is not None:
                entry["prompt"] = row.prompt
            journal.append(entry)
            spent += result.cost
            if not result.ok:
                failures.append(f"{pid}: {result.error}")
            return result.cost, not result.ok

        try:
            run_batch("generating rubrics", todo, one, total=len(jobs), concurrency=gen.config.concurrency,
                      progress=progress, aclose=[gen.aclose])
        finally:
            journal.close()
    journal.compact([j[1] for j in jobs])
    final = journal.latest()
    ok = sum(1 for j in jobs if final.get(j[1], {}).get("ok"))
    return GenerateSummary(out, len(jobs), ok, len(jobs) - ok, len(jobs) - len(todo), spent, tuple(failures))
