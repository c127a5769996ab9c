"""A larger labelled pool for ``configs/dpo/offline_long.yaml``: seeded prompts, then pairs as for the shipped ones.

The shipped labelled pairs (:mod:`.labelled_pairs`) have 22 training prompts with pairs; docs/generation.md
estimates that a held-out gain on the 135M generator needs about 110 (a 300-prompt pool). :func:`make_pool`
writes such a pool, seeded: each of :data:`TASKS` (short tasks on topics none of the bundled prompt files use,
each with its topic words) combined with instructions drawn from :data:`INSTRUCTIONS` (the seven instruction types
of the shipped pool, with their IFEval checks and values), one or two per prompt. :func:`ensure_pool` builds the
pairs with :func:`~.labelled_pairs.build_labelled_pairs` (sampling the bundled SmolLM2-135M, about 1 s of CPU per
completion) unless ``pairs.jsonl`` already exists, so a rerun reuses it. The pool is split by prompt with
``test_fraction`` (default 0.1): the long config trains on its ``train`` side
(``labelled:train:<path>``) and keeps the shipped held-out prompts as its held-out set, so its figures compare with
the offline default's.

    python -m rubric_reward.recipes.generator_dpo.labelled_pool --out runs/labelled-long   # unmeasured: hours on 2 cores
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["INSTRUCTIONS", "TASKS", "ensure_pool", "make_pool", "main"]

#: (id, task, topic words): tasks on topics of their own (checked against every bundled prompt file by a test).
TASKS: tuple[tuple[str, str, tuple[str, ...]], ...] = tuple((f"t{i:02d}", t, tuple(w)) for i, (t, w) in enumerate((
    ("Describe how a potter shapes a bowl on the wheel.", ("clay", "bowl", "wheel")),
    ("Explain how a canal lock lifts a narrowboat.", ("lock", "boat", "water")),
    ("Tell a friend how to repot a cactus.", ("cactus", "pot")),
    ("Describe the smell of a bakery at five in the morning.", ("bread", "bakery", "dough")),
    ("Explain what a glacier leaves behind when it melts.", ("glacier", "ice", "rock")),
    ("Give tips for sharpening a kitchen knife.", ("knife", "blade", "stone")),
    ("Describe a night market in a small harbour town.", ("market", "stall", "harbour")),
    ("Explain why owls hunt at night.", ("owl", "night", "prey")),
    ("Describe how a beekeeper checks a hive in spring.", ("hive", "bee", "frame")),
    ("Explain how a sundial tells the time.", ("sundial", "shadow", "sun")),
    ("Give advice on packing a tent for a rainy weekend.", ("tent", "rain", "pack")),
    ("Describe a blacksmith forging a horseshoe.", ("forge", "iron", "horseshoe")),
    ("Explain how sourdough starter stays alive.", ("starter", "flour", "yeast")),
    ("Describe the view from a fire lookout tower.", ("tower", "forest", "view")),
    ("Explain why a compass needle points north.", ("compass", "needle", "north")),
    ("Tell a child how a caterpillar becomes a moth.", ("caterpillar", "moth", "cocoon")),
    ("Describe a rowing crew at dawn on a river.", ("rowing", "oar", "crew")),
    ("Explain how a windmill grinds grain.", ("windmill", "grain", "sail")),
    ("Give tips for keeping a workshop bench tidy.", ("bench", "tool", "workshop")),
    ("Describe an old typewriter in a second-hand shop.", ("typewriter", "key", "shop")),
    ("Explain how a lighthouse keeper spent a winter evening.", ("keeper", "lamp", "winter")),
    ("Describe a snail crossing a garden path after rain.", ("snail", "shell", "path")),
    ("Explain how tides follow the moon.", ("tide", "moon", "sea")),
    ("Give advice on learning to juggle three balls.", ("juggle", "ball", "throw")),
    ("Describe a quiet reading room in an old museum.", ("museum", "reading", "room")),
    ("Explain how a hot air balloon rises.", ("balloon", "air", "burner")),
    ("Tell a neighbour how to compost kitchen scraps.", ("compost", "scraps", "heap")),
    ("Describe a fishing boat returning in a storm.", ("boat", "storm", "wave")),
    ("Explain why cats purr.", ("cat", "purr")),
    ("Give tips for writing a postcard from a holiday.", ("postcard", "holiday", "stamp")),
    ("Describe a mountain hut above the clouds.", ("hut", "cloud", "mountain")),
    ("Explain how a violin makes its sound.", ("violin", "string", "bow")),
    ("Describe a street after the first snowfall of the year.", ("snow", "street")),
    ("Explain how a seed knows which way is up.", ("seed", "root", "shoot")),
    ("Give advice on caring for a goldfish.", ("goldfish", "tank", "water")),
    ("Describe an orchard at apple harvest.", ("orchard", "apple", "harvest")),
    ("Explain how a submarine dives and surfaces.", ("submarine", "tank", "dive")),
    ("Tell a visitor how to find the way through a hedge maze.", ("maze", "hedge", "path")),
    ("Describe a clockmaker repairing a pocket watch.", ("watch", "gear", "clock")),
    ("Explain why some birds fly south in autumn.", ("bird", "south", "autumn")),
    ("Give tips for a first night of stargazing.", ("star", "sky", "telescope")),
    ("Describe a ferry crossing on a foggy morning.", ("ferry", "fog", "deck")),
    ("Explain how a pencil is made.", ("pencil", "graphite", "wood")),
    ("Describe a market gardener planting leeks.", ("leek", "garden", "soil")),
    ("Explain how a spider builds its web.", ("spider", "web", "silk")),
    ("Give advice on choosing walking boots.", ("boot", "walk", "fit")),
    ("Describe a village fete on a summer afternoon.", ("fete", "village", "stall")),
    ("Explain how a volcano forms an island.", ("volcano", "island", "lava")),
    ("Tell a new colleague how the office kettle rota works.", ("kettle", "rota", "tea")),
    ("Describe an empty theatre before the audience arrives.", ("theatre", "stage", "seat")),
    ("Explain why bread goes stale.", ("bread", "stale", "starch")),
    ("Give tips for painting a fence.", ("fence", "paint", "brush")),
    ("Describe a heron waiting at the edge of a pond.", ("heron", "pond", "fish")),
    ("Explain how a map shows hills with contour lines.", ("contour", "map", "hill")),
    ("Describe a bus journey through the countryside.", ("bus", "field", "window")),
    ("Explain how bees find their way home.", ("bee", "home", "sun")),
    ("Give advice on storing winter vegetables.", ("vegetable", "store", "cellar")),
    ("Describe a carpenter building a bookshelf.", ("shelf", "wood", "carpenter")),
    ("Explain why the sea tastes of salt.", ("salt", "sea", "river")),
    ("Describe a kite festival on a windy beach.", ("kite", "wind", "string")),
)))

#: (instruction text, IFEval check, kwargs): the seven instruction types of the shipped pool.
INSTRUCTIONS: tuple[tuple[str, str, dict[str, Any] | None], ...] = (
    ("Use fewer than 40 words.", "ifeval:length_constraints:number_words", {"relation": "less than", "num_words": 40}),
    ("Use fewer than 60 words.", "ifeval:length_constraints:number_words", {"relation": "less than", "num_words": 60}),
    ("Write at least 80 words.", "ifeval:length_constraints:number_words", {"relation": "at least", "num_words": 80}),
    ("Do not use any commas.", "ifeval:punctuation:no_comma", None),
    ("Answer in exactly 3 bullet points using markdown such as * item.",
     "ifeval:detectable_format:number_bullet_lists", {"num_bullets": 3}),
    ("Write fewer than 4 sentences.", "ifeval:length_constraints:number_sentences",
     {"relation": "less than", "num_sentences": 4}),
    ('End your answer with the exact phrase "That is all".', "ifeval:startend:end_checker",
     {"end_phrase": "That is all"}),
)


def _keyword_instruction(topic: Sequence[str], rng: random.Random) -> tuple[str, str, dict[str, Any]]:
    if rng.random() < 0.5 and len(topic) >= 2:
        words = [topic[0], topic[1]]
        return (f"Include the words {words[0]} and {words[1]}.", "ifeval:keywords:existence", {"keywords": words})
    word = topic[-1]
    return (f"Do not use the word {word}.", "ifeval:keywords:forbidden_words", {"forbidden_words": [word]})


def _draw(topic: Sequence[str], rng: random.Random) -> list[tuple[str, str, dict[str, Any] | None]]:
    first = rng.choice([*INSTRUCTIONS, None])  # None: a keyword instruction on the task's own topic words
    picks = [first if first is not None else _keyword_instruction(topic, rng)]
    if rng.random() < 0.4:  # a second instruction of another type
        second = rng.choice(INSTRUCTIONS)
        if second[1] != picks[0][1] and not ("words" in second[1] and "words" in picks[0][1]):
            picks.append(second)
    return picks


def make_pool(n_per_task: int = 5, seed: int = 0) -> list[dict[str, Any]]:
    """``len(TASKS) * n_per_task`` prompts (300 by default), each a task plus one or two instructions, seeded.
    Rows as in ``rubric_reward/data/labelled/prompts.jsonl``: ``id``, ``prompt``, ``instructions``, ``topic``."""
    rng = random.Random(seed)
    rows = []
    for tid, task, topic in TASKS:
        seen: set[str] = set()
        for k in range(n_per_task):
            for _ in range(50):  # a combination drawn twice for one task is drawn again
                picks = _draw(topic, rng)
                text = " ".join([task, *(p[0] for p in picks)])
                if text not in seen:
                    break
            seen.add(text)
            instructions = [{"check": c, **({"kwargs": kw} if kw else {})} for _, c, kw in picks]
            words = [w for w in topic if not any(w in (i.get("kwargs") or {}).get("forbidden_words", ())
                                                  for i in instructions)] or list(topic)
            rows.append({"id": f"{tid}-{k}", "prompt": text, "instructions": instructions, "topic": words})
    return rows


def ensure_pool(folder: str | Path, *, n_per_task: int = 5, seed: int = 0, n: int = 8, test_fraction: float = 0.1,
                generator: Any = None) -> Path:
    """``folder/pairs.jsonl``: made from a seeded pool (``folder/prompts.jsonl``) unless it exists already."""
    from ...io.journal import write_atomic
    from .labelled_pairs import build_labelled_pairs

    folder = Path(folder)
    pairs = folder / "pairs.jsonl"
    if pairs.is_file():
        return pairs
    folder.mkdir(parents=True, exist_ok=True)
    prompts = folder / "prompts.jsonl"
    write_atomic(prompts, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in make_pool(n_per_task, seed)))
    stats = build_labelled_pairs(prompts, pairs, generator=generator, n=n, seed=seed, test_fraction=test_fraction)
    write_atomic(folder / "stats.json", json.dumps(stats, indent=2) + "\n")
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Make the larger labelled pool of configs/dpo/offline_long.yaml (seeded).")
    p.add_argument("--out", default="runs/labelled-long", help="folder for prompts.jsonl and pairs.jsonl")
    p.add_argument("--per-task", type=int, default=5, help="prompts per task (60 tasks)")
    p.add_argument("--n", type=int, default=8, help="completions per prompt")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--test-fraction", type=float, default=0.1)
    args = p.parse_args(argv)
    path = ensure_pool(args.out, n_per_task=args.per_task, seed=args.seed, n=args.n, test_fraction=args.test_fraction)
    print(f"labelled pool: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
