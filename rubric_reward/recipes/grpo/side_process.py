"""The side process: a child process that generates greedy completions on the CPU a training run leaves idle.

A run under ``accelerate launch`` trains on one torch thread, so on a 2-core machine one core idles while the
policy trains. :class:`SideGenerator` is a child process that generates there what the run would otherwise
generate itself, one job after another:

* the monitor's selection completions of each saved checkpoint (training goes on; the monitor scores them when
  they are ready, :class:`~.monitor.CheckpointMonitor`);
* the base model's report and IFEval completions, which training cannot change, and the best checkpoint's IFEval
  completions while the report generates its report-split completions (:mod:`.report_stage`);
* speculative jobs (``yields``): a new best checkpoint's report completions while training goes on. They give way,
  at a batch boundary, to any other job that arrives (the monitor's next checkpoint does not wait behind a report
  that a later best may make useless), resume where they stopped, and end at once when cancelled.

A job runs the caller's own call (:func:`rubric_reward.evaluation.rollouts.generate_responses`) with its model, adapter,
dtype, batches and torch threads, so the texts are the ones the caller would get (greedy decoding through the
same kernels). It is keyed by everything its texts depend on (the adapter by its weights' hash); the caller takes
the texts with :meth:`SideGenerator.take` and generates them itself when the key differs, the job failed, the
child died, or the child has not started it yet (the caller would otherwise wait idle: a ``NAME.started`` file,
created exclusively by whichever of the two comes first, decides who generates it). Jobs travel to the child as
JSON lines on its stdin and come back as files in ``side_generation/``, so a resumed run does not generate a
finished job again. The child runs at a lower priority than training, with
an allocator that hands large blocks back when they are freed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...io.journal import write_atomic
from .checkpoints import adapter_sha256
from .ranks import say

__all__ = ["SideGenerator", "job_key", "wanted"]

DIR = "side_generation"


def job_key(model: str, prompts: Sequence[Any], kwargs: Mapping[str, Any], threads: int,
            adapter: str | Path | None = None) -> str:
    """What a job's texts depend on, hashed: the model, the adapter's weights, the prompts, the generation
    arguments and torch's threads."""
    blob = json.dumps({"model": model, "adapter": None if adapter is None else str(adapter),
                       "adapter_sha256": adapter_sha256(adapter), "prompts": list(prompts),
                       "kwargs": dict(kwargs), "threads": threads},
                      sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def wanted(setting: str, *, backend: str, on_cpu: bool, world_size: int, threads: int, cpus: int) -> bool:
    """Whether to generate beside training: ``true``/``false``, or ``auto``: local transformers generation on
    the CPU, one process, and a CPU that training leaves idle."""
    if setting != "auto":
        return setting == "true"
    return backend == "transformers" and on_cpu and world_size == 1 and cpus > threads


class SideGenerator:
    """The side process and the jobs sent to it (name -> key)."""

    def __init__(self, out_dir: str | Path, threads: int, process: subprocess.Popen | None = None):
        self.out_dir, self.threads, self.process = Path(out_dir), threads, process
        self.keys: dict[str, str] = {}

    @classmethod
    def start(cls, out_dir: str | Path, threads: int) -> SideGenerator:
        """Start the child (``out_dir/side_generation``; ``threads`` torch threads, as the caller's)."""
        out = Path(out_dir) / DIR
        out.mkdir(parents=True, exist_ok=True)
        for marker in out.glob("*.started"):  # an earlier child's claims: its jobs are done or lost
            marker.unlink(missing_ok=True)
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        if not any(k.startswith("MALLOC_") for k in env):
            # Generation only: glibc's own allocator with large blocks always mapped, so they go back when freed.
            # With the training process's kept memory (rubric_reward.util.cpu_memory) one checkpoint's 40 completions
            # peaked at 2.9 GB; with this at 1.8 GB, and the process does not grow from job to job.
            env.update(RUBRIC_REWARD_MALLOC="system", MALLOC_MMAP_THRESHOLD_="131072")
        with open(out / "log.txt", "ab") as log:
            process = subprocess.Popen([sys.executable, "-m", __name__, str(threads)], env=env, stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.PIPE)
        return cls(out, threads, process)

    def _path(self, name: str) -> Path:
        return self.out_dir / f"{name}.json"

    def _saved(self, name: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def submit(self, name: str, model: str, prompts: Sequence[Any], kwargs: Mapping[str, Any],
               adapter: str | Path | None = None, *, yields: bool = False) -> bool:
        """Queue a job (not if its file holds the same job already); False if the child is gone. A job that
        ``yields`` gives way to every other job at its next batch boundary."""
        key = job_key(model, prompts, kwargs, self.threads, adapter)
        self.keys[name] = key
        if (self._saved(name) or {}).get("key") == key:
            return True
        return self._send({"name": name, "key": key, "dir": str(self.out_dir), "model": model,
                           "prompts": list(prompts), "kwargs": dict(kwargs),
                           "adapter": None if adapter is None else str(adapter), "yields": yields})

    def cancel(self, name: str) -> None:
        """Drop job ``name``: the child skips it, or stops it at its next batch boundary; ``take`` gives None."""
        key = self.keys.pop(name, None)
        if key is not None and (self._saved(name) or {}).get("key") != key:
            self._send({"cancel": name})

    def submitted(self, prefix: str = "") -> list[str]:
        """The names of the jobs submitted (and not cancelled) that start with ``prefix``."""
        return [name for name in self.keys if name.startswith(prefix)]

    def _send(self, message: Mapping[str, Any]) -> bool:
        if not self.alive:
            return False
        try:
            self.process.stdin.write(json.dumps(message, ensure_ascii=False, default=str).encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def ready(self, name: str) -> bool:
        """Whether job ``name`` is over: its file is written, or the child is gone."""
        saved = self._saved(name)
        return (saved is not None and saved.get("key") == self.keys.get(name)) or not self.alive

    def take(self, name: str, model: str, prompts: Sequence[Any], kwargs: Mapping[str, Any],
             adapter: str | Path | None = None, *, threads: int) -> tuple[list[str], float] | None:
        """The texts of job ``name`` and the seconds the child spent on them, waiting for the child if it is at
        them; None if it is another job (other prompts, settings, adapter weights or ``threads``), was never
        submitted, failed, the child is gone, or the child has not started it (it then skips it: the caller
        generates it rather than wait idle)."""
        key = job_key(model, prompts, kwargs, threads, adapter)
        if self.keys.get(name) != key:
            return None
        if not self.ready(name) and _claim(self.out_dir, name):
            self.keys.pop(name, None)
            say(f"[side] {name}: not started in the side process yet; generating it here")
            return None
        started = time.monotonic()
        while not self.ready(name):
            time.sleep(0.05)
        waited = time.monotonic() - started
        if waited >= 1:
            say(f"[side] waited {waited:.0f} s for {name}, generated beside training")
        saved = self._saved(name) or {}
        texts = saved.get("texts")
        if saved.get("key") != key or not isinstance(texts, list) or len(texts) != len(prompts):
            say(f"[side] no completions for {name} from the side process (see {self.out_dir}/log.txt): "
                "generating them here")
            return None
        return texts, float(saved.get("seconds") or 0.0)

    def close(self) -> None:
        """Let the child finish its queue and exit; stop it if it does not within a minute."""
        if self.process is None:
            return
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            self.process.wait()


class _Queue:
    """The child's jobs, filled from stdin by a reader thread: cancelled ones are dropped, and a job that yields
    runs only when no other job waits."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.cancelled: set[str] = set()
        self.closed = False
        self.changed = threading.Condition()

    def read(self, stream: Any) -> None:
        for raw in stream:
            message = json.loads(raw)
            with self.changed:
                if "cancel" in message:
                    self.cancelled.add(message["cancel"])
                else:
                    self.cancelled.discard(message["name"])
                    self.jobs.append(message)
                self.changed.notify_all()
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def next(self) -> dict[str, Any] | None:
        """The next job to run (None: stdin is closed and nothing is left)."""
        with self.changed:
            while True:
                self.jobs = [j for j in self.jobs if j["name"] not in self.cancelled]
                if self.jobs:
                    first = next((i for i, j in enumerate(self.jobs) if not j.get("yields")), 0)
                    return self.jobs.pop(first)
                if self.closed:
                    return None
                self.changed.wait()

    def give_way(self, job: dict[str, Any]) -> bool:
        """Whether ``job`` (one that yields) stops at this batch boundary: it was cancelled, or another job waits."""
        with self.changed:
            return job["name"] in self.cancelled or any(
                not j.get("yields") and j["name"] not in self.cancelled for j in self.jobs)

    def put_back(self, job: dict[str, Any]) -> None:
        with self.changed:
            self.jobs.insert(0, job)


def _claim(folder: Path, name: str) -> bool:
    """Whether this process is the one that generates job ``name`` (the first to create its marker)."""
    try:
        os.close(os.open(folder / f"{name}.started", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _run_job(job: dict[str, Any], queue: _Queue | None = None) -> bool:
    """Run ``job`` (or, for a job that yields, as much of it as it may); True when it is over."""
    from ...evaluation.rollouts import generate_responses

    if "done" not in job and not _claim(Path(job["dir"]), job["name"]):
        print(f"[side] {job['name']}: the caller generates it", flush=True)
        return True
    started = time.monotonic()
    done: dict[int, str] = job.setdefault("done", {})
    todo = [i for i in range(len(job["prompts"])) if i not in done]
    until = (lambda: queue.give_way(job)) if queue is not None and job.get("yields") else None
    try:
        texts = generate_responses([job["prompts"][i] for i in todo], model=job["model"], adapter=job["adapter"],
                                   progress=False, until=until, **job["kwargs"])
        done.update((i, t) for i, t in zip(todo, texts, strict=True) if t is not None)
        job["seconds"] = job.get("seconds", 0.0) + time.monotonic() - started
        if len(done) < len(job["prompts"]):
            return False  # gave way: the rest resumes in one call, at a batch boundary of the first call's order
        saved = {"key": job["key"], "texts": [done[i] for i in range(len(done))], "seconds": round(job["seconds"], 2)}
    except Exception as exc:  # one failed job does not stop the queue; its caller generates it
        print(f"[side] {job['name']}: {type(exc).__name__}: {exc}", flush=True)
        saved = {"key": job["key"], "error": f"{type(exc).__name__}: {exc}"}
    write_atomic(Path(job["dir"]) / f"{job['name']}.json", json.dumps(saved, ensure_ascii=False))
    return True


def _main(threads: int) -> None:
    from ...util.threads import prepare_environment, set_torch_threads

    if hasattr(os, "nice"):
        os.nice(10)  # training comes first (set here: a preexec_fn is unsafe in a threaded parent)
    prepare_environment()
    set_torch_threads(threads)
    queue = _Queue()
    threading.Thread(target=queue.read, args=(sys.stdin.buffer,), daemon=True).start()
    while (job := queue.next()) is not None:
        if not _run_job(job, queue):
            if job["name"] in queue.cancelled:
                print(f"[side] {job['name']}: cancelled after {len(job['done'])} of {len(job['prompts'])}",
                      flush=True)
            else:
                queue.put_back(job)


if __name__ == "__main__":
    _main(int(sys.argv[1]))
