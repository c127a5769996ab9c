"""Judge configuration: one place for model, endpoint, sampling, limits and batching mode."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..models import DEFAULT_LOCAL_MODEL

__all__ = ["ANSWER", "CALLS", "OPERATIONAL", "JudgeConfig", "judge_fields", "load_judges"]

_BACKENDS = ("auto", "http", "litellm", "transformers", "vllm")
_LIMIT_SCOPES = ("auto", "world", "process", "shared")
_MODES = ("per_criterion", "per_item", "group")
_NUMBERS = ("temperature", "top_p", "timeout_s", "backoff_base_s", "backoff_max_s", "call_deadline_s",
            "batch_deadline_s", "breaker_cooldown_s", "replica_load_factor", "input_cost_per_token",
            "output_cost_per_token", "weight")

# What a JudgeConfig field changes, declared once on the field itself. The reply-cache key, the judge
# fingerprint and the run fingerprint read these (see judge_fields); a field without one fails a test.
ANSWER = {"affects": "answer"}  # what one request returns: in the cache key and in the fingerprints
CALLS = {"affects": "calls"}  # which requests are made, or how their verdicts combine: fingerprints only
OPERATIONAL = {"affects": "nothing"}  # limits, retries, deadlines, prices, the key's variable: in neither


@dataclass(frozen=True, slots=True)
class JudgeConfig:
    """How to reach and drive one judge model.

    ``mode`` batches criteria into calls: ``"per_criterion"`` (default, one call per criterion),
    ``"per_item"`` (all criteria of a response in one call), an integer k (k criteria per call) or
    ``"group"``: one call judges the distinct responses to one prompt together (at most
    ``group_size`` per call, a larger group is split) on ``group_criteria`` criteria (an integer k or
    ``"all"``), with ``group_passes: 2`` adding a second pass in the reverse display order (see
    :mod:`rubric_reward.group_grading`).
    ``verdict_mode`` applies to local backends (transformers, in-process vLLM): ``"logprob"`` scores
    each allowed label as a forced continuation; ``"generate"`` generates and parses JSON.
    ``engine_args`` go to ``vllm.LLM(...)`` for the in-process vLLM backend.
    The API key is read from the environment variable named by ``api_key_env``; the key itself never
    appears in a config, a cache, a result or a log.

    Limits (``max_concurrency``, ``rpm``, ``tpm``) belong to the endpoint (base URL + model) and are
    shared by every judge of the process that points at it; ``limit_scope`` says how processes
    share them (by default every process of the machine that calls a remote judge holds one cap).
    Several base URLs are replicas of one model: a response's calls stay on one replica within
    ``replica_load_factor``; ``replica_concurrency`` caps requests in flight per base URL.
    Retries: ``max_retries`` extra attempts with exponential backoff from ``backoff_base_s`` up to
    ``backoff_max_s`` (Retry-After is honoured up to that cap); ``timeout_s`` bounds one attempt,
    ``call_deadline_s`` one logical call with all its retries, ``batch_deadline_s`` every call of one batch.
    """

    model: str = field(metadata=ANSWER)
    name: str = field(default="", metadata=CALLS)
    backend: str = field(default="auto", metadata=ANSWER)
    base_url: str | tuple[str, ...] | None = field(default=None, metadata=ANSWER)
    api_key_env: str | None = field(default=None, metadata=OPERATIONAL)
    temperature: float = field(default=0.0, metadata=ANSWER)
    top_p: float | None = field(default=None, metadata=ANSWER)
    max_tokens: int = field(default=512, metadata=ANSWER)
    seed: int | None = field(default=None, metadata=ANSWER)
    extra_body: Mapping[str, Any] = field(default_factory=dict, metadata=ANSWER)
    structured_output: bool = field(default=True, metadata=ANSWER)
    logprobs: bool = field(default=False, metadata=CALLS)
    top_logprobs: int = field(default=5, metadata=ANSWER)
    verdict_mode: str = field(default="logprob", metadata=ANSWER)
    engine_args: Mapping[str, Any] = field(default_factory=dict, metadata=ANSWER)
    mode: str | int = field(default="per_criterion", metadata=CALLS)
    group_size: int = field(default=8, metadata=CALLS)
    group_criteria: int | str = field(default=1, metadata=CALLS)
    group_passes: int = field(default=1, metadata=CALLS)
    samples: int = field(default=1, metadata=CALLS)
    weight: float = field(default=1.0, metadata=CALLS)
    max_concurrency: int = field(default=64, metadata=OPERATIONAL)
    rpm: int | None = field(default=None, metadata=OPERATIONAL)
    tpm: int | None = field(default=None, metadata=OPERATIONAL)
    timeout_s: float = field(default=60.0, metadata=OPERATIONAL)
    max_retries: int = field(default=3, metadata=OPERATIONAL)
    backoff_base_s: float = field(default=0.5, metadata=OPERATIONAL)
    backoff_max_s: float = field(default=30.0, metadata=OPERATIONAL)
    call_deadline_s: float | None = field(default=None, metadata=OPERATIONAL)
    batch_deadline_s: float | None = field(default=None, metadata=OPERATIONAL)
    replica_concurrency: int | None = field(default=None, metadata=OPERATIONAL)
    breaker_failures: int = field(default=3, metadata=OPERATIONAL)
    breaker_cooldown_s: float = field(default=10.0, metadata=OPERATIONAL)
    replica_load_factor: float = field(default=2.0, metadata={**OPERATIONAL, "help": (
        "Load bound of prefix-affinity routing over several base URLs: a response's calls go to the replica "
        "its key ranks first unless that replica has more than this factor x the pool's mean calls in "
        "flight; then they spill to the next (counted as spills). >= 1; larger keeps more affinity, 1 "
        "balances hardest.")})
    limit_scope: str = field(default="auto", metadata={**OPERATIONAL, "help": (
        "How processes share max_concurrency, rpm and tpm. 'auto': a judge reached over the network "
        "(http, litellm) is shared by every process of the machine that calls it (accelerate ranks, "
        "verl's Ray reward workers, a process pool, services) through lock files; a local one (transformers, "
        "in-process vLLM) is per process. 'shared': the machine's processes share it whatever the "
        "backend. 'world': each rank takes limit / WORLD_SIZE, no coordination. 'process': every process "
        "gets the full limits. With WORLD_SIZE and LOCAL_WORLD_SIZE set (torchrun, accelerate on several "
        "nodes) a shared limit is the node's share, limit x LOCAL_WORLD_SIZE / WORLD_SIZE; across nodes "
        "otherwise, point every worker at one `rubric-reward serve` (docs/scaling.md).")})
    input_cost_per_token: float | None = field(default=None, metadata=OPERATIONAL)
    output_cost_per_token: float | None = field(default=None, metadata=OPERATIONAL)

    def __post_init__(self) -> None:
        def bad(field_name: str, why: str) -> ValueError:
            return ValueError(f"judge {self.model or '?'!r}: field {field_name!r} {why}")

        if not isinstance(self.model, str) or not self.model.strip():
            raise bad("model", "must be a non-empty string")
        for name in _NUMBERS:
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise bad(name, f"must be a number, got {v!r}")
        urls = self.base_url if isinstance(self.base_url, list | tuple) else [self.base_url]
        if self.base_url is not None and not all(isinstance(u, str) and u.strip() for u in urls):
            raise bad("base_url", f"must be a URL string or a list of them, got {self.base_url!r}")
        if self.name is None:
            object.__setattr__(self, "name", "")
        for name in ("name", "backend", "verdict_mode", "limit_scope"):
            if not isinstance(getattr(self, name), str):
                raise bad(name, f"must be a string, got {getattr(self, name)!r}")
        if not self.name:
            object.__setattr__(self, "name", self.model)
        if self.verdict_mode not in ("logprob", "generate"):
            raise bad("verdict_mode", f"must be 'logprob' or 'generate', got {self.verdict_mode!r}")
        if self.backend not in _BACKENDS:
            raise bad("backend", f"must be one of {', '.join(_BACKENDS)}, got {self.backend!r}")
        if isinstance(self.base_url, list | tuple):
            urls = tuple(str(u).rstrip("/") for u in self.base_url)
            if not urls:
                raise bad("base_url", "is an empty list")
            object.__setattr__(self, "base_url", urls if len(urls) > 1 else urls[0])
        elif isinstance(self.base_url, str):
            object.__setattr__(self, "base_url", self.base_url.rstrip("/"))
        if isinstance(self.mode, str) and self.mode not in _MODES:
            if not self.mode.isdigit():
                raise bad("mode", f"must be 'per_criterion', 'per_item', 'group' or an integer, got {self.mode!r}")
            object.__setattr__(self, "mode", int(self.mode))
        if isinstance(self.mode, bool) or not isinstance(self.mode, str | int):
            raise bad("mode", f"must be 'per_criterion', 'per_item', 'group' or an integer, got {self.mode!r}")
        if isinstance(self.mode, int) and self.mode < 1:
            raise bad("mode", f"k criteria per call must be >= 1, got {self.mode}")
        if isinstance(self.group_criteria, str) and self.group_criteria.isdigit():
            object.__setattr__(self, "group_criteria", int(self.group_criteria))
        if self.group_criteria != "all" and (isinstance(self.group_criteria, bool) or not isinstance(
                self.group_criteria, int) or self.group_criteria < 1):
            raise bad("group_criteria", f"must be a positive integer or 'all', got {self.group_criteria!r}")
        if self.group_passes not in (1, 2) or isinstance(self.group_passes, bool):
            raise bad("group_passes", f"must be 1 or 2, got {self.group_passes!r}")
        for name in ("max_tokens", "samples", "max_concurrency", "top_logprobs", "group_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < (0 if name == "top_logprobs" else 1):
                raise bad(name, f"must be a positive integer, got {getattr(self, name)!r}")
        for name in ("rpm", "tpm"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise bad(name, f"must be a positive integer or null, got {v!r}")
        if not 0.0 <= self.temperature <= 2.0:
            raise bad("temperature", f"must be in [0, 2], got {self.temperature}")
        if self.timeout_s <= 0:
            raise bad("timeout_s", f"must be positive, got {self.timeout_s}")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise bad("max_retries", f"must be an integer >= 0, got {self.max_retries!r}")
        for name in ("backoff_base_s", "backoff_max_s", "breaker_cooldown_s"):
            if getattr(self, name) < 0:
                raise bad(name, f"must be >= 0, got {getattr(self, name)}")
        if not 1.0 <= self.replica_load_factor <= 100.0:
            raise bad("replica_load_factor", f"must be in [1, 100], got {self.replica_load_factor}")
        for name in ("call_deadline_s", "batch_deadline_s"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                raise bad(name, f"must be positive or null, got {v}")
        for name in ("replica_concurrency", "breaker_failures"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise bad(name, f"must be a positive integer, got {v!r}")
        if self.limit_scope not in _LIMIT_SCOPES:
            raise bad("limit_scope", f"must be one of {', '.join(_LIMIT_SCOPES)}, got {self.limit_scope!r}")
        for name in ("input_cost_per_token", "output_cost_per_token"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise bad(name, f"must be >= 0 or null, got {v}")
        if self.weight < 0:
            raise bad("weight", f"must be >= 0, got {self.weight}")
        if self.api_key_env is not None and not str(self.api_key_env).replace("_", "").isalnum():
            raise bad("api_key_env", "must name an environment variable (the key itself never goes in a config)")

    @property
    def base_urls(self) -> tuple[str, ...]:
        if self.base_url is None:
            return ()
        return self.base_url if isinstance(self.base_url, tuple) else (self.base_url,)

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def require_key(self, provider_vars: Sequence[str] = ()) -> None:
        """Pre-flight check, before the first call: a named key variable (``api_key_env``, else the
        provider's ``provider_vars``, any one of which suffices) must be set. Raises ValueError naming it."""
        if self.api_key_env:
            if not os.environ.get(self.api_key_env):
                raise ValueError(f"judge {self.name!r}: the API key variable {self.api_key_env} (api_key_env) "
                                 f"is not set; export it before running")
            return
        if provider_vars and not any(os.environ.get(v) for v in provider_vars):
            raise ValueError(f"judge {self.name!r}: the API key variable {' or '.join(provider_vars)} is not set; "
                             f"export it, or name the variable that holds the key in api_key_env")

    @property
    def group_mode(self) -> bool:
        """Whether this judge judges the responses to one prompt together (``mode: group``)."""
        return self.mode == "group"

    def criteria_per_call(self, n_criteria: int) -> int:
        if self.mode == "per_criterion":
            return 1
        if self.mode == "per_item" or (self.mode == "group" and self.group_criteria == "all"):
            return max(1, n_criteria)
        if self.mode == "group":
            return int(self.group_criteria)
        return int(self.mode)

    def resolved_backend(self) -> str:
        """The backend ``auto`` stands for: http with a base URL, transformers for local models, else litellm."""
        if self.backend != "auto":
            return self.backend
        if self.base_url:
            return "http"
        local = self.model.strip().lower() == DEFAULT_LOCAL_MODEL or Path(self.model).expanduser().is_dir()
        return "transformers" if local else "litellm"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["base_url"] = list(self.base_url) if isinstance(self.base_url, tuple) else self.base_url
        d["extra_body"] = dict(self.extra_body)
        d["engine_args"] = dict(self.engine_args)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JudgeConfig:
        if isinstance(d, str):
            return cls(model=d)
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"judge config: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        if "api_key" in d:
            raise ValueError("judge config: put the key in an environment variable and name it in 'api_key_env'")
        if "model" not in d:
            raise ValueError("judge config: missing field 'model'")
        return cls(**d)


def judge_fields(affects: str) -> frozenset[str]:
    """The JudgeConfig fields declared to change ``affects``: ``"answer"``, ``"calls"`` or ``"nothing"``."""
    return frozenset(f.name for f in fields(JudgeConfig) if f.metadata.get("affects") == affects)


def load_judges(source: str | Path | Mapping | list | JudgeConfig, *, base_url: str | None = None) -> list[JudgeConfig]:
    """Judge configs from YAML (a mapping with ``judges:``, a single judge mapping, or a list), a model
    string, a mapping, a JudgeConfig, or a list of those (an ensemble).

    ``base_url`` applies to the model strings and judge mappings given here that name none (the one
    rule on every path); a judges file is self-contained, and a JudgeConfig is taken as it is.
    """
    obj: Any = source
    where = "judge config"
    if isinstance(source, str | Path) and Path(source).suffix in (".yaml", ".yml", ".json"):
        from ..files import read_structured

        where = str(source)
        obj = read_structured(source, "judge config file")
        base_url = None
    if isinstance(obj, Mapping) and "judges" in obj:
        obj = obj["judges"]
    if isinstance(obj, str | Mapping | JudgeConfig):
        obj = [obj]
    if isinstance(obj, tuple):
        obj = list(obj)
    if not isinstance(obj, list) or not obj:
        raise ValueError(f"{where}: expected a judge, a list of judges, or a mapping with 'judges'")
    out = []
    for i, j in enumerate(obj):
        if isinstance(j, JudgeConfig):
            out.append(j)
            continue
        if isinstance(j, str | Path) and Path(j).suffix in (".yaml", ".yml", ".json"):
            out.extend(load_judges(j))
            continue
        if not isinstance(j, str | Mapping):
            raise ValueError(f"{where}: judges[{i}]: expected a mapping or a model string, got {type(j).__name__}")
        if base_url is not None:
            j = {"model": j} if isinstance(j, str) else j
            if j.get("base_url") is None:
                j = {**j, "base_url": base_url}
        try:
            out.append(JudgeConfig.from_dict(j))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: judges[{i}]: {exc}") from None
    return out
