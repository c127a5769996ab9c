"""The generator-training loop: candidates -> meta-judge -> pairs -> DPO -> merged model -> next generator.

``rubric-reward dpo-loop --config configs/dpo/X.yaml --iterations 2``. The YAML is the DPO script's
(TRL keys at the top level, see :mod:`.dpo`) plus a ``loop:`` mapping that maps 1:1 onto
:class:`LoopConfig`. Iteration ``i`` samples candidate rubrics with the current generator (the base
model for ``i = 1``, ``iter_{i-1}/merged`` after that), builds preference pairs with the meta-judge
(:func:`~rubric_reward.generation.preferences.build_preferences`), trains a new LoRA on the current
generator with DPO, and merges it into that generator, which becomes the next one (the paper's recipe).

Layout of ``out_dir``::

    loop.json             the config fingerprint (a resumed run must match it) and the stages done
    config.yaml           the config file as used
    prompts.jsonl         the training prompts (ids and prompts only; an evaluation checks it for leaks)
    cache.sqlite          the reply cache shared by generator and meta-judge calls
    iter_1/
      preferences/        candidates.jsonl, transcripts.jsonl (the meta-judge's judgements),
                          prompts.jsonl (per-prompt status), dataset/ (the DPO pairs), manifest.json
      adapter/            the LoRA adapter, dpo_summary.json, train.log, checkpoints of an unfinished run
      merged/             the merged model: the next iteration's generator
      preferences.done.json, adapter.done.json, merged.done.json   completion markers

Resuming: a stage is finished when its marker exists; markers are written atomically, after the
stage's output is complete, so a crash at any point leaves a stage either finished or not. Finished
stages are never redone. An unfinished ``preferences`` stage resumes from its journals (finished
prompts are kept, recorded candidates and judgements reused); an unfinished ``adapter`` stage
resumes from its last DPO checkpoint (when the config saves checkpoints); ``merged`` is rewritten
(it appears atomically).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..journal import write_atomic

__all__ = ["LAUNCHERS", "STAGES", "LoopConfig", "LoopError", "LoopSummary", "iteration_generators", "load_loop_config",
           "run_loop"]

log = logging.getLogger(__name__)

STAGES = ("preferences", "adapter", "merged")
LAUNCHERS = ("python", "accelerate", "in_process")
# fields that may change between a run and its resumption
_VOLATILE = ("iterations", "progress", "train_launcher", "accelerate_args", "out_dir", "config_path")


class LoopError(RuntimeError):
    """A stage could not finish; the message names the iteration, the stage and where to look."""


@dataclass(frozen=True)
class LoopConfig:
    """The ``loop:`` section of a DPO config.

    ``prompts``: a prompts JSONL (relative paths are relative to the config file) or ``offline`` (the
    bundled prompts); ``limit`` keeps the first N. ``generator``: the base generator, a local model
    (the bundled alias, a folder or a hub id) since DPO trains it; ``generator_backend``: how
    candidates are sampled (``transformers`` or ``vllm``). ``meta_judge``: a judge spec (a model
    string, a mapping of JudgeConfig fields, or a judge YAML); ``meta``: MetaJudgeConfig fields;
    ``generation``: GenerationConfig fields; ``preferences``: PreferenceConfig fields.
    ``train_launcher``: ``python`` (a subprocess), ``accelerate`` (``accelerate launch`` with
    ``accelerate_args``) or ``in_process``. ``min_pairs``: fewer pairs than this stops the loop.
    """

    prompts: str = "offline"
    limit: int | None = None
    generator: str | None = None
    generator_backend: str = "transformers"
    meta_judge: Any = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    generation: Mapping[str, Any] = field(default_factory=dict)
    preferences: Mapping[str, Any] = field(default_factory=dict)
    iterations: int = 2
    out_dir: str = "runs/dpo-loop"
    train_launcher: str = "python"
    accelerate_args: tuple[str, ...] = ()
    merge_dtype: str | None = None
    min_pairs: int = 1
    cache: bool = True
    progress: bool = True
    config_path: str | None = None  # the YAML this came from (set by load_loop_config)

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"loop config: field {name!r} {why}")

        if not self.generator or not str(self.generator).strip():
            raise bad("generator", "is required: the base generator model that DPO trains")
        if self.meta_judge is None:
            raise bad("meta_judge", "is required: a judge model spec that compares rubrics")
        if self.generator_backend not in ("transformers", "vllm"):
            raise bad("generator_backend", f"must be 'transformers' or 'vllm' (DPO needs the weights), "
                      f"got {self.generator_backend!r}")
        if self.train_launcher not in LAUNCHERS:
            raise bad("train_launcher", f"must be one of {', '.join(LAUNCHERS)}, got {self.train_launcher!r}")
        if not isinstance(self.iterations, int) or self.iterations < 1:
            raise bad("iterations", f"must be a positive integer, got {self.iterations!r}")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise bad("limit", f"must be a positive integer or null, got {self.limit!r}")
        if not isinstance(self.min_pairs, int) or self.min_pairs < 1:
            raise bad("min_pairs", f"must be a positive integer, got {self.min_pairs!r}")
        object.__setattr__(self, "accelerate_args", tuple(str(a) for a in self.accelerate_args or ()))
        # validate the nested sections now, not an hour into the run
        from .generate import GenerationConfig
        from .metajudge import MetaJudgeConfig
        from .preferences import PreferenceConfig

        GenerationConfig.from_dict(self.generation)
        MetaJudgeConfig.from_dict(self.meta)
        PreferenceConfig.from_dict(self.preferences)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, *, config_path: str | None = None) -> LoopConfig:
        d = dict(d or {})
        known = {f.name for f in fields(cls)} - {"config_path"}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"loop config: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**d, config_path=config_path)

    def fingerprint(self) -> str:
        """A hash of what decides the loop's artefacts (not how many iterations, not how it is launched)."""
        d = {k: v for k, v in asdict(self).items() if k not in _VOLATILE}
        if self.config_path:
            dpo = _read_yaml(Path(self.config_path))
            dpo.pop("loop", None)
            d["dpo"] = dpo
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such config file")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a DPO config must be a YAML mapping")
    return data


def load_loop_config(path: str | Path, **overrides: Any) -> LoopConfig:
    """The ``loop:`` section of a DPO config file, with ``overrides`` (None values are ignored)."""
    path = Path(path)
    data = _read_yaml(path)
    section = data.get("loop")
    if not isinstance(section, Mapping):
        raise ValueError(f"{path}: no 'loop:' section (the dpo-loop's settings)")
    prompts = section.get("prompts", "offline")
    if prompts != "offline" and not Path(str(prompts)).is_absolute():  # relative to the config file
        section = {**section, "prompts": str((path.parent / str(prompts)).resolve())}
    if overrides.get("prompts") not in (None, "offline"):  # relative to the working directory
        overrides = {**overrides, "prompts": str(Path(overrides["prompts"]).resolve())}
    section = {**section, **{k: v for k, v in overrides.items() if v is not None}}
    return LoopConfig.from_dict(section, config_path=str(path.resolve()))


@dataclass(frozen=True)
class LoopSummary:
    """What ``run_loop`` did: the final generator, and per iteration the stage summaries."""

    out_dir: Path
    generator: str
    iterations: list[dict[str, Any]]
    resumed_stages: int


Hook = Callable[[int, str, str], None]  # (iteration, stage, "start" | "done")


def run_loop(config: LoopConfig, *, generator_factory: Callable[[str, int], Any] | None = None,
             hook: Hook | None = None) -> LoopSummary:
    """Run (or resume) ``config.iterations`` iterations; see the module docstring.

    ``generator_factory(model, iteration)`` returns the generator spec for sampling candidates with
    ``model`` (default: a JudgeConfig on ``generator_backend``). ``hook(iteration, stage, event)`` is
    called at every stage boundary (progress reporting, tests that crash on purpose).
    """
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = _open_state(out, config)
    prompts_file = _write_prompts(out, config)
    factory = generator_factory or _default_factory(config)
    hook = hook or (lambda i, s, e: None)
    cache = str(out / "cache.sqlite") if config.cache else None
    generator = str(config.generator)
    done_before = 0
    report: list[dict[str, Any]] = []
    for i in range(1, config.iterations + 1):
        it = out / f"iter_{i}"
        it.mkdir(exist_ok=True)
        record: dict[str, Any] = {"iteration": i, "generator": generator}
        for stage in STAGES:
            marker = it / f"{stage}.done.json"
            if marker.is_file():
                record[stage] = json.loads(marker.read_text())
                done_before += 1
                continue
            hook(i, stage, "start")
            started = time.perf_counter()
            if stage == "preferences":
                info = _stage_preferences(config, it, prompts_file, factory(generator, i), cache)
            elif stage == "adapter":
                info = _stage_adapter(config, it, generator)
            else:
                info = _stage_merge(config, it, generator)
            info = {"stage": stage, "iteration": i, "generator": generator,
                    "seconds": round(time.perf_counter() - started, 2), "finished_at": _now(), **info}
            write_atomic(marker, json.dumps(info, indent=2, default=str) + "\n")
            record[stage] = info
            state["done"].append(f"iter_{i}/{stage}")
            write_atomic(out / "loop.json", json.dumps(state, indent=2, default=str) + "\n")
            hook(i, stage, "done")
        report.append(record)
        generator = str((it / "merged").resolve())
    return LoopSummary(out, generator, report, done_before)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _open_state(out: Path, config: LoopConfig) -> dict[str, Any]:
    path = out / "loop.json"
    fp = config.fingerprint()
    if path.is_file():
        state = json.loads(path.read_text())
        if state.get("fingerprint") != fp:
            raise LoopError(f"{out}: this folder holds a loop run with a different configuration (fingerprint "
                            f"{state.get('fingerprint')} != {fp}); use another out_dir, or restore the config")
        return state
    state = {"fingerprint": fp, "started_at": _now(), "config": asdict(config), "done": []}
    if config.config_path:
        shutil.copyfile(config.config_path, out / "config.yaml")
    write_atomic(path, json.dumps(state, indent=2, default=str) + "\n")
    return state


def _write_prompts(out: Path, config: LoopConfig) -> Path:
    from .generate import load_prompts

    if config.prompts == "offline":
        from ..data import load_offline_prompts

        rows: list[dict[str, Any]] = [{"id": p.id, "prompt": p.prompt} for p in load_offline_prompts()]
    else:
        rows = [{"id": r.id, "prompt": r.prompt, **({"labels": list(r.labels)} if r.labels else {})}
                for r in load_prompts(config.prompts)]
    if config.limit is not None:
        rows = rows[: config.limit]
    path = out / "prompts.jsonl"
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if path.is_file():
        if path.read_text(encoding="utf-8") != text:
            raise LoopError(f"{path}: the training prompts changed since this loop started; use another out_dir")
    else:
        write_atomic(path, text)
    return path


def _default_factory(config: LoopConfig) -> Callable[[str, int], Any]:
    from ..judges.config import JudgeConfig
    from .generate import GenerationConfig
    from .preferences import PreferenceConfig

    gen = GenerationConfig.from_dict(config.generation)
    prefs = PreferenceConfig.from_dict(config.preferences)

    def make(model: str, iteration: int) -> Any:
        return JudgeConfig(model=model, name=f"generator-iter{iteration - 1}", backend=config.generator_backend,
                           verdict_mode="generate", max_tokens=gen.max_tokens, temperature=prefs.temperature,
                           seed=prefs.seed)

    return make


def _stage_preferences(config: LoopConfig, it: Path, prompts: Path, generator: Any, cache: str | None) -> dict:
    from .preferences import build_preferences

    summary = build_preferences(prompts, it / "preferences", generator=generator, meta_judge=config.meta_judge,
                                config=config.preferences, generation=config.generation, meta=config.meta,
                                cache=cache, progress=config.progress)
    info = {"n_prompts": summary.n_prompts, "n_pairs": summary.n_pairs, "n_skipped": summary.n_skipped,
            "n_failed": summary.n_failed, "cost": summary.cost, "dataset": str(summary.dataset_path)}
    if summary.n_pairs < config.min_pairs:
        raise LoopError(f"{it.name}/preferences: {summary.n_pairs} preference pair(s) from {summary.n_prompts} "
                        f"prompts ({summary.n_skipped} skipped, {summary.n_failed} failed; min_pairs is "
                        f"{config.min_pairs}); see {it / 'preferences' / 'prompts.jsonl'}. Rerun to retry the "
                        "failed prompts, or change the generator or meta-judge")
    if summary.n_failed:
        log.warning("%s/preferences: %d prompt(s) failed and are left out (see prompts.jsonl)", it.name,
                    summary.n_failed)
    return info


def _dpo_argv(config: LoopConfig, it: Path, generator: str) -> list[str]:
    if not config.config_path:
        raise LoopError("the DPO stage needs the config file (load the config with load_loop_config)")
    return ["--config", config.config_path, "--model_name_or_path", generator,
            "--dataset_path", str(it / "preferences" / "dataset"), "--output_dir", str(it / "adapter")]


def _stage_adapter(config: LoopConfig, it: Path, generator: str) -> dict:
    from .dpo import ADAPTER_FILES

    argv = _dpo_argv(config, it, generator)
    adapter = it / "adapter"
    adapter.mkdir(exist_ok=True)
    if config.train_launcher == "in_process":
        from .dpo import parse_args, train

        script, training, model = parse_args(argv)
        train(script, training, model)
    else:
        cmd = [sys.executable, "-m", "rubric_reward.generation.dpo", *argv]
        if config.train_launcher == "accelerate":
            # the launcher of this interpreter's environment, whether or not its bin/ is on PATH
            cmd = [sys.executable, "-m", "accelerate.commands.launch", *config.accelerate_args,
                   "-m", "rubric_reward.generation.dpo", *argv]
        logfile = adapter / "train.log"
        log.warning("%s: training the adapter: %s (log: %s)", it.name, " ".join(cmd), logfile)
        with open(logfile, "a", encoding="utf-8") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env={**os.environ}).returncode
        if rc != 0:
            tail = logfile.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
            raise LoopError(f"{it.name}/adapter: DPO training exited with status {rc}; see {logfile}:\n"
                            + "\n".join(tail))
    missing = [f for f in ADAPTER_FILES if not (adapter / f).is_file()]
    if missing:
        raise LoopError(f"{it.name}/adapter: training finished without {', '.join(missing)} in {adapter}")
    summary_file = adapter / "dpo_summary.json"
    return {"adapter": str(adapter), **(json.loads(summary_file.read_text()) if summary_file.is_file() else {})}


def _stage_merge(config: LoopConfig, it: Path, generator: str) -> dict:
    from .dpo import merge_adapter

    merged = merge_adapter(generator, it / "adapter", it / "merged", dtype=config.merge_dtype)
    return {"merged": str(merged.resolve()), "base": generator}


def iteration_generators(out_dir: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, judge spec)]`` of a loop folder: the base generator, then each iteration's merged model,
    each on the loop's ``generator_backend`` in generate mode (a hub id must not fall through to litellm)."""
    out = Path(out_dir)
    state_file = out / "loop.json"
    if not state_file.is_file():
        raise FileNotFoundError(f"{out}: not a dpo-loop folder (no loop.json)")
    config = json.loads(state_file.read_text())["config"]
    gen = config.get("generation") or {}

    def spec(model: str) -> dict[str, Any]:
        return {"model": model, "backend": config.get("generator_backend", "transformers"),
                "verdict_mode": "generate", "max_tokens": int(gen.get("max_tokens", 1024))}

    models = [("base", spec(str(config["generator"])))]
    i = 1
    while (out / f"iter_{i}" / "merged.done.json").is_file():
        models.append((f"iter_{i}", spec(str((out / f"iter_{i}" / "merged").resolve()))))
        i += 1
    return models
