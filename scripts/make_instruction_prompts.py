"""Write rubric_reward/data/instructions/prompts.jsonl: the offline default's training prompts (seeded).

    .venv/bin/python scripts/make_instruction_prompts.py            # rewrites the bundled file
    .venv/bin/python scripts/make_instruction_prompts.py --check    # exit 1 if the bundled file differs

Each prompt is a short task on one topic plus one verifiable instruction. Its rubric (all programmatic checks,
no judge needed) gives the instruction weight 2 and adds two criteria a non-answer fails: at least
MIN_WORDS words, and the task's topic word; a penalty (weight -1) takes a quarter off when the topic word comes
SPAM times or more (a list of "*honey*" lines is not an answer), one of weight -2 halves a response that repeats
itself (``text:repeats_itself``: a line 3 times, or few distinct words; "* first:\n*\n*\n*" lists were what
GRPO learnt without it), and one of weight -4 zeroes a completion that holds the instruction's own phrase
("fewer than 40 words") or copies its example ("this phrase"): a copy of the prompt. So the instruction's phrase
alone, one word or silence scores at most half, a copy of the prompt nothing, and the full score needs an
on-topic answer in its own words that follows the instruction. Instruction types were
chosen because SmolLM2-135M-Instruct follows them sometimes but not always (docs/training.md has the
measured base rates), which is where GRPO groups get reward spread.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "rubric_reward" / "data" / "instructions" / "prompts.jsonl"
SEED = 0
MIN_WORDS = 15
SPAM = 5  # the topic word this often or more is spam: a penalty of 1 (of the 4 positive weight points)
REPEATS = -2  # a response that repeats itself (text:repeats_itself) loses half the positive weight

# (task, topic word): the task is one short sentence that contains its topic word.
TOPICS = [
    ("Describe how bees make honey.", "honey"), ("Explain why the sky looks blue.", "sky"),
    ("Give advice to someone learning to swim.", "swim"), ("Describe a walk through a forest.", "forest"),
    ("Explain how a bicycle works.", "bicycle"), ("Describe your favourite kind of bread.", "bread"),
    ("Explain why people keep dogs as pets.", "dogs"), ("Describe a busy train station.", "train"),
    ("Explain how rain forms.", "rain"), ("Give tips for growing tomatoes.", "tomatoes"),
    ("Describe the moon on a clear night.", "moon"), ("Explain why exercise is healthy.", "exercise"),
    ("Describe a day at the beach.", "beach"), ("Explain how to make a cup of tea.", "tea"),
    ("Describe what a library is for.", "library"), ("Explain why sleep matters.", "sleep"),
    ("Give advice for a first job interview.", "interview"), ("Describe a thunderstorm.", "thunder"),
    ("Explain how a volcano erupts.", "volcano"), ("Describe a mountain in winter.", "mountain"),
    ("Explain what a computer does.", "computer"), ("Describe the ocean.", "ocean"),
    ("Give tips for saving money.", "money"), ("Explain how birds fly.", "birds"),
    ("Describe a market in the morning.", "market"), ("Explain why reading is useful.", "reading"),
    ("Describe a garden in spring.", "garden"), ("Explain how a river reaches the sea.", "river"),
    ("Give advice for learning to cook.", "cook"), ("Describe a cat sleeping in the sun.", "cat"),
    ("Explain how snow forms.", "snow"), ("Describe an old castle.", "castle"),
    ("Explain why trees are important.", "trees"), ("Describe a football match.", "football"),
    ("Give tips for studying for an exam.", "exam"), ("Explain how a candle burns.", "candle"),
    ("Describe a city at night.", "city"), ("Explain why we need water.", "water"),
    ("Describe a picnic in the park.", "picnic"), ("Explain how plants grow from seeds.", "seeds"),
    ("Give advice for keeping a room tidy.", "room"), ("Describe a lighthouse.", "lighthouse"),
    ("Explain what makes music enjoyable.", "music"), ("Describe a farm.", "farm"),
    ("Explain how the wind is made.", "wind"), ("Describe a birthday party.", "birthday"),
    ("Give tips for staying calm.", "calm"), ("Explain why the sun is hot.", "sun"),
    ("Describe a quiet village.", "village"), ("Explain how a clock keeps time.", "clock"),
    ("Give advice for planting a tree.", "planting"), ("Describe a desert at noon.", "desert"),
    ("Explain why bridges are built.", "bridges"), ("Describe a school playground.", "playground"),
    ("Give tips for riding a horse.", "horse"), ("Explain how a kite stays up.", "kite"),
    ("Describe a fishing boat.", "boat"), ("Explain why cheese smells strong.", "cheese"),
    ("Describe an airport before dawn.", "airport"), ("Give advice for painting a wall.", "paint"),
    ("Explain how an island forms.", "island"), ("Describe a long country road.", "road"),
    ("Explain why frogs live near ponds.", "frogs"), ("Describe a bakery.", "bakery"),
    ("Give tips for hiking safely.", "hiking"), ("Explain how a camera takes a photo.", "camera"),
    ("Describe a lake at sunset.", "lake"), ("Explain why apples fall from trees.", "apples"),
]

# instruction type -> (instruction text, the IFEval check, its kwargs, the instruction's own phrase[, its example]).
# Each text avoids the topic words; the phrase is what only a copy of the instruction contains, and the example
# what only a copy of the instruction's example contains ("*This phrase*" lists were what GRPO learnt without it):
# a penalty that zeroes either.
INSTRUCTIONS = {
    "fewer_words": ("Answer in fewer than 40 words.", "length_constraints:number_words",
                    {"relation": "less than", "num_words": 40}, "fewer than 40 words"),
    "bullets": ("Answer with exactly 3 markdown bullet points, like:\n* first\n* second\n* third",
                "detectable_format:number_bullet_lists", {"num_bullets": 3}, "exactly 3 markdown bullet points"),
    "placeholders": ("Include at least two placeholders in square brackets, like [name].",
                     "detectable_content:number_placeholders", {"num_placeholders": 2},
                     "placeholders in square brackets"),
    "highlights": ("Highlight at least two phrases with markdown, like *this phrase*.",
                   "detectable_format:number_highlighted_sections", {"num_highlights": 2},
                   "highlight at least two phrases", "this phrase"),
    "no_comma": ("Do not use any commas in your answer, not even one.", "punctuation:no_comma", {},
                 "do not use any commas"),
}


def rubric(name: str, kind: str, topic: str, echo: float = 0, repeats: float = REPEATS) -> dict:
    text, check, kwargs, own_phrase, *example = INSTRUCTIONS[kind]
    assert all(phrase in text.casefold() for phrase in [own_phrase, *example]), kind
    instruction = {"name": kind, "check": f"ifeval:{check}", "weight": 2}
    if kwargs:
        instruction["kwargs"] = kwargs
    criteria = [
        instruction,
        {"name": "long_enough", "check": "ifeval:length_constraints:number_words",
         "kwargs": {"relation": "at least", "num_words": MIN_WORDS}},
        {"name": "on_topic", "check": "ifeval:keywords:existence", "kwargs": {"keywords": [topic]}},
        {"name": "topic_spam", "check": "ifeval:keywords:frequency", "weight": -1,
         "kwargs": {"keyword": topic, "frequency": SPAM, "relation": "at least"}},
        {"name": "copies_instruction", "check": "ifeval:keywords:existence", "weight": -4,
         "kwargs": {"keywords": [own_phrase]}},
    ]
    if example:
        criteria.append({"name": "copies_example", "check": "ifeval:keywords:existence", "weight": -4,
                         "kwargs": {"keywords": example}})
    criteria.append({"name": "repeats_itself", "check": "text:repeats_itself", "weight": repeats})
    if echo:
        criteria.append({"name": "echoes_prompt", "check": "text:echoes_prompt", "weight": echo})
    return {"name": name, "criteria": criteria}


def build(seed: int = SEED, echo: float = 0, repeats: float = REPEATS) -> list[dict]:
    """Every topic with every instruction type, in a seeded order; ids say topic and type."""
    rows = []
    for task, topic in TOPICS:
        for kind, (text, *_) in INSTRUCTIONS.items():
            row_id = f"{topic}-{kind}"
            rows.append({"id": row_id, "prompt": f"{task} {text}", "rubric": rubric(row_id, kind, topic, echo, repeats),
                         "benchmark": kind})
    random.Random(seed).shuffle(rows)
    return rows


def render(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the bundled file instead of writing")
    parser.add_argument("--echo-weight", type=float, default=0, help=(
        "add text:echoes_prompt with this (negative) weight to every rubric: a completion that is only words of "
        "its prompt, e.g. the bullets example copied whole (default 0: not in the bundled set)"))
    parser.add_argument("--repeat-weight", type=float, default=REPEATS, help=(
        f"weight of text:repeats_itself in every rubric (a penalty; default {REPEATS}, the bundled set's)"))
    parser.add_argument("--out", type=Path, default=OUT, help="where to write (default: the bundled file)")
    args = parser.parse_args(argv)
    if args.echo_weight > 0:
        parser.error(f"--echo-weight must be negative (a penalty), got {args.echo_weight}")
    if args.repeat_weight >= 0:
        parser.error(f"--repeat-weight must be negative (a penalty), got {args.repeat_weight}")
    text = render(build(echo=args.echo_weight, repeats=args.repeat_weight))
    out = args.out
    if args.check:
        same = out.is_file() and out.read_text(encoding="utf-8") == text
        print(f"{out}: {'up to date' if same else 'differs from the generator'}")
        return 0 if same else 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {len(text.splitlines())} prompts to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
