"""Evaluation runs: judge a dataset, survive crashes, stay within budget, report agreement.

``run_eval(config)`` loads the items, grades them concurrently (``concurrency`` items in flight),
appends each finished item to ``results.jsonl``, and at the end writes the final view of that file,
``manifest.json``, ``rubrics.json``, ``metrics.json`` and (optionally) the report.

Resume semantics. Every item has a content key: a hash of the rubric fingerprint, the item (id,
prompt, response) and the run fingerprint (judge configs without secrets or operational settings,
grading and scoring configs, prompt-template hash, seed). On start the journal is read (a torn
last line from a kill is cut off); items whose last entry is ``ok`` are skipped, everything else
(missing, or ``failed``: any verdict carries an error) is graded again. Items whose failure was an
unparseable answer are retried with cache reads disabled so the judge is really asked again. Judge
replies are cached, so replies that arrived before a kill are not paid for twice. At the end the
journal is compacted to exactly one line per item in dataset order; until then readers take the
last entry per key. Editing a dataset row or the rubric only re-judges what changed. The manifest's
``status`` becomes ``complete`` only once ``metrics.json`` and the report are written (until then it
reads ``reporting``); rerunning a run killed while reporting judges nothing and rebuilds them.

Budget. ``max_cost`` caps the new spend of one invocation (cache hits are free, except a reply paid
for by a killed invocation of this run and never saved in a result: it is billed once, when used). Until the cost of
one uncached item is known only one item is in flight; afterwards a new item starts only while
``spent + (in_flight + 1) * max_item_cost <= max_cost``. When no more items fit the run stops
cleanly (status ``stopped_by_budget``); rerunning continues with the remaining items. A journal
line that cannot be read (torn, or edited by hand) is logged once and its item judged again: the
new result carries the cost of the cached replies the lost one was billed, and the manifest's
spend counts them once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..grading.grader import Grader
from ..judges.cache import SQLiteCache, refreshing
from ..judges.fingerprint import judge_fingerprint, plain
from ..judges.judge import Judge
from ..io.journal import Journal, write_atomic
from ..util.progress import Progress
from ..grading.criterion_prompt import template_hash
from ..results import ErrorKind, ScoreResult
from ..io.rows import DataError
from .config import EvalConfig
from .dataset import EvalItem, load_items

__all__ = ["RunSummary", "arun_eval", "failure_kinds", "item_key", "run_eval", "run_fingerprint"]

log = logging.getLogger(__name__)

KEY_VERSION = 1


def run_fingerprint(config: EvalConfig) -> str:
    """A hash of everything besides the item and rubric that decides a result."""
    blob = {
        "v": KEY_VERSION,
        "judges": [judge_fingerprint(j) for j in config.judges],
        "grading": plain(dataclasses.asdict(config.grading)),
        "scoring": plain(dataclasses.asdict(config.scoring)),
        "template": template_hash(),
        "seed": config.seed,
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def item_key(item: EvalItem, run: str) -> str:
    """The content key of one item under one run fingerprint."""
    prompt = item.item.prompt if isinstance(item.item.prompt, str | None) else [dict(m) for m in item.item.prompt]
    blob = [KEY_VERSION, item.rubric.fingerprint(), item.id, prompt, item.item.response, run]
    return hashlib.sha256(json.dumps(blob, ensure_ascii=False).encode()).hexdigest()[:32]




# ---------------------------------------------------------------------------- running
@dataclass(frozen=True, slots=True)
class RunSummary:
    """What one invocation did and where the run stands."""

    out_dir: Path
    status: str  # complete | incomplete (some items failed) | stopped_by_budget | interrupted
    n_items: int
    n_ok: int
    n_failed: int
    n_missing: int
    n_graded: int  # graded by this invocation
    n_resumed: int  # already done before this invocation
    spent: float  # new spend of this invocation
    cache_hits: int = 0
    cache_saved: float = 0.0  # original cost of the cache hits
    metrics: Mapping[str, Any] | None = field(default=None, repr=False)
    failures: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # see failure_kinds

    @property
    def stopped_by_budget(self) -> bool:
        return self.status == "stopped_by_budget"


def run_eval(config: EvalConfig) -> RunSummary:
    """Run (or resume) an evaluation; see the module docstring for the guarantees."""
    return asyncio.run(arun_eval(config))


def _check_dependencies(config: EvalConfig) -> None:
    """Fail before judging, not after, when the statistics or plotting libraries are missing."""
    import importlib.util

    needed = ["scipy", "sklearn"] + (["matplotlib"] if config.report else [])
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        raise RuntimeError(f"rubric-reward eval needs {', '.join(missing)}: pip install 'rubric-reward[stats]'")


async def arun_eval(config: EvalConfig) -> RunSummary:
    _check_dependencies(config)
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with _exclusive(out / ".lock"):
        summary = await _run_locked(config, out)
        from .run_metrics import compute_metrics, load_run

        run = load_run(out)
        run.manifest["status"] = summary.status  # on disk it says 'reporting' until the report is written
        metrics = compute_metrics(run.records, run.rubrics, scoring=config.scoring)
        write_atomic(out / "metrics.json", json.dumps(metrics, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        if config.report:
            from .report import write_report

            write_report(out, metrics=metrics, run=run)
        if summary.status == "complete":  # only now: a kill while reporting leaves the run 'reporting'
            write_atomic(out / "manifest.json", json.dumps(run.manifest, indent=2, ensure_ascii=False) + "\n")
    return replace(summary, metrics=metrics)


class RunLockedError(RuntimeError):
    """Another process holds the run folder."""


@contextlib.contextmanager
def _exclusive(path: Path):
    """One runner per run folder (an advisory lock, released by the OS if the process dies)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLockedError(f"{path.parent}: another run is using this folder "
                                 "(wait for it, or use --out-dir)") from None
        yield


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _failed(result: ScoreResult) -> bool:
    return any(v.error is not None for v in result.verdicts)


def _parse_failed(entry: Mapping[str, Any]) -> bool:
    verdicts = (entry.get("result") or {}).get("verdicts") or ()
    return any((v.get("error") or {}).get("kind") == ErrorKind.PARSE.value for v in verdicts)


async def _run_locked(config: EvalConfig, out: Path) -> RunSummary:
    started = _now()
    items = load_items(config.data, config.fields, rubric=config.rubric, rubrics=config.rubrics, limit=config.limit)
    run = run_fingerprint(config)
    keys = [item_key(it, run) for it in items]
    first: dict[str, EvalItem] = {}
    for it, k in zip(items, keys, strict=True):
        if k in first:
            raise DataError(f"{it.where} is the same item as {first[k].where} "
                            "(same rubric, prompt and response, and no distinguishing id)")
        first[k] = it

    for stale in out.glob(".*.tmp-*"):  # left by a kill during an atomic write
        stale.unlink(missing_ok=True)
    journal = Journal(out / "results.jsonl")
    entries = journal.read(repair=True)
    previous = {e["key"]: e for e in entries}  # the last entry per key
    done = {k for k in keys if (previous.get(k) or {}).get("status") == "ok"}
    todo = [i for i, k in enumerate(keys) if k not in done]
    refresh = {keys[i] for i in todo if keys[i] in previous and _parse_failed(previous[keys[i]])}

    rubrics = {it.rubric.fingerprint(): it.rubric.to_dict() for it in items}
    write_atomic(out / "rubrics.json", json.dumps(rubrics, indent=2, ensure_ascii=False) + "\n")
    manifest = _manifest(config, out, run, len(items), started, entries)
    invocation = len(manifest["invocations"])
    write_atomic(out / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")

    # the cache bills a reply paid for by a killed invocation of this run once, to the item that uses it
    owner = f"{run}@{out.resolve()}"
    cache = None
    if config.cache_path is not None:
        cache = SQLiteCache(config.cache_path, owner=owner, invocation=invocation)
        # results about to be replaced, or lost to a corrupted line, give their bills to the new ones;
        # a killed invocation's spend counts only the results its journal still holds
        earlier = dict(enumerate(manifest["invocations"][:-1], 1))
        cache.unsettle([keys[i] for i in todo if keys[i] in previous], set(earlier))
        cache.unsettle([keys[i] for i in todo if keys[i] not in previous],
                       {n for n, inv in earlier.items() if inv.get("status") != "killed"})
    grader = Grader([Judge(j, cache=cache) for j in config.judges], scoring=config.scoring, config=config.grading)
    state = _State()
    status = "interrupted"
    try:
        await _schedule(config, items, keys, todo, refresh, grader, journal, run, state, done_before=len(done),
                        invocation=invocation, cache=cache)
        status = "stopped_by_budget" if state.stopped_by_budget else "complete"
    finally:
        await grader.aclose()
        if cache is not None:
            state.cache_hits, state.cache_saved = cache.hits, cache.saved_cost
            cache.close()
        by_key = {k: it for k, it in zip(keys, items, strict=True)}
        journal.compact(keys, update=lambda e: _refresh_entry(e, by_key[e["key"]]))
        final = journal.latest()
        n_ok = sum(1 for k in keys if (final.get(k) or {}).get("status") == "ok")
        n_failed = sum(1 for k in keys if (final.get(k) or {}).get("status") == "failed")
        n_missing = len(keys) - n_ok - n_failed
        if status == "complete" and n_failed:
            status = "incomplete"
        manifest.update(
            status="reporting" if status == "complete" else status, finished_at=_now(),
            counts={"items": len(keys), "ok": n_ok, "failed": n_failed, "missing": n_missing},
        )
        spent = state.spent - (cache.recounted_cost if cache is not None else 0.0)  # new spend only
        manifest["invocations"][-1].update(
            finished_at=manifest["finished_at"], status=status, graded=state.graded, spent=spent,
            cache_hits=state.cache_hits, cache_saved=state.cache_saved,
        )
        manifest["spent_total"] = sum(inv.get("spent", 0.0) for inv in manifest["invocations"])
        write_atomic(out / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return RunSummary(out, status, len(keys), n_ok, n_failed, n_missing, state.graded, len(done), spent,
                      state.cache_hits, state.cache_saved, failures=failure_kinds(final.get(k) for k in keys))


def failure_kinds(entries: Iterable[Mapping[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """The failed verdicts of failed journal entries by error kind: ``{kind: {"count": n, "example": message}}``,
    most frequent first (the example is the first such verdict's message)."""
    found: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if not entry or entry.get("status") != "failed":
            continue
        for v in (entry.get("result") or {}).get("verdicts") or ():
            error = v.get("error") or {}
            if error.get("kind"):
                slot = found.setdefault(error["kind"], {"count": 0, "example": str(error.get("message", ""))})
                slot["count"] += 1
    return dict(sorted(found.items(), key=lambda kv: -kv[1]["count"]))


def _refresh_entry(entry: dict[str, Any], item: EvalItem) -> dict[str, Any]:
    """The final view carries the dataset's current labels, group and position."""
    return {**entry, "id": item.id, "row": item.row, "group": item.group, "labels": dict(item.labels)}


def _manifest(config: EvalConfig, out: Path, run: str, n_items: int, started: str,
              entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    from .. import __version__

    old: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        old = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    invocations = list(old.get("invocations") or []) if isinstance(old, dict) else []
    for n, inv in enumerate(invocations, 1):
        if "status" not in inv:  # killed: what it spent is what its journal entries record
            inv.update(status="killed", graded=sum(e.get("invocation") == n for e in entries),
                       spent=sum(float(e.get("cost") or 0.0) for e in entries if e.get("invocation") == n))
    invocations.append({"started_at": started, "max_cost": config.max_cost, "pid": os.getpid()})
    return {
        "package": "rubric-reward",
        "version": __version__,
        "python": sys.version.split()[0],
        "run": run,
        "template_hash": template_hash(),
        "seed": config.seed,
        "data": config.data.describe(),
        "judges": [
            {"name": j.name, "model": j.model, "backend": j.resolved_backend(), "endpoints": list(j.base_urls)}
            for j in config.judges
        ],
        "config": config.to_dict(),
        "n_items": n_items,
        "status": "running",
        "started_at": old.get("started_at", started) if isinstance(old, dict) else started,
        "finished_at": None,
        "invocations": invocations,
    }


@dataclass
class _State:
    spent: float = 0.0
    graded: int = 0
    failed: int = 0
    max_item_cost: float | None = None  # largest cost of an item that made an uncached call
    stopped_by_budget: bool = False
    cache_hits: int = 0
    cache_saved: float = 0.0


def _budget_allows(config: EvalConfig, state: _State, in_flight: int) -> bool:
    if config.max_cost is None:
        return True
    if state.max_item_cost is None:  # cost per item unknown: probe with one item at a time
        return in_flight == 0 and state.spent < config.max_cost
    return state.spent + (in_flight + 1) * state.max_item_cost <= config.max_cost + 1e-12


async def _schedule(config: EvalConfig, items: Sequence[EvalItem], keys: Sequence[str], todo: Sequence[int],
                    refresh: set[str], grader: Grader, journal: Journal, run: str, state: _State,
                    done_before: int, invocation: int, cache: SQLiteCache | None = None) -> None:
    async def graded(i: int) -> ScoreResult:
        it = items[i]
        if keys[i] in refresh:
            with refreshing():
                return await grader.grade(it.rubric, it.item)
        return await grader.grade(it.rubric, it.item)

    async def grade(i: int) -> tuple[ScoreResult, list[str]]:
        if cache is None:
            return await graded(i), []
        with cache.billing() as paid:  # the replies this item paid for; settled once it is saved
            return await graded(i), paid

    progress = Progress("judging", len(items), done_before, enabled=config.progress, cost=True, failures=True)
    pending = list(reversed(todo))
    tasks: dict[asyncio.Task[tuple[ScoreResult, list[str]]], int] = {}
    try:
        with progress:
            while True:
                while pending and len(tasks) < config.concurrency and _budget_allows(config, state, len(tasks)):
                    i = pending.pop()
                    tasks[asyncio.ensure_future(grade(i))] = i
                if not tasks:
                    state.stopped_by_budget = bool(pending)
                    return
                finished, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    i = tasks.pop(task)
                    result, paid = task.result()
                    _record(journal, items[i], keys[i], run, result, state, invocation)
                    if cache is not None:
                        cache.settle(paid, keys[i])
                    progress.advance(cost=result.cost, failed=_failed(result))
    finally:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        journal.close()


def _record(journal: Journal, item: EvalItem, key: str, run: str, result: ScoreResult, state: _State,
            invocation: int) -> None:
    failed = _failed(result)
    cost = result.cost
    journal.append({
        "key": key, "id": item.id, "row": item.row, "group": item.group,
        "rubric": item.rubric.name, "rubric_fingerprint": item.rubric.fingerprint(), "run": run,
        "labels": dict(item.labels), "status": "failed" if failed else "ok", "score": result.score,
        "cost": cost, "invocation": invocation, "finished_at": _now(), "result": result.to_dict(),
    })
    state.graded += 1
    state.failed += failed
    state.spent += cost
    if any(not c.cached for c in result.calls):
        state.max_item_cost = max(state.max_item_cost or 0.0, cost)
