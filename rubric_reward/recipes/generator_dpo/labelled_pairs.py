"""Labelled response pairs we make ourselves: the better response known by construction.

For each bundled prompt with verifiable instructions (``rubric_reward/data/labelled/prompts.jsonl``:
``id``, ``prompt``, ``instructions`` = IFEval checks with their kwargs, ``topic`` = words an on-topic
answer contains), :func:`build_labelled_pairs` samples ``n`` completions with a generator model (the
bundled SmolLM2-135M-Instruct by default), under a few answer styles so their lengths and wording vary,
and labels each one by the package's programmatic checks:

* **gate** (not a label): a completion enters a pair only if it is a real attempt: at least
  ``min_words`` words, at least one topic word, and not a copy of the prompt;
* **label**: how many of the prompt's instructions the completion follows (strict IFEval checks).

Every two gated completions of one prompt whose labels differ make a pair; the one that follows more
instructions is the better one. At most ``max_pairs`` pairs per prompt (seeded), each shown in a seeded
order. The split is by prompt (``split_ids``, seeded): no prompt has pairs on both sides.

Run ``python -m rubric_reward.recipes.generator_dpo.labelled_pairs`` to rebuild
``rubric_reward/data/labelled/pairs.jsonl`` (about 15 minutes on 2 idle cores).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...io.rows import numbered_jsonl_rows

__all__ = ["STYLES", "Labelled", "build_labelled_pairs", "label_response", "load_labelled", "load_rows", "main"]

#: System prompts the completions are sampled under (None: the bare user turn), so their lengths vary.
STYLES: tuple[str | None, ...] = (
    None,
    "Answer briefly, in one or two sentences.",
    "Answer in detail.",
    "Follow every instruction in the request exactly.",
)


@dataclass(frozen=True, slots=True)
class Labelled:
    """One completion's verdicts: ``gate`` (a real attempt?), ``label`` (instructions followed), ``passed``."""

    gate: bool
    label: int
    passed: tuple[bool, ...]
    why: str = ""


def label_response(prompt: Mapping[str, Any], text: str, *, min_words: int = 8) -> Labelled:
    """Gate and label ``text`` as an answer to ``prompt`` (a row of the labelled prompts file)."""
    from ...checks import run_check
    from ...checks.ifeval import count_words

    passed = tuple(run_check(i["check"], text, i.get("kwargs"), prompt["prompt"]) for i in prompt["instructions"])
    label = sum(passed)
    low = text.lower()
    if count_words(text) < min_words:
        return Labelled(False, label, passed, f"fewer than {min_words} words")
    if not any(w.lower() in low for w in prompt["topic"]):
        return Labelled(False, label, passed, "off topic (no topic word)")
    if " ".join(prompt["prompt"].lower().split()) in " ".join(low.split()):
        return Labelled(False, label, passed, "copies the prompt")
    return Labelled(True, label, passed)


def _pairs(responses: Sequence[dict[str, Any]], max_pairs: int, rng: random.Random) -> list[dict[str, Any]]:
    ok = [r for r in responses if r["gate"]]
    cands = [(a, b) for a, b in itertools.combinations(ok, 2) if a["label"] != b["label"]]
    rng.shuffle(cands)
    out = []
    for a, b in cands[:max_pairs]:
        better, worse = (a, b) if a["label"] > b["label"] else (b, a)
        flip = rng.random() < 0.5
        first, second = (worse, better) if flip else (better, worse)
        out.append({"response_a": first["text"], "response_b": second["text"], "winner": "B" if flip else "A",
                    "label_a": first["label"], "label_b": second["label"]})
    return out


async def _sample(judge: Any, prompts: Sequence[Mapping[str, Any]], n: int, max_tokens: int) -> list[list[str]]:
    from ...judges.base import ChatRequest

    async def one(p: Mapping[str, Any], s: int) -> str:
        style = STYLES[s % len(STYLES)]
        messages = ({"role": "system", "content": style},) if style else ()
        messages += ({"role": "user", "content": p["prompt"]},)
        reply = await judge.complete(ChatRequest(messages=messages, max_tokens=max_tokens, sample_index=s))
        if reply.error is not None:
            raise RuntimeError(f"{p['id']}: sampling failed: {reply.error}")
        return (reply.text or "").strip()

    from ...util.progress import Progress

    with Progress("sampling completions", len(prompts) * n) as bar:
        async def tracked(p: Mapping[str, Any], s: int) -> str:
            text = await one(p, s)
            bar.advance()
            return text

        flat = await asyncio.gather(*(tracked(p, s) for p in prompts for s in range(n)))
    return [list(flat[i * n:(i + 1) * n]) for i in range(len(prompts))]


def build_labelled_pairs(prompts_file: str | Path, out: str | Path, *, generator: Any = None, n: int = 8,
                         max_tokens: int = 160, temperature: float = 0.9, seed: int = 0, max_pairs: int = 6,
                         min_words: int = 8, test_fraction: float = 0.5) -> dict[str, Any]:
    """Sample, label, pair and split (see the module docstring); writes ``out`` (JSONL, one line per prompt)."""
    from dataclasses import replace

    from ...io.journal import write_atomic
    from ...judges.judge import Judge
    from ...generation.generator import default_generator
    from ...generation.human_data import split_ids

    prompts = [dict(row) for _, row in numbered_jsonl_rows(Path(prompts_file))]
    config = generator or replace(default_generator(), temperature=temperature, seed=seed, max_tokens=max_tokens)
    judge = Judge(config)

    async def run() -> list[list[str]]:
        try:
            return await _sample(judge, prompts, n, max_tokens)
        finally:
            await judge.aclose()

    samples = asyncio.run(run())
    _, heldout = split_ids([p["id"] for p in prompts], test_fraction=test_fraction, seed=seed)
    lines, stats = [], {"prompts": len(prompts), "completions": 0, "gated": 0, "pairs": 0, "no_pairs": []}
    for p, texts in zip(prompts, samples, strict=True):
        rng = random.Random(f"{seed}\x1f{p['id']}")
        responses = []
        for text in dict.fromkeys(texts):  # identical samples count once
            lab = label_response(p, text, min_words=min_words)
            responses.append({"text": text, "gate": lab.gate, "label": lab.label, "passed": list(lab.passed),
                              "why": lab.why})
        pairs = _pairs(responses, max_pairs, rng)
        stats["completions"] += len(responses)
        stats["gated"] += sum(r["gate"] for r in responses)
        stats["pairs"] += len(pairs)
        if not pairs:
            stats["no_pairs"].append(p["id"])
        lines.append({"id": p["id"], "prompt": p["prompt"], "split": "heldout" if p["id"] in heldout else "train",
                      "instructions": p["instructions"], "labels": pairs, "responses": responses})
    write_atomic(Path(out), "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    return stats


def load_labelled(side: str, path: str | Path | None = None) -> list[Any]:
    """The ``train`` or ``heldout`` side of the labelled pairs (the shipped file unless ``path``) as
    :class:`~rubric_reward.generation.prompt_rows.PromptRow` s with ``labels`` and ``instructions``;
    prompts without a pair are left out."""
    from importlib import resources

    from ...generation.prompt_rows import PromptRow

    if side not in ("train", "heldout"):
        raise ValueError(f"labelled pairs: side must be 'train' or 'heldout', got {side!r}")
    with resources.as_file(resources.files("rubric_reward.data").joinpath("labelled/pairs.jsonl")) as bundled:
        rows = [row for _, row in numbered_jsonl_rows(Path(path) if path is not None else bundled)]
    return [PromptRow(r["id"], r["prompt"], tuple({k: p[k] for k in ("response_a", "response_b", "winner")}
                                                  for p in r["labels"]), tuple(r["instructions"]))
            for r in rows if r["split"] == side and r["labels"]]


def load_rows(source: str) -> list[Any]:
    """The prompt rows a loop's ``prompts`` / ``heldout.prompts`` names: ``labelled:train`` or
    ``labelled:heldout`` (the shipped pairs), ``labelled:train:PATH`` / ``labelled:heldout:PATH`` (that side of
    another labelled-pairs file, e.g. the larger pool of :mod:`.labelled_pool`), else a prompts JSONL."""
    if source.startswith("labelled:"):
        side, _, path = source.split(":", 1)[1].partition(":")
        return load_labelled(side, path or None)
    from ...generation.prompt_rows import load_prompts

    return load_prompts(source)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rubric_reward.recipes.generator_dpo.labelled_pairs [--out FILE]``: rebuild the shipped pairs."""
    from importlib import resources

    data = resources.files("rubric_reward.data").joinpath("labelled")
    p = argparse.ArgumentParser(description="Rebuild the labelled response pairs (seeded).")
    p.add_argument("--prompts", default=str(data / "prompts.jsonl"))
    p.add_argument("--out", default=str(data / "pairs.jsonl"))
    p.add_argument("--n", type=int, default=8, help="completions per prompt")
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-pairs", type=int, default=6, help="pairs per prompt at most")
    args = p.parse_args(argv)
    stats = build_labelled_pairs(args.prompts, args.out, n=args.n, max_tokens=args.max_tokens, seed=args.seed,
                                 max_pairs=args.max_pairs)
    print(json.dumps(stats), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
