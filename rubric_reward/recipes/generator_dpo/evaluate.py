"""Held-out evaluation of rubric generators: do their rubrics make a fixed judge agree with humans?

``rubric-reward eval-generator --config configs/dpo/eval_generator.yaml``. For each generator (the base
model, each iteration of a dpo-loop, any fixed baseline such as an API model, or a rubrics file written
by ``rubric-reward generate``) an instance-level rubric is written for every **held-out** prompt, then one
fixed judge uses it to

(a) **pick the better of two responses** (MT-Bench human judgments): the judge sees the task, the
    rubric and both responses (order randomised per row with ``seed``) and answers
    ``{"reason", "verdict": "1"|"2"}``; the metric is agreement with the human majority (human ties
    dropped), with a bootstrap interval over questions, and McNemar's exact test between each
    generator and the reference generator on the rows both decided (Holm-adjusted);
(b) **score single responses** (HelpSteer2): the package's :class:`~rubric_reward.scorer.Scorer` scores
    each response against the rubric; the metric is Spearman's rho with the human score (mean of
    helpfulness, correctness, coherence), with a bootstrap interval over prompts.

The split is explicit and seeded (:func:`~rubric_reward.generation.human_data.split_ids` by prompt,
written to ``split.json``); only test-side prompts are used. A generator made by a dpo-loop is checked
for leaks: its training prompts (``loop_dir/prompts.jsonl``) must not include a test task.

Failures are data: a prompt whose rubric could not be generated, or a judge answer that failed or
went off the menu, is counted (``no_rubric``, ``failed``) and left out of that generator's metric,
never guessed. Rubric generation is journalled per generator (``rubrics/<name>.jsonl``) and every
judge reply is cached (``cache.sqlite``), so a rerun after a crash redoes only what was not finished.

Outputs in ``out_dir``: ``results.json``, ``table.md``, ``plot.png``, ``split.json``, ``tasks.jsonl``,
``rows/<generator>.pairwise.jsonl`` and ``rows/<generator>.pointwise.jsonl`` (one line per judged row).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...io.journal import write_atomic
from ...rubric import Rubric
from .evaluate_config import EvalGeneratorConfig, GeneratorSpec
from .evaluate_report import mcnemar_vs_reference, pairwise_stats, plot, pointwise_stats, render_table
from ...generation.human_data import PairwiseRow, PointwiseRow, load_helpsteer2, load_mt_bench, split_ids
from ...generation.pair_judge import judge_pair

__all__ = ["EvalGeneratorConfig", "GeneratorSpec", "evaluate_generators", "load_data", "write_train_prompts"]


@dataclass
class _Data:
    pairwise: list[PairwiseRow]
    pointwise: list[PointwiseRow]
    tasks: dict[str, str]  # task key -> task text (what a rubric is written for)
    split: dict[str, Any]
    dropped: dict[str, int]


def _pair_task(row: PairwiseRow) -> str:
    return f"mtb:{row.prompt_id}:t{sum(1 for m in row.conversation_a if m['role'] == 'assistant')}"


def _point_task(row: PointwiseRow) -> str:
    return f"hs2:{row.prompt_id}"


def _limit(ids: list[str], n: int | None) -> set[str]:
    return set(ids if n is None else ids[:n])


def load_data(config: EvalGeneratorConfig) -> _Data:
    """The test side of both datasets (see the module docstring), and the split itself."""
    seed, frac = config.split.seed, config.split.test_fraction
    split: dict[str, Any] = {"seed": seed, "test_fraction": frac}
    pairwise: list[PairwiseRow] = []
    pointwise: list[PointwiseRow] = []
    dropped: dict[str, int] = {}
    if config.mt_bench:
        mt = config.mt_bench
        rows, dropped = load_mt_bench(mt.source, split=mt.split, turns=mt.turns, aggregate=mt.aggregate)
        train, test = split_ids((r.prompt_id for r in rows), test_fraction=frac, seed=seed)
        keep = _limit(test, mt.limit)
        pairwise = [r for r in rows if r.prompt_id in keep]
        split["mt_bench"] = {"train": train, "test": test, "evaluated": sorted(keep)}
    if config.helpsteer2:
        hs = config.helpsteer2
        rows2 = load_helpsteer2(hs.source, split=hs.split)
        train, test = split_ids((r.prompt_id for r in rows2), test_fraction=frac, seed=seed)
        keep = _limit(test, hs.limit)
        pointwise = [r for r in rows2 if r.prompt_id in keep]
        split["helpsteer2"] = {"train": train, "test": test, "evaluated": sorted(keep)}
    tasks = {_pair_task(r): r.task for r in pairwise}
    tasks.update({_point_task(r): r.prompt for r in pointwise})
    if not tasks:
        raise ValueError("eval-generator: no test prompts (test_fraction 0, or every row dropped)")
    return _Data(pairwise, pointwise, tasks, split, dropped)


def write_train_prompts(config: EvalGeneratorConfig, path: str | Path) -> int:
    """Write the TRAIN side of the split as a prompts JSONL for ``rubric-reward dpo-loop``; returns the count.

    The same seeded split as the evaluation, so a loop trained on this file never sees a test prompt.
    """
    seed, frac = config.split.seed, config.split.test_fraction
    rows: dict[str, str] = {}
    if config.mt_bench:
        mt = config.mt_bench
        pairs, _ = load_mt_bench(mt.source, split=mt.split, turns=mt.turns, aggregate=mt.aggregate)
        train, _ = split_ids((r.prompt_id for r in pairs), test_fraction=frac, seed=seed)
        keep = set(train)
        rows.update({_pair_task(r): r.task for r in pairs if r.prompt_id in keep})
    if config.helpsteer2:
        points = load_helpsteer2(config.helpsteer2.source, split=config.helpsteer2.split)
        train, _ = split_ids((r.prompt_id for r in points), test_fraction=frac, seed=seed)
        keep = set(train)
        rows.update({_point_task(r): r.prompt for r in points if r.prompt_id in keep})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(json.dumps({"id": k, "prompt": v}, ensure_ascii=False) + "\n"
                               for k, v in sorted(rows.items())))
    return len(rows)




def _load_rubric_file(path: Path, name: str) -> dict[str, tuple[Rubric | None, str | None]]:
    from ...io.rows import DataError, numbered_jsonl_rows

    if not path.is_file():
        raise FileNotFoundError(f"generator {name!r}: no such rubrics file {path}")
    out: dict[str, tuple[Rubric | None, str | None]] = {}
    try:
        rows = list(numbered_jsonl_rows(path))
    except DataError as exc:
        raise ValueError(str(exc)) from None
    for n, row in rows:
        rid = str(row.get("id", ""))
        if not rid:
            raise ValueError(f"{path}: line {n}: missing field 'id'")
        if row.get("rubric") is None:
            out[rid] = (None, str(row.get("error") or "no rubric in the file"))
            continue
        try:
            out[rid] = (Rubric.from_obj(row["rubric"], source=f"{path}: line {n}"), None)
        except ValueError as exc:
            out[rid] = (None, str(exc))
    return out


def _rubrics_for(spec: GeneratorSpec, tasks: Mapping[str, str], config: EvalGeneratorConfig, out: Path,
                 cache: str | None) -> dict[str, tuple[Rubric | None, str | None]]:
    """task key -> (rubric or None, error) for one generator (journalled, so a rerun resumes)."""
    if spec.rubrics is not None:
        found = _load_rubric_file(Path(spec.rubrics), spec.name)
        dataset = found.get("dataset")
        return {k: found.get(k, dataset or (None, "no rubric for this prompt in the file")) for k in tasks}
    from ...generation.generate import generate_rubrics

    path = out / "rubrics" / f"{spec.name}.jsonl"
    model = spec.model
    if isinstance(model, Mapping):
        from ...judges.config import JudgeConfig

        model = JudgeConfig.from_dict(model)
    generate_rubrics([{"id": k, "prompt": v} for k, v in tasks.items()], path, generator=model,
                     config=config.generation, base_url=spec.base_url, cache=cache, progress=config.progress)
    found = _load_rubric_file(path, spec.name)
    dataset = found.get("dataset")
    return {k: found.get(k, dataset or (None, "not generated")) for k in tasks}


def _leaks(spec: GeneratorSpec, tasks: Mapping[str, str]) -> int | None:
    if not spec.train_prompts:
        return None
    from ...generation.prompt_rows import load_prompts
    from ...generation.templates import task_text

    path = Path(spec.train_prompts)
    if not path.is_file():
        return None
    trained = {task_text(r.prompt).strip() for r in load_prompts(path)}
    return sum(1 for t in tasks.values() if t.strip() in trained)




def evaluate_generators(config: EvalGeneratorConfig) -> dict[str, Any]:
    """Run the evaluation (see the module docstring); returns the summary written to ``results.json``."""
    from ...judges.cache import SQLiteCache
    from ...judges.judge import as_judges
    from ...scorer import Scorer

    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows").mkdir(exist_ok=True)
    data = load_data(config)
    write_atomic(out / "split.json", json.dumps(data.split, indent=1) + "\n")
    write_atomic(out / "tasks.jsonl", "".join(json.dumps({"id": k, "prompt": v}, ensure_ascii=False) + "\n"
                                               for k, v in data.tasks.items()))
    cache_path = str(out / "cache.sqlite") if config.cache else None

    rubrics = {g.name: _rubrics_for(g, data.tasks, config, out, cache_path) for g in config.generators}

    cache = SQLiteCache(cache_path) if cache_path else None
    judges = as_judges(config.judge, cache=cache)
    if len(judges) != 1:
        raise ValueError(f"eval-generator: the fixed judge is one model, got {len(judges)}")
    judge = judges[0]
    scorer = Scorer(judge=judge)
    results: dict[str, dict[str, Any]] = {}

    async def run() -> None:
        try:
            for g in config.generators:
                await one_generator(g)
        finally:
            await scorer.aclose()

    async def one_generator(g: GeneratorSpec) -> None:
        sem = asyncio.Semaphore(config.concurrency)

        async def pair(row: PairwiseRow, rubric: Rubric | None, error: str | None) -> dict[str, Any]:
            if rubric is None:
                return {"id": row.id, "prompt_id": row.prompt_id, "correct": None, "no_rubric": True, "error": error}
            async with sem:
                return await judge_pair(judge, row, rubric, config.seed)

        table = rubrics[g.name]
        prow = await asyncio.gather(*(pair(r, *table[_pair_task(r)]) for r in data.pairwise))
        items, trows = [], []
        for r in data.pointwise:
            rubric, error = table[_point_task(r)]
            base = {"id": r.id, "prompt_id": r.prompt_id, "human": r.human}
            if rubric is None:
                trows.append({**base, "score": None, "no_rubric": True, "error": error})
            else:
                trows.append(base)
                items.append({"response": r.response, "prompt": list(r.turns) or r.prompt, "rubric": rubric,
                              "id": r.id})
        scored = iter(await scorer.ascore_batch(items) if items else [])
        for t in trows:
            if t.get("no_rubric"):
                continue
            res = next(scored)
            t.update(score=res.score, error=res.error, cost=res.cost)
        results[g.name] = {"pairwise_rows": list(prow), "pointwise_rows": trows}

    try:
        asyncio.run(run())
    finally:
        if cache is not None:
            cache.close()

    reference = config.reference or config.generators[0].name
    summary: dict[str, Any] = {
        "judge": judge.name, "reference": reference, "seed": config.seed, "confidence": config.confidence,
        "split": {"seed": data.split["seed"], "test_fraction": data.split["test_fraction"]},
        "n_tasks": len(data.tasks), "n_pairwise": len(data.pairwise), "n_pointwise": len(data.pointwise),
        "dropped": data.dropped, "generators": {}, "mcnemar": {},
    }
    for g in config.generators:
        res = results[g.name]
        table = rubrics[g.name]
        name = g.name
        write_atomic(out / "rows" / f"{name}.pairwise.jsonl",
                     "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in res["pairwise_rows"]))
        write_atomic(out / "rows" / f"{name}.pointwise.jsonl",
                     "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in res["pointwise_rows"]))
        summary["generators"][name] = {
            "source": g.rubrics or (g.model if isinstance(g.model, str) else dict(g.model or {})),
            "rubrics_ok": sum(1 for r, _ in table.values() if r is not None), "rubrics_total": len(table),
            "leaked": _leaks(g, data.tasks),
            "pairwise": pairwise_stats(res["pairwise_rows"], config) if data.pairwise else None,
            "pointwise": pointwise_stats(res["pointwise_rows"], config) if data.pointwise else None,
        }
    if data.pairwise:
        summary["mcnemar"] = mcnemar_vs_reference(results, reference)
    write_atomic(out / "results.json", json.dumps(summary, indent=2, default=str) + "\n")
    write_atomic(out / "table.md", render_table(summary))
    plot_path = plot(summary, out / "plot.png")
    summary["files"] = {"table": str(out / "table.md"), "results": str(out / "results.json"),
                        "plot": str(plot_path) if plot_path else None}
    leaked = {n: g["leaked"] for n, g in summary["generators"].items() if g["leaked"]}
    if leaked:
        summary["warning"] = f"test prompts were in the training prompts of {leaked}: these numbers are not held out"
    return summary


