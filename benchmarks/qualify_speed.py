"""``rubric-reward qualify`` against the loopback judge: judge calls and wall time of a judge card (a benchmark).

100 responses (20 prompts x 5) x 10 criteria (8 positive, 2 penalties), each judged K = 5 times by a faithful
planted judge (:class:`~rubric_reward.testing.planted.PlantedJudge`) served on 127.0.0.1 from a thread of this
process (its request count is exact; its CPU shares this process's GIL), with ``--latency-ms`` of judge latency.
It prints one Markdown table: the K judgings, the figures and the card (statistics, bootstrap intervals, files),
the per-criterion red-team (persuadability), and the whole, each with its judge calls and wall seconds.

    python benchmarks/qualify_speed.py [--prompts 20] [--per-prompt 5] [--criteria 10] [--repeats 5]
                                       [--latency-ms 0] [--concurrency 64] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from _bench import ROOT  # noqa: F401  (this checkout on sys.path)

from rubric_reward.evaluation.qualify import QualifyConfig, QualifyRow
from rubric_reward.evaluation.qualify.judging import judge_configs, run_judgings
from rubric_reward.evaluation.qualify.persuasion import persuadability
from rubric_reward.evaluation.qualify.run import measure_card
from rubric_reward.items import Item
from rubric_reward.rubric import Rubric
from rubric_reward.testing.judge_server import JudgeServer
from rubric_reward.testing.planted import PlantedJudge, corpus
from rubric_reward.util.loop import LoopThread


def rubric(n: int) -> Rubric:
    criteria = [{"name": f"criterion_{i}", "requirement": f"The reply covers point {i} of the customer's question."}
                for i in range(n - 2)]
    criteria += [{"name": "rambles", "requirement": "The reply rambles.", "weight": -1},
                 {"name": "invents_policy", "requirement": "The reply invents a shop policy.", "weight": -2}]
    return Rubric.from_obj({"name": "bench", "criteria": criteria})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--per-prompt", type=int, default=5)
    ap.add_argument("--criteria", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--out", default=None, help="where to write the card (default: a temporary folder)")
    args = ap.parse_args()

    r = rubric(args.criteria)
    raw, truth = corpus(r, prompts=args.prompts, per_prompt=args.per_prompt)
    rows = [QualifyRow(r, Item(x["response"], x["prompt"]), x["group"], x["labels"]) for x in raw]
    config = QualifyConfig(repeats=args.repeats, persuasion=False)
    table = []
    with JudgeServer(PlantedJudge(truth), latency_s=args.latency_ms / 1000, record_bodies=False) as server:
        judges = judge_configs({"model": "planted", "max_concurrency": args.concurrency}, server.base_url)
        loop = LoopThread("bench-qualify")
        start = time.perf_counter()
        try:
            judgings = loop.run(run_judgings(rows, judges, config=config))
        finally:
            loop.close()
        table.append((f"{args.repeats} judgings of {len(rows)} responses x {len(r.judged)} criteria",
                      server.requests, time.perf_counter() - start))

        before, start = server.requests, time.perf_counter()
        card = measure_card(judgings, config=config)
        card.write(args.out or tempfile.mkdtemp(prefix="bench-qualify-"))
        table.append(("figures, card.json / card.md / card.png", server.requests - before,
                      time.perf_counter() - start))

        before, start = server.requests, time.perf_counter()
        for c in r.judged:
            persuadability(judges[0], c)
        table.append((f"red-team per criterion ({len(r.judged)} criteria)", server.requests - before,
                      time.perf_counter() - start))
    table.append(("total", sum(t[1] for t in table), sum(t[2] for t in table)))
    print(f"qualify, loopback judge at {args.latency_ms:g} ms, max_concurrency {args.concurrency}: "
          f"card {card.overall}\n")
    print("| stage | judge calls | wall s |\n|---|---|---|")
    for name, calls, wall in table:
        print(f"| {name} | {calls} | {wall:.1f} |")


if __name__ == "__main__":
    main()
