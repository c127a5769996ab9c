"""A rubric generator: any judge backend asked to write rubrics, each answer validated and re-asked once.

The generator is reached like a judge (:class:`~rubric_reward.judges.Judge`: litellm string,
OpenAI-compatible URL, local transformers with ``verdict_mode: generate``, in-process vLLM), through
the same transport (cache, limits, retries). It is asked for the JSON schema (with structured output
where the backend has it) or for a numbered list (``format: list``). The answer is validated by the
rubric loader after trivial repairs (:mod:`.parsing`), re-asked once otherwise, and a rubric that
still fails is returned as a :class:`GeneratedRubric` with ``error`` set and the raw answer kept:
failures are recorded, never dropped.

Sampling: K candidates for one prompt use distinct ``sample_index`` values, so neither the reply
cache nor in-flight dedupe collapses them, and seeded backends get ``seed + sample_index``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..util.loop import SyncFacade
from ..judges.base import ChatReply, ChatRequest, ReplyCache
from ..judges.config import JudgeConfig
from ..judges.judge import Judge, as_judges
from ..rubric import Rubric, RubricError
from .config import GenerationConfig
from .parsing import CUT_OFF, CUT_OFF_KEPT, complete_lines, parse_rubric, slug
from .templates import (generation_messages, reask_messages, rubric_schema, task_text,
                        template_fingerprint_parts)

__all__ = ["GeneratedRubric", "RubricGenerator", "default_generator", "one_judge"]



@dataclass(frozen=True, slots=True)
class GeneratedRubric:
    """One generation attempt's outcome: a validated ``rubric``, or ``error`` with the raw ``text`` kept.

    ``repairs`` lists the trivial fixes applied; ``attempts`` counts asks (2 after a re-ask);
    ``cost`` and the token counts sum over the asks.
    """

    prompt_id: str
    rubric: Rubric | None
    text: str | None
    error: str | None = None
    attempts: int = 1
    repairs: tuple[str, ...] = ()
    sample_index: int = 0
    cost: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.rubric is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_id": self.prompt_id, "ok": self.ok,
            "rubric": None if self.rubric is None else self.rubric.to_dict(),
            "text": self.text, "error": self.error, "attempts": self.attempts, "repairs": list(self.repairs),
            "sample_index": self.sample_index, "cost": self.cost, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "cached": self.cached,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GeneratedRubric:
        rubric = None
        if d.get("rubric") is not None:
            rubric = Rubric.from_obj(d["rubric"], source=f"rubric of {d['prompt_id']!r}")
        return cls(d["prompt_id"], rubric, d.get("text"), d.get("error"), int(d.get("attempts", 1)),
                   tuple(d.get("repairs") or ()), int(d.get("sample_index", 0)), float(d.get("cost", 0.0)),
                   int(d.get("prompt_tokens", 0)), int(d.get("completion_tokens", 0)), bool(d.get("cached", False)))



def default_generator() -> JudgeConfig:
    """The offline default: the bundled SmolLM2-135M-Instruct, generating (not label-scoring), sampled at
    temperature 0.7 with seed 0: greedy decoding makes a 135M model repeat one criterion line after line."""
    from ..io.models import DEFAULT_LOCAL_MODEL

    return JudgeConfig(model=DEFAULT_LOCAL_MODEL, backend="transformers", verdict_mode="generate", max_tokens=1024,
                       temperature=0.7, seed=0)


def one_judge(spec: Any, *, base_url: str | None, cache: ReplyCache | None, temperature: float | None,
               generate: bool = True) -> Judge:
    """One Judge from a spec; a plain local model name gets ``verdict_mode: generate`` when ``generate``."""
    if isinstance(spec, Judge):
        if temperature is None or temperature == spec.config.temperature:
            return spec
        return Judge(replace(spec.config, temperature=temperature), cache=cache or spec.transport.cache)
    if isinstance(spec, str) and not spec.endswith((".yaml", ".yml", ".json")):
        cfg = JudgeConfig(model=spec, base_url=base_url)
        if generate and cfg.resolved_backend() == "transformers":
            cfg = replace(cfg, verdict_mode="generate", max_tokens=max(cfg.max_tokens, 1024))
        spec = cfg
    judges = as_judges(spec, base_url=base_url, cache=cache)
    if len(judges) != 1:
        raise ValueError(f"a rubric generator is one model, got {len(judges)} judge configs")
    judge = judges[0]
    if temperature is not None and temperature != judge.config.temperature:
        judge = Judge(replace(judge.config, temperature=temperature), cache=cache)
    return judge


class RubricGenerator(SyncFacade):
    """Writes rubrics with one generator model. Async core, sync facade; ``close()`` when done.

    ``generator`` is anything :func:`~rubric_reward.judges.as_judges` takes that names one model (a
    model string, a JudgeConfig, a Judge, a one-judge YAML). A plain local model name gets
    ``verdict_mode: generate``. ``temperature`` overrides the config's (K candidates use 0.8).
    ``cache`` is a :class:`~rubric_reward.judges.cache.SQLiteCache` (or any ReplyCache), shared with judges.
    """

    def __init__(self, generator: Any = None, *, config: GenerationConfig | Mapping[str, Any] | None = None,
                 base_url: str | None = None, cache: ReplyCache | None = None, temperature: float | None = None):
        self.config = config if isinstance(config, GenerationConfig) else GenerationConfig.from_dict(config)
        self.judge = one_judge(generator if generator is not None else default_generator(), base_url=base_url,
                                cache=cache, temperature=temperature)
        self._schema = rubric_schema(self.config) if self.config.format == "json" else None
        self._own(self.judge)  # closed by close(), garbage collection or interpreter exit

    @property
    def name(self) -> str:
        return self.judge.name

    def fingerprint(self) -> str:
        """A hash of everything that decides what this generator writes (model, sampling, prompts)."""
        from ..judges.fingerprint import judge_fingerprint

        settings = {k: v for k, v in asdict(self.config).items() if k != "concurrency"}  # operational only
        for added in ("ground_checks", "keep_complete_lines"):
            if not settings[added]:
                del settings[added]  # fingerprints made before the field existed stay valid
        blob = {"judge": judge_fingerprint(self.judge.config), "config": settings,
                **template_fingerprint_parts(self.config)}
        return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ async core
    async def _ask(self, messages: tuple[dict[str, str], ...], prompt_id: str, sample_index: int,
                   name: str, task: str | None = None) -> GeneratedRubric:
        cfg = self.config
        attempts, cost, pt, ct, cached = 0, 0.0, 0, 0, True
        last_text: str | None = None
        problem = ""
        for round_ in range(cfg.reasks + 1):
            request = ChatRequest(messages=messages, schema=self._schema,
                                  max_tokens=cfg.max_tokens, sample_index=sample_index)
            reply: ChatReply = await self.judge.complete(request, accept=self._acceptor(name, task))
            attempts += 1
            cost += reply.cost
            pt += reply.usage.prompt_tokens
            ct += reply.usage.completion_tokens
            cached = cached and reply.cached
            if reply.error is not None:  # transport failure: the transport already retried
                return GeneratedRubric(prompt_id, None, reply.text, f"generator call failed: {reply.error}",
                                       attempts, (), sample_index, cost, pt, ct, cached)
            last_text = reply.text
            try:
                rubric, repairs = self._read(reply, name, task)
                return GeneratedRubric(prompt_id, rubric, reply.text, None, attempts, tuple(repairs),
                                       sample_index, cost, pt, ct, cached)
            except RubricError as exc:
                problem = str(exc)
            if round_ < cfg.reasks:
                messages = reask_messages(messages, reply.text, problem, cfg.format)
        return GeneratedRubric(prompt_id, None, last_text, f"no usable rubric after {attempts} ask(s): {problem}",
                               attempts, (), sample_index, cost, pt, ct, cached)

    def _read(self, reply: ChatReply, name: str, task: str | None) -> tuple[Rubric, list[str]]:
        """The rubric in ``reply`` and the repairs made, or :class:`RubricError` saying why there is none."""
        cfg = self.config
        cut = reply.finish_reason == "length"
        if cut and not (cfg.keep_complete_lines and cfg.format == "list"):
            raise RubricError(f"the answer was {CUT_OFF}={cfg.max_tokens}")
        if not cut:
            return parse_rubric(reply.text, config=cfg, name=name, task=task)
        try:
            rubric, repairs = parse_rubric(complete_lines(reply.text), config=cfg, name=name, task=task)
        except RubricError as exc:
            raise RubricError(f"{exc} (in the complete lines of an answer {CUT_OFF}={cfg.max_tokens})") from None
        return rubric, [*repairs, f"{CUT_OFF_KEPT}={cfg.max_tokens}"]

    def _acceptor(self, name: str, task: str | None) -> Callable[[ChatReply], bool]:
        def accept(reply: ChatReply) -> bool:  # cache only answers that give a rubric: a broken one is asked again
            try:
                self._read(reply, name, task)
                return True
            except RubricError:
                return False
        return accept

    async def agenerate(self, prompt: Any, *, prompt_id: str = "", sample_index: int = 0) -> GeneratedRubric:
        """One instance-level rubric for ``prompt`` (a string or chat messages)."""
        messages = generation_messages(prompt, config=self.config)
        return await self._ask(messages, prompt_id, sample_index, slug(prompt_id, "rubric") if prompt_id else "rubric",
                               task_text(prompt))

    def dataset_sample(self, prompts: Sequence[Any]) -> list[int]:
        """Indices of the seeded sample of ``prompts`` shown for a dataset-level rubric (input order)."""
        n = min(self.config.dataset_sample, len(prompts))
        return sorted(random.Random(self.config.seed).sample(range(len(prompts)), n))

    async def agenerate_dataset(self, prompts: Sequence[Any], *, name: str = "dataset",
                                sample_index: int = 0) -> GeneratedRubric:
        """One dataset-level rubric from a seeded sample of ``prompts``."""
        if not prompts:
            raise ValueError("dataset-level generation needs at least one prompt")
        sample = [prompts[i] for i in self.dataset_sample(prompts)]
        messages = generation_messages(sample, config=self.config, dataset=True)
        return await self._ask(messages, name, sample_index, slug(name, "dataset"))

    async def acandidates(self, prompt: Any, k: int, *, prompt_id: str = "") -> list[GeneratedRubric]:
        """``k`` candidate rubrics for one prompt (sample indexes 0..k-1), concurrently."""
        return list(await asyncio.gather(*(self.agenerate(prompt, prompt_id=prompt_id, sample_index=s)
                                           for s in range(k))))

    async def aclose(self) -> None:
        await self.judge.aclose()

    # ------------------------------------------------------------------ sync facade
    def generate(self, prompt: Any, *, prompt_id: str = "", sample_index: int = 0) -> GeneratedRubric:
        return self._run(self.agenerate(prompt, prompt_id=prompt_id, sample_index=sample_index))

    def generate_dataset(self, prompts: Sequence[Any], *, name: str = "dataset") -> GeneratedRubric:
        return self._run(self.agenerate_dataset(prompts, name=name))

    def candidates(self, prompt: Any, k: int, *, prompt_id: str = "") -> list[GeneratedRubric]:
        return self._run(self.acandidates(prompt, k, prompt_id=prompt_id))

