"""The base model's report completions, generated on the CPU a training run leaves idle.

A run under ``accelerate launch`` trains on one torch thread, so on a 2-core machine one core idles for the whole
of training; the final report then spends minutes generating the *base* model's greedy completions on the report
split and the IFEval subset, which training cannot change. :func:`start` runs that generation in a child process
while the policy trains, with the report's own call (:func:`rubric_reward.rollouts.generate_responses`), model,
dtype, batches and thread count, so the texts are the ones the report would write (greedy decoding through the same
kernels); the report takes them with :meth:`Prefetch.take`. A job is keyed by everything its text depends on, and a
mismatch, a failed child or a missing file means the report generates the texts itself, as before. The child runs
at a lower priority than training, and its files (``base_outputs/``) make a resumed run skip what is done.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...journal import write_atomic
from .ranks import say

__all__ = ["Prefetch", "job_key", "start", "wanted"]

DIR = "base_outputs"


def job_key(model: str, prompts: Sequence[Any], kwargs: Mapping[str, Any], threads: int) -> str:
    """What a job's texts depend on, hashed: the model, the prompts, the generation arguments, torch's threads."""
    blob = json.dumps({"model": model, "prompts": list(prompts), "kwargs": dict(kwargs), "threads": threads},
                      sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def wanted(setting: str, *, backend: str, on_cpu: bool, world_size: int, threads: int, cpus: int) -> bool:
    """Whether to prefetch: ``true``/``false``, or ``auto``: local transformers generation on the CPU, one process,
    and a CPU that training leaves idle."""
    if setting != "auto":
        return setting == "true"
    return backend == "transformers" and on_cpu and world_size == 1 and cpus > threads


class Prefetch:
    """A running (or finished) child generating the base completions of ``jobs`` (name -> prompts, kwargs)."""

    def __init__(self, out_dir: Path, model: str, jobs: Mapping[str, tuple[list[Any], dict[str, Any]]],
                 threads: int, process: subprocess.Popen | None):
        self.out_dir, self.process = out_dir, process
        self.keys = {name: job_key(model, prompts, kwargs, threads) for name, (prompts, kwargs) in jobs.items()}

    def take(self, name: str, model: str, prompts: Sequence[Any], kwargs: Mapping[str, Any], threads: int
             ) -> list[str] | None:
        """The texts of job ``name`` if it is the same job (else None), waiting for the child if needed."""
        key = job_key(model, prompts, kwargs, threads)
        if self.keys.get(name) != key:
            return None
        path = self.out_dir / f"{name}.json"
        if not path.is_file() and self.process is not None:
            started = time.monotonic()
            self.process.wait()
            waited = time.monotonic() - started
            if waited >= 1:
                say(f"[report] waited {waited:.0f} s for the base completions generated beside training")
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            say(f"[report] no base completions from beside training for {name} (see {self.out_dir}/log.txt): "
                "generating them now")
            return None
        texts = saved.get("texts")
        if saved.get("key") != key or not isinstance(texts, list) or len(texts) != len(prompts):
            return None
        return texts

    def close(self) -> None:
        """Stop the child if it still runs (the run ended without a report)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()


def start(out_dir: str | Path, model: str, jobs: Mapping[str, tuple[list[Any], dict[str, Any]]],
          threads: int) -> Prefetch:
    """Start the child for the jobs whose file is missing (none missing: no child)."""
    out = Path(out_dir) / DIR
    out.mkdir(parents=True, exist_ok=True)
    prefetch = Prefetch(out, model, jobs, threads, None)
    todo = {}
    for name, (prompts, kwargs) in jobs.items():
        try:
            done = json.loads((out / f"{name}.json").read_text(encoding="utf-8")).get("key") == prefetch.keys[name]
        except (OSError, ValueError):
            done = False
        if not done:
            todo[name] = {"prompts": prompts, "kwargs": kwargs, "key": prefetch.keys[name]}
    if not todo:
        return prefetch
    spec = out / "spec.json"
    write_atomic(spec, json.dumps({"model": model, "threads": threads, "jobs": todo}, ensure_ascii=False))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    with open(out / "log.txt", "ab") as log:
        prefetch.process = subprocess.Popen([sys.executable, "-m", __name__, str(spec)], env=env, stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    say(f"[grpo] base completions for the report: generating {', '.join(todo)} beside training "
        f"({sum(len(j['prompts']) for j in todo.values())} prompts, pid {prefetch.process.pid})")
    return prefetch


def _main(spec_path: str) -> None:
    from ...threads import prepare_environment, set_torch_threads

    if hasattr(os, "nice"):
        os.nice(10)  # training comes first (set here: a preexec_fn is unsafe in a threaded parent)
    prepare_environment()
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    set_torch_threads(spec["threads"])
    from ...rollouts import generate_responses

    out = Path(spec_path).parent
    for name, job in spec["jobs"].items():
        texts = generate_responses(job["prompts"], model=spec["model"], progress=False, **job["kwargs"])
        write_atomic(out / f"{name}.json", json.dumps({"key": job["key"], "texts": texts}, ensure_ascii=False))


if __name__ == "__main__":
    _main(sys.argv[1])
