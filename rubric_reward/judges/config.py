"""Judge configuration: one place for model, endpoint, sampling, limits and batching mode."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..io.models import DEFAULT_LOCAL_MODEL
from ..io.sections import check_fields, from_section

__all__ = ["ANSWER", "CALLS", "OPERATIONAL", "JudgeConfig", "check_transformers_engine_args", "judge_fields",
           "load_judges"]

_BACKENDS = ("auto", "http", "litellm", "transformers", "vllm")
_LIMIT_SCOPES = ("auto", "world", "process", "shared")
_MODES = ("per_criterion", "per_item", "group")
# the transformers backend's engine_args (anything else there is a mistake, found when the config is read)
TRANSFORMERS_ENGINE_KEYS = ("token_budget", "dtype")
TRANSFORMERS_DTYPES = ("auto", "float32", "bfloat16", "float16")

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
    ``"all"``), with ``group_passes: 2`` (default, twice the calls) adding a second pass in the reverse display
    order (see
    :mod:`rubric_reward.grading.group`).
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

    model: str = field(metadata={**ANSWER, "help": "provider model string (litellm form) or the served model name"})
    name: str = field(default="", metadata={**CALLS, "help": "the judge's name in results (default: model)"})
    backend: str = field(default="auto", metadata={
        **ANSWER, "help": "http with a base URL, litellm otherwise; transformers, vllm: local", "choices": _BACKENDS})
    base_url: str | tuple[str, ...] | None = field(default=None, metadata={
        **ANSWER, "help": "one OpenAI-compatible URL or a list of replicas"})
    api_key_env: str | None = field(default=None, metadata={
        **OPERATIONAL, "help": "the environment variable holding the API key (the key never goes in a config)"})
    temperature: float = field(default=0.0, metadata={**ANSWER, "help": "sampling temperature", "ge": 0, "le": 2})
    top_p: float | None = field(default=None, metadata={**ANSWER, "help": "nucleus sampling", "gt": 0, "le": 1})
    max_tokens: int = field(default=512, metadata={**ANSWER, "help": "the longest answer", "ge": 1})
    seed: int | None = field(default=None, metadata={**ANSWER, "help": "sampling seed (seed + sample index)"})
    extra_body: Mapping[str, Any] = field(default_factory=dict, metadata={
        **ANSWER, "help": "extra fields of the request body"})
    structured_output: bool = field(default=True, metadata={
        **ANSWER, "help": "send the verdict JSON schema as response_format"})
    logprobs: bool = field(default=False, metadata={**CALLS, "help": "ask for token logprobs (logprob verdicts)"})
    top_logprobs: int = field(default=5, metadata={**ANSWER, "help": "logprobs per token", "ge": 0})
    verdict_mode: str = field(default="logprob", metadata={
        **ANSWER, "help": "local judges: score labels as continuations (logprob) or generate JSON",
        "choices": ("logprob", "generate")})
    engine_args: Mapping[str, Any] = field(default_factory=dict, metadata={
        **ANSWER, "help": "vllm.LLM(...) arguments, or {token_budget, dtype} for transformers"})
    mode: str | int = field(default="per_criterion", metadata={
        **CALLS, "help": "per_criterion, per_item, group, or k criteria per call"})
    group_size: int = field(default=8, metadata={**CALLS, "help": "mode group: responses per call", "ge": 1})
    group_criteria: int | str = field(default=1, metadata={
        **CALLS, "help": "mode group: criteria per call (k or 'all')"})
    group_passes: int = field(default=2, metadata={
        **CALLS, "help": "mode group: 2 (default) asks each call again in the reverse order, so a judge's "
        "position bias does not decide a verdict; it costs twice the group calls (1 halves them)",
        "choices": (1, 2)})
    samples: int = field(default=1, metadata={**CALLS, "help": "repeated samples per call", "ge": 1})
    weight: float = field(default=1.0, metadata={**CALLS, "help": "ensemble weight", "ge": 0})
    max_concurrency: int = field(default=64, metadata={
        **OPERATIONAL, "help": "requests in flight to the endpoint", "ge": 1})
    rpm: int | None = field(default=None, metadata={**OPERATIONAL, "help": "requests per minute", "ge": 1})
    tpm: int | None = field(default=None, metadata={**OPERATIONAL, "help": "tokens per minute", "ge": 1})
    timeout_s: float = field(default=60.0, metadata={**OPERATIONAL, "help": "one HTTP attempt", "gt": 0})
    max_retries: int = field(default=3, metadata={**OPERATIONAL, "help": "extra attempts", "ge": 0})
    backoff_base_s: float = field(default=0.5, metadata={**OPERATIONAL, "help": "the first retry's wait", "ge": 0})
    backoff_max_s: float = field(default=30.0, metadata={
        **OPERATIONAL, "help": "the longest retry wait (Retry-After included)", "ge": 0})
    call_deadline_s: float | None = field(default=None, metadata={
        **OPERATIONAL, "help": "one logical call, retries and waits included", "gt": 0})
    batch_deadline_s: float | None = field(default=None, metadata={
        **OPERATIONAL, "help": "every call of one batch, from the batch start", "gt": 0})
    replica_concurrency: int | None = field(default=None, metadata={
        **OPERATIONAL, "help": "in-flight cap per base URL", "ge": 1})
    breaker_failures: int = field(default=3, metadata={
        **OPERATIONAL, "help": "failures in a row that open a replica's circuit breaker", "ge": 1})
    breaker_cooldown_s: float = field(default=10.0, metadata={
        **OPERATIONAL, "help": "how long an open breaker waits", "ge": 0})
    replica_load_factor: float = field(default=2.0, metadata={**OPERATIONAL, "ge": 1, "le": 100, "help": (
        "Load bound of prefix-affinity routing over several base URLs: a response's calls go to the replica "
        "its key ranks first unless that replica has more than this factor x the pool's mean calls in "
        "flight; then they spill to the next (counted as spills). Larger keeps more affinity, 1 "
        "balances hardest.")})
    limit_scope: str = field(default="auto", metadata={**OPERATIONAL, "choices": _LIMIT_SCOPES, "help": (
        "How processes share max_concurrency, rpm and tpm. 'auto': a judge reached over the network "
        "(http, litellm) is shared by every process of the machine that calls it (accelerate ranks, "
        "verl's Ray reward workers, a process pool, services) through lock files; a local one (transformers, "
        "in-process vLLM) is per process. 'shared': the machine's processes share it whatever the "
        "backend. 'world': each rank takes limit / WORLD_SIZE, no coordination. 'process': every process "
        "gets the full limits. With WORLD_SIZE and LOCAL_WORLD_SIZE set (torchrun, accelerate on several "
        "nodes) a shared limit is the node's share, limit x LOCAL_WORLD_SIZE / WORLD_SIZE; across nodes "
        "otherwise, point every worker at one `rubric-reward serve` (docs/scaling.md).")})
    input_cost_per_token: float | None = field(default=None, metadata={
        **OPERATIONAL, "help": "price in USD per prompt token", "ge": 0})
    output_cost_per_token: float | None = field(default=None, metadata={
        **OPERATIONAL, "help": "price in USD per completion token", "ge": 0})

    def __post_init__(self) -> None:
        def bad(field_name: str, why: str) -> ValueError:
            return ValueError(f"judge {self.model or '?'!r}: field {field_name!r} {why}")

        if not isinstance(self.model, str) or not self.model.strip():
            raise bad("model", "must be a non-empty string")
        if self.name is None:
            object.__setattr__(self, "name", "")
        check_fields(self, f"judge {self.model!r}")
        if not self.name:
            object.__setattr__(self, "name", self.model)
        if isinstance(self.base_url, tuple):
            urls = tuple(u.rstrip("/") for u in self.base_url)
            if not urls or not all(u.strip() for u in urls):
                raise bad("base_url", f"must be a URL string or a non-empty list of them, got {self.base_url!r}")
            object.__setattr__(self, "base_url", urls if len(urls) > 1 else urls[0])
        elif isinstance(self.base_url, str):
            if not self.base_url.strip():
                raise bad("base_url", "is an empty string")
            object.__setattr__(self, "base_url", self.base_url.rstrip("/"))
        if isinstance(self.mode, str) and self.mode not in _MODES:
            if not self.mode.isdigit():
                raise bad("mode", f"must be 'per_criterion', 'per_item', 'group' or an integer, got {self.mode!r}")
            object.__setattr__(self, "mode", int(self.mode))
        if isinstance(self.mode, int) and self.mode < 1:
            raise bad("mode", f"k criteria per call must be >= 1, got {self.mode}")
        if isinstance(self.group_criteria, str) and self.group_criteria.isdigit():
            object.__setattr__(self, "group_criteria", int(self.group_criteria))
        if self.group_criteria != "all" and (isinstance(self.group_criteria, str) or self.group_criteria < 1):
            raise bad("group_criteria", f"must be a positive integer or 'all', got {self.group_criteria!r}")
        if self.api_key_env is not None and not str(self.api_key_env).replace("_", "").isalnum():
            raise bad("api_key_env", "must name an environment variable (the key itself never goes in a config)")
        if self.resolved_backend() == "transformers":
            check_transformers_engine_args(self)

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
        if isinstance(d, Mapping) and "api_key" in d:
            raise ValueError("judge config: put the key in an environment variable and name it in 'api_key_env'")
        if isinstance(d, Mapping) and "model" not in d:
            raise ValueError("judge config: missing field 'model'")
        return from_section(cls, d, "judge config")


def check_transformers_engine_args(config: JudgeConfig, token_budget: int | None = None) -> int | None:
    """The transformers backend's ``engine_args`` checked (known keys, ``dtype``, ``token_budget``): when the
    config is read, so a bad one stops a run before training, not at the first judge call. Returns the
    token budget (``token_budget`` given, else the engine arg; None: the backend's default)."""
    args = config.engine_args
    unknown = set(args) - set(TRANSFORMERS_ENGINE_KEYS)
    if unknown:
        raise ValueError(f"judge {config.name!r}: engine_args {sorted(unknown)} are not understood by the "
                         f"transformers backend (known: {', '.join(TRANSFORMERS_ENGINE_KEYS)})")
    budget = token_budget if token_budget is not None else args.get("token_budget")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ValueError(f"judge {config.name!r}: engine_args.token_budget must be a positive integer, got {budget!r}")
    dtype = args.get("dtype")
    if dtype is not None and dtype not in TRANSFORMERS_DTYPES:
        raise ValueError(f"judge {config.name!r}: engine_args.dtype must be one of {', '.join(TRANSFORMERS_DTYPES)}, "
                         f"got {dtype!r}")
    return budget


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
        from ..io.files import read_structured

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
