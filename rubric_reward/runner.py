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
cleanly (status ``stopped_by_budget``); rerunning continues with the remaining items.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .cache import SQLiteCache, refreshing
from .datasets_io import DataError, DataSource, EvalItem, FieldMap, load_items
from .grader import Grader, GradingConfig
from .judges.config import JudgeConfig, judge_fields, load_judges
from .judges.judge import Judge
from .journal import Journal, write_atomic
from .prompts import template_hash
from .results import ErrorKind, ScoreResult
from .scoring import ScoringConfig

__all__ = ["EvalConfig", "RunSummary", "arun_eval", "item_key", "judge_fingerprint", "run_eval", "run_fingerprint"]

log = logging.getLogger(__name__)

KEY_VERSION = 1

# Judge fields that never change a verdict (declared on JudgeConfig): left out of the run fingerprint,
# so raising a rate limit or a breaker cooldown does not re-judge a dataset.
_OPERATIONAL = judge_fields("nothing")
_SECRET_NAME = re.compile(r"(^|[_-])(api_?key|key|token|secret|password|authorization|auth|bearer)$", re.I)


# ---------------------------------------------------------------------------- configuration
@dataclass(frozen=True, slots=True)
class EvalConfig:
    """One evaluation run; the YAML file maps one-to-one onto these fields.

    Input paths (``data``, ``rubric``, ``rubrics``, a judges YAML) are resolved against the YAML
    file's folder; outputs (``out_dir``, ``cache``) against the working directory. ``cache: auto``
    puts the reply cache in ``out_dir/cache.sqlite``; ``null`` turns caching off. ``seed`` is the
    grading seed (option shuffling).
    """

    data: DataSource
    judges: tuple[JudgeConfig, ...]
    fields: FieldMap = FieldMap()
    rubric: str | None = None
    rubrics: str | None = None
    scoring: ScoringConfig = ScoringConfig()
    grading: GradingConfig = GradingConfig()
    out_dir: str = "runs/eval"
    cache: str | None = "auto"
    max_cost: float | None = None
    seed: int = 0
    concurrency: int = 8
    limit: int | None = None
    report: bool = True
    progress: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", DataSource.parse(self.data))
        judges = self.judges
        if isinstance(judges, str | Path | Mapping):
            judges = load_judges(judges)
        object.__setattr__(self, "judges", tuple(
            j if isinstance(j, JudgeConfig) else JudgeConfig.from_dict(j) for j in judges
        ))
        if not self.judges:
            raise ValueError("eval config: 'judges' is empty; at least one judge is needed")
        if isinstance(self.fields, Mapping):
            object.__setattr__(self, "fields", FieldMap(**self.fields))
        if isinstance(self.scoring, Mapping):
            object.__setattr__(self, "scoring", ScoringConfig(**self.scoring))
        if isinstance(self.grading, Mapping):
            if "seed" in self.grading:
                raise ValueError("eval config: set the seed at the top level ('seed'), not under 'grading'")
            object.__setattr__(self, "grading", GradingConfig(**self.grading))
        object.__setattr__(self, "grading", replace(self.grading, seed=self.seed))
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"eval config: 'concurrency' must be a positive integer, got {self.concurrency!r}")
        if self.max_cost is not None and (not isinstance(self.max_cost, int | float) or self.max_cost < 0):
            raise ValueError(f"eval config: 'max_cost' must be a non-negative number, got {self.max_cost!r}")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise ValueError(f"eval config: 'limit' must be a positive integer, got {self.limit!r}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base_dir: str | Path | None = None) -> EvalConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"eval config: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        for required in ("data", "judges"):
            if required not in d:
                raise ValueError(f"eval config: missing field {required!r}")
        d = dict(d)
        if base_dir is not None:
            base = Path(base_dir)

            def resolve(p: Any) -> Any:
                return os.path.normpath(base / p) if isinstance(p, str) and not Path(p).is_absolute() else p

            data = d["data"]
            if isinstance(data, Mapping):
                d["data"] = {**data, "path": resolve(data.get("path"))} if data.get("path") else dict(data)
            else:
                d["data"] = resolve(data)
            for key in ("rubric", "rubrics"):
                d[key] = resolve(d.get(key))
            if isinstance(d["judges"], str):
                d["judges"] = resolve(d["judges"])
        return cls(**d)

    @classmethod
    def from_yaml(cls, path: str | Path) -> EvalConfig:
        from .files import read_structured

        path = Path(path)
        obj = read_structured(path, "eval config file")
        if not isinstance(obj, Mapping):
            raise ValueError(f"{path}: an eval config must be a mapping")
        try:
            return cls.from_dict(obj, base_dir=path.parent)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None

    @property
    def cache_path(self) -> Path | None:
        if self.cache is None or self.cache is False:
            return None
        return Path(self.out_dir) / "cache.sqlite" if self.cache == "auto" else Path(self.cache)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able and secret-free (for the manifest)."""
        return {
            "data": dataclasses.asdict(self.data),
            "judges": [_public_judge(j) for j in self.judges],
            "fields": dataclasses.asdict(self.fields),
            "rubric": self.rubric,
            "rubrics": self.rubrics,
            "scoring": _plain(dataclasses.asdict(self.scoring)),
            "grading": _plain(dataclasses.asdict(self.grading)),
            "out_dir": self.out_dir,
            "cache": self.cache,
            "max_cost": self.max_cost,
            "seed": self.seed,
            "concurrency": self.concurrency,
            "limit": self.limit,
            "report": self.report,
            "progress": self.progress,
        }


def _plain(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))


def _scrub(obj: Any) -> Any:
    """Redact values under secret-looking names (a token in ``extra_body``, say)."""
    if isinstance(obj, Mapping):
        return {k: "<redacted>" if _SECRET_NAME.search(str(k)) else _scrub(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_scrub(v) for v in obj]
    return obj


def _public_judge(config: JudgeConfig) -> dict[str, Any]:
    d = _plain(config.to_dict())
    d["extra_body"] = _scrub(d.get("extra_body") or {})
    return d


def judge_fingerprint(config: JudgeConfig) -> dict[str, Any]:
    """The verdict-relevant part of a judge config (no secrets, no operational settings)."""
    d = {k: v for k, v in _plain(config.to_dict()).items() if k not in _OPERATIONAL}
    d["backend"] = config.resolved_backend()
    return d


def run_fingerprint(config: EvalConfig) -> str:
    """A hash of everything besides the item and rubric that decides a result."""
    blob = {
        "v": KEY_VERSION,
        "judges": [judge_fingerprint(j) for j in config.judges],
        "grading": _plain(dataclasses.asdict(config.grading)),
        "scoring": _plain(dataclasses.asdict(config.scoring)),
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
        from .metrics import compute_metrics, load_run

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
    first_row: dict[str, int] = {}
    for it, k in zip(items, keys, strict=True):
        if k in first_row:
            raise DataError(f"{config.data.describe()}: rows {first_row[k]} and {it.row} are the same item "
                            "(same rubric, prompt and response, and no distinguishing id)")
        first_row[k] = it.row

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
        manifest["invocations"][-1].update(
            finished_at=manifest["finished_at"], status=status, graded=state.graded, spent=state.spent,
            cache_hits=state.cache_hits, cache_saved=state.cache_saved,
        )
        manifest["spent_total"] = sum(inv.get("spent", 0.0) for inv in manifest["invocations"])
        write_atomic(out / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return RunSummary(out, status, len(keys), n_ok, n_failed, n_missing, state.graded, len(done), state.spent,
                      state.cache_hits, state.cache_saved)


def _refresh_entry(entry: dict[str, Any], item: EvalItem) -> dict[str, Any]:
    """The final view carries the dataset's current labels, group and position."""
    return {**entry, "id": item.id, "row": item.row, "group": item.group, "labels": dict(item.labels)}


def _manifest(config: EvalConfig, out: Path, run: str, n_items: int, started: str,
              entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    from . import __version__

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

    progress = _Progress(len(items), done_before, enabled=config.progress)
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
                        cache.settle(paid)
                    progress.advance(state)
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


class _Progress:
    """A rich progress bar (items done, ETA, running cost) on stderr; silent when disabled."""

    def __init__(self, total: int, done: int, *, enabled: bool):
        self.enabled = enabled
        self.total, self.done = total, done
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]judging"), BarColumn(), MofNCompleteColumn(), TextColumn("items"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                TextColumn("cost ${task.fields[cost]:.4f}"), TextColumn("[red]{task.fields[failed]} failed"),
                console=Console(stderr=True),
            )
            self._progress.start()
            self._task = self._progress.add_task("judging", total=self.total, completed=self.done, cost=0.0, failed=0)
        return self

    def advance(self, state: _State) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, cost=state.spent, failed=state.failed)

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()
