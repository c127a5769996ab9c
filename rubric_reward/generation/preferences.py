"""Preference pairs for training a rubric generator: K candidates -> M judged pairs -> Bradley-Terry ->
chosen (strongest) vs rejected (weakest), up to ``pairs_per_prompt`` rows per prompt (default 1).

Per prompt:

1. ``k`` candidate rubrics from the generator at ``temperature`` (default 8 at 0.8; distinct sample
   indexes). Candidates that fail to parse are recorded in ``candidates.jsonl`` and take no part.
2. Up to ``m`` pairs (default 10) among the valid candidates, a seeded subset of the K(K-1)/2 in which
   every candidate appears at least once (:func:`select_pairs`), judged by the meta-judge (pairwise:
   both orders). Each judgement goes to ``transcripts.jsonl``; failed pairs are recorded and left out.
3. Bradley-Terry strengths (MLE with a Gaussian prior of precision ``prior``) over the candidates that
   took part in at least one successful comparison.
4. :func:`choose_pair`: chosen = strongest, rejected = weakest. **Skip rule**: the prompt gives no row
   when the model's own probability that the strongest beats the weakest,
   sigmoid(theta_best - theta_worst), is below ``min_win_prob`` (default 0.55: their strengths are
   indistinguishable, e.g. all ties), or when both rubrics are the same text. Equal strengths are
   ordered by candidate index, so the choice is deterministic. With ``pairs_per_prompt`` P > 1 the ranking
   is paired from both ends (2nd strongest vs 2nd weakest, ...; :func:`choose_pairs`), each candidate in
   at most one row, stopping at the first pair that fails the skip rule: a prompt where several
   candidates found what the others missed gives DPO each of them, not only the first.

Output folder (``out_dir``): ``dataset/`` (a ``datasets`` dataset written with ``save_to_disk``; rows
``{prompt, chosen, rejected, metadata}`` in TRL's conversational DPO format: ``prompt`` is the
generator's own request messages, ``chosen``/``rejected`` one assistant message holding the rubric as
canonical JSON), ``transcripts.jsonl`` (every meta-judge judgement), ``candidates.jsonl`` (every
generation, failures included), ``prompts.jsonl`` (one status line per prompt: ``pair``, ``skipped``
with the reason, or ``failed``) and ``manifest.json``.

Resumable: prompts with status ``pair`` or ``skipped`` are not redone; a ``failed`` or unfinished
prompt is redone reusing the candidates and judgements already recorded (and the reply cache).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..judges.base import ReplyCache
from ..rubric import Rubric
from .bradley_terry import bradley_terry, win_probability
from .config import GenerationConfig
from .generator import GeneratedRubric, RubricGenerator
from .jobs import job_cache, run_batch
from .metajudge import MetaJudge, MetaJudgeConfig, PairJudgement
from .parsing import rubric_text
from .prompt_rows import PromptRow, load_prompts
from ..io.sections import check_fields, from_section
from .templates import generation_messages

__all__ = ["PreferenceConfig", "PreferenceSummary", "build_preferences", "choose_pair", "choose_pairs",
           "dataset_features", "select_pairs"]


@dataclass(frozen=True, slots=True)
class PreferenceConfig:
    """K candidates at ``temperature``, up to M pairs, BT ``prior``, the skip threshold, prompts in flight."""

    k: int = field(default=8, metadata={"help": "candidate rubrics per prompt", "ge": 2})
    m: int = field(default=10, metadata={
        "help": "meta-judge comparisons (pairs) per prompt, at most: from ceil(k/2) to k(k-1)/2", "ge": 1})
    temperature: float = field(default=0.8, metadata={"help": "the candidates' sampling temperature",
                                                       "ge": 0, "le": 2})
    seed: int = field(default=0, metadata={"help": "sampling and pair selection seed"})
    prior: float = field(default=0.1, metadata={"help": "Bradley-Terry prior (unbeaten candidates)", "gt": 0})
    min_win_prob: float = field(default=0.55, metadata={
        "help": "skip a prompt whose best candidate beats its worst with less probability", "ge": 0.5, "lt": 1})
    concurrency: int = field(default=4, metadata={"help": "prompts in flight", "ge": 1})
    pairs_per_prompt: int = field(default=1, metadata={
        "help": "rows per prompt, at most: the i-th strongest vs the i-th weakest while they pass the skip rule",
        "ge": 1})

    def __post_init__(self) -> None:
        check_fields(self, "preferences")
        if self.m < math.ceil(self.k / 2):
            raise ValueError(f"preferences: field 'm' = {self.m} cannot put all {self.k} candidates in a pair; "
                             f"need m >= {math.ceil(self.k / 2)}")
        if self.m > self.k * (self.k - 1) // 2:
            raise ValueError(f"preferences: field 'm' = {self.m} is more than the {self.k * (self.k - 1) // 2} "
                             f"distinct pairs of k = {self.k} candidates; need m <= k(k-1)/2")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> PreferenceConfig:
        return from_section(cls, d, "preferences")


def select_pairs(k: int, m: int, *, seed: int = 0, key: str = "") -> list[tuple[int, int]]:
    """Up to ``m`` distinct pairs ``(i, j)``, i < j, of ``k`` candidates, every candidate in at least one
    pair; seeded by ``(seed, key)``. Needs ``m >= ceil(k / 2)``; ``m`` is capped at k(k-1)/2."""
    if k < 2:
        return []
    total = k * (k - 1) // 2
    m = min(m, total)
    if m < math.ceil(k / 2):
        raise ValueError(f"select_pairs: {m} pairs cannot cover {k} candidates (need {math.ceil(k / 2)})")
    rng = random.Random(f"{seed}\x1f{key}")
    perm = list(range(k))
    rng.shuffle(perm)
    chosen = {tuple(sorted(perm[i:i + 2])) for i in range(0, k - 1, 2)}
    if k % 2:
        chosen.add(tuple(sorted((perm[-1], rng.choice(perm[:-1])))))
    rest = [(i, j) for i in range(k) for j in range(i + 1, k) if (i, j) not in chosen]
    rng.shuffle(rest)
    pairs = sorted(chosen) + rest[: m - len(chosen)]
    return sorted(pairs)  # type: ignore[arg-type]


def choose_pairs(strengths: Sequence[float], *, min_win_prob: float = 0.55, texts: Sequence[str] | None = None,
                 max_pairs: int = 1) -> tuple[list[tuple[int, int]], str]:
    """``([(chosen, rejected), ...], why)``: the i-th strongest vs the i-th weakest for i < ``max_pairs``,
    each candidate at most once, stopping at the first pair that fails the skip rule (see the module
    docstring); an empty list and the first pair's reason when none passes."""
    if len(strengths) < 2:
        return [], "fewer than two ranked candidates"
    order = sorted(range(len(strengths)), key=lambda i: (-strengths[i], i))
    pairs: list[tuple[int, int]] = []
    probs: list[str] = []
    for i in range(min(max_pairs, len(order) // 2)):
        best, worst = order[i], order[-1 - i]
        p = win_probability(strengths[best], strengths[worst])
        if p < min_win_prob:
            skip = f"indistinguishable: P(strongest beats weakest) = {p:.3f} < {min_win_prob}"
        elif texts is not None and texts[best] == texts[worst]:
            skip = "the strongest and the weakest rubric are identical"
        else:
            pairs.append((best, worst))
            probs.append(f"{p:.3f}")
            continue
        if not pairs:
            return [], skip
        break
    return pairs, f"P(strongest beats weakest) = {', '.join(probs)}"


def choose_pair(strengths: Sequence[float], *, min_win_prob: float = 0.55,
                texts: Sequence[str] | None = None) -> tuple[int | None, int | None, str]:
    """``(chosen, rejected, why)``: the strongest and the weakest, or ``(None, None, reason)`` when
    they are indistinguishable (see the module docstring's skip rule)."""
    pairs, why = choose_pairs(strengths, min_win_prob=min_win_prob, texts=texts)
    return (*pairs[0], why) if pairs else (None, None, why)


def dataset_features() -> Any:
    """The ``datasets.Features`` of the preference dataset (fixed, so an empty dataset has them too)."""
    from datasets import Features, Value

    message = [{"role": Value("string"), "content": Value("string")}]
    meta = {name: Value(t) for name, t in (
        ("prompt_id", "string"), ("pair_rank", "int32"), ("chosen_index", "int32"), ("rejected_index", "int32"),
        ("chosen_strength", "float64"), ("rejected_strength", "float64"), ("win_prob", "float64"),
        ("n_candidates", "int32"), ("n_valid", "int32"), ("n_pairs", "int32"), ("n_failed_pairs", "int32"),
        ("n_ties", "int32"), ("generator", "string"), ("meta_judge", "string"), ("mode", "string"))}
    return Features({"prompt": message, "chosen": message, "rejected": message, "metadata": meta})


@dataclass(frozen=True, slots=True)
class PreferenceSummary:
    """What ``build_preferences`` did: preference pairs (dataset rows), prompts skipped and failed, prompts
    resumed, new spend; paths. ``n_pairs`` equals the prompts with a pair when ``pairs_per_prompt`` is 1."""

    out_dir: Path
    n_prompts: int
    n_pairs: int
    n_skipped: int
    n_failed: int
    n_resumed: int
    cost: float

    @property
    def dataset_path(self) -> Path:
        return self.out_dir / "dataset"

    @property
    def transcripts_path(self) -> Path:
        return self.out_dir / "transcripts.jsonl"


def _h(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False, default=str).encode()).hexdigest()[:24]


class _Builder:
    """Journals keyed by content: a candidate by (generator, prompt, sample index), a judgement by
    (meta-judge, prompt, labels, both rubrics), a prompt's status by all settings; so changing only the
    BT settings re-ranks without a single new call."""

    def __init__(self, gen: RubricGenerator, meta: MetaJudge, cfg: PreferenceConfig, out: Path,
                 gen_fp: str, meta_fp: str):
        from ..io.journal import Journal

        self.gen, self.meta, self.cfg, self.out = gen, meta, cfg, out
        self.gen_fp, self.meta_fp = gen_fp, meta_fp
        self.candidates = Journal(out / "candidates.jsonl")
        self.transcripts = Journal(out / "transcripts.jsonl")
        self.status = Journal(out / "prompts.jsonl")
        self.known_candidates = {k: e for k, e in self.candidates.latest(repair=True).items() if e.get("ok")}
        self.known_pairs = {k: e for k, e in self.transcripts.latest(repair=True).items()
                            if e.get("credit_a") is not None}
        self.spent = 0.0

    def close(self) -> None:
        for j in (self.candidates, self.transcripts, self.status):
            j.close()

    async def candidate(self, row: PromptRow, s: int) -> GeneratedRubric:
        key = f"{_h(self.gen_fp, row.id, row.prompt)}:c{s}"
        known = self.known_candidates.get(key)
        if known is not None:
            return GeneratedRubric.from_dict(known)
        result = await self.gen.agenerate(row.prompt, prompt_id=row.id, sample_index=s)
        self.spent += result.cost
        self.candidates.append({"key": key, **result.to_dict()})
        return result

    async def judge(self, row: PromptRow, i: int, j: int, a: Rubric, b: Rubric) -> dict[str, Any]:
        key = _h(self.meta_fp, row.prompt, list(row.labels), a.fingerprint(), b.fingerprint())
        known = self.known_pairs.get(key)
        if known is not None:
            return {**known, "a": i, "b": j}
        verdict: PairJudgement = await self.meta.acompare(row.prompt, a, b, labels=row.labels or None)
        self.spent += verdict.cost
        entry = {"key": key, "prompt_id": row.id, "a": i, "b": j, **verdict.to_dict()}
        self.transcripts.append(entry)
        return entry

    async def prompt(self, row: PromptRow, pkey: str) -> dict[str, Any]:
        cfg = self.cfg
        cands = await asyncio.gather(*(self.candidate(row, s) for s in range(cfg.k)))
        valid = [s for s, c in enumerate(cands) if c.ok]
        base = {"key": pkey, "id": row.id, "n_candidates": cfg.k, "n_valid": len(valid),
                "candidate_errors": {str(s): c.error for s, c in enumerate(cands) if not c.ok}}
        if len(valid) < 2:
            why = f"only {len(valid)} of {cfg.k} candidates gave a valid rubric"
            return {**base, "status": "failed", "reason": why}
        local = select_pairs(len(valid), cfg.m, seed=cfg.seed, key=row.id)
        pairs = [(valid[x], valid[y]) for x, y in local]
        judged = await asyncio.gather(*(self.judge(row, i, j, cands[i].rubric, cands[j].rubric)
                                        for i, j in pairs))
        ok = [e for e in judged if e.get("credit_a") is not None]
        base.update(n_pairs=len(pairs), n_failed_pairs=len(pairs) - len(ok),
                    n_ties=sum(1 for e in ok if e["outcome"] == "tie"),
                    pair_errors=[e.get("error") for e in judged if e.get("credit_a") is None])
        if not ok:
            return {**base, "status": "failed", "reason": "every meta-judge comparison failed"}
        ranked = sorted({e["a"] for e in ok} | {e["b"] for e in ok})
        pos = {s: n for n, s in enumerate(ranked)}
        bt = bradley_terry(len(ranked), [(pos[e["a"]], pos[e["b"]], e["credit_a"]) for e in ok], prior=cfg.prior)
        strengths = {str(s): bt.strengths[pos[s]] for s in ranked}
        texts = [rubric_text(cands[s].rubric, self.gen.config.format) for s in ranked]
        chosen, why = choose_pairs(bt.strengths, min_win_prob=cfg.min_win_prob, texts=texts,
                                   max_pairs=cfg.pairs_per_prompt)
        base["strengths"] = strengths
        if not chosen:
            return {**base, "status": "skipped", "reason": why}
        rows = [{"chosen_index": ranked[b], "rejected_index": ranked[w], "chosen": texts[b], "rejected": texts[w],
                 "chosen_strength": bt.strengths[b], "rejected_strength": bt.strengths[w],
                 "win_prob": win_probability(bt.strengths[b], bt.strengths[w])} for b, w in chosen]
        return {**base, "status": "pair", "reason": why, "pairs": rows}


def _rows(entry: Mapping[str, Any], prompt: Any, gen: RubricGenerator, meta: MetaJudge) -> list[dict[str, Any]]:
    messages = list(generation_messages(prompt, config=gen.config))
    return [{
        "prompt": messages,
        "chosen": [{"role": "assistant", "content": p["chosen"]}],
        "rejected": [{"role": "assistant", "content": p["rejected"]}],
        "metadata": {
            "prompt_id": entry["id"], "pair_rank": rank, "chosen_index": p["chosen_index"],
            "rejected_index": p["rejected_index"], "chosen_strength": p["chosen_strength"],
            "rejected_strength": p["rejected_strength"], "win_prob": p["win_prob"],
            "n_candidates": entry["n_candidates"], "n_valid": entry["n_valid"],
            "n_pairs": entry["n_pairs"], "n_failed_pairs": entry["n_failed_pairs"], "n_ties": entry["n_ties"],
            "generator": gen.name, "meta_judge": meta.judge.name, "mode": meta.mode,
        },
    } for rank, p in enumerate(entry["pairs"])]


def build_preferences(prompts: str | Path | Sequence[Any], out_dir: str | Path, *, generator: Any,
                      meta_judge: Any, config: PreferenceConfig | Mapping[str, Any] | None = None,
                      generation: GenerationConfig | Mapping[str, Any] | None = None,
                      meta: MetaJudgeConfig | Mapping[str, Any] | None = None, base_url: str | None = None,
                      cache: str | Path | ReplyCache | None = "auto", progress: bool = True) -> PreferenceSummary:
    """Build the preference dataset for ``prompts`` into ``out_dir`` (see the module docstring).

    ``generator`` and ``meta_judge`` are model specs (as for RubricGenerator / MetaJudge) or ready
    objects (a :class:`RubricGenerator` is used as is, so its temperature is its own; a spec gets
    ``config.temperature``). ``cache="auto"`` keeps the reply cache in ``out_dir/cache.sqlite``.
    """
    from ..io.journal import write_atomic
    from ..judges.fingerprint import judge_fingerprint

    cfg = config if isinstance(config, PreferenceConfig) else PreferenceConfig.from_dict(config)
    rows = load_prompts(prompts)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with job_cache(cache, out / "cache.sqlite") as reply_cache:
        gen = generator if isinstance(generator, RubricGenerator) else RubricGenerator(
            generator, config=generation, base_url=base_url, cache=reply_cache, temperature=cfg.temperature)
        mj = meta_judge if isinstance(meta_judge, MetaJudge) else MetaJudge(
            meta_judge, config=meta, base_url=base_url, cache=reply_cache)
        gen_fp = gen.fingerprint()
        meta_fp = _h(judge_fingerprint(mj.judge.config), asdict(mj.config),
                     mj.meta_rubric.fingerprint() if mj.meta_rubric is not None else None)
        settings = {k: v for k, v in asdict(cfg).items() if k != "concurrency"}
        keys = {r.id: _h(gen_fp, meta_fp, settings, r.id, r.prompt, list(r.labels)) for r in rows}
        builder = _Builder(gen, mj, cfg, out, gen_fp, meta_fp)
        finished = {k: e for k, e in builder.status.latest(repair=True).items()
                    if e.get("status") in ("pair", "skipped")}
        todo = [r for r in rows if keys[r.id] not in finished]

        async def one(row: PromptRow) -> tuple[float, bool]:
            before = builder.spent
            entry = await builder.prompt(row, keys[row.id])
            builder.status.append(entry)
            return builder.spent - before, entry["status"] == "failed"

        closers = [c.aclose for c, given in ((gen, generator), (mj, meta_judge)) if c is not given]
        try:
            run_batch("building preferences", todo, one, total=len(rows), concurrency=cfg.concurrency,
                      progress=progress, aclose=closers)
        finally:
            builder.close()

    import datasets

    builder.status.compact([keys[r.id] for r in rows])
    latest = builder.status.latest()
    by_id = {r.id: r for r in rows}
    entries = [latest[keys[r.id]] for r in rows if keys[r.id] in latest]
    data = [r for e in entries if e["status"] == "pair" for r in _rows(e, by_id[e["id"]].prompt, gen, mj)]
    features = dataset_features()
    ds = datasets.Dataset.from_list(data, features=features) if data else datasets.Dataset.from_dict(
        {k: [] for k in features}, features=features)
    tmp = out / ".dataset.tmp"
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    if not progress:
        datasets.disable_progress_bars()
    try:
        ds.save_to_disk(str(tmp), num_shards=1)  # one shard even when empty, so it loads back
    finally:
        if not progress:
            datasets.enable_progress_bars()
    final = out / "dataset"
    if final.exists():
        import shutil

        shutil.rmtree(final)
    tmp.rename(final)
    counts = {s: sum(1 for e in entries if e["status"] == s) for s in ("pair", "skipped", "failed")}
    manifest = {"generator": gen.name, "meta_judge": mj.judge.name, "mode": mj.mode, "config": asdict(cfg),
                "generation": asdict(gen.config), "n_prompts": len(rows), **{f"n_{k}": v for k, v in counts.items()},
                "n_rows": len(data),
                "files": {"dataset": "dataset", "transcripts": "transcripts.jsonl",
                          "candidates": "candidates.jsonl", "prompts": "prompts.jsonl"}}
    write_atomic(out / "manifest.json", json.dumps(manifest, indent=2, default=str) + "\n")
    return PreferenceSummary(out, len(rows), len(data), counts["skipped"], counts["failed"],
                             len(rows) - len(todo), builder.spent)
