"""One GRPO-sized batch through the reward adapter (a benchmark, not a timed test).

64 completions (8 prompts x 8 generations) against a 10-criterion rubric = 640 judge calls, sent to
the scripted loopback judge at 50 ms latency with concurrency 64. It prints:

* the adapter's wall time (``RubricReward.__call__`` exactly as TRL calls it, metrics and
  per-completion logging included) against the ideal ceil(640 / 64) x 50 ms (target <= 1.15x);
* the adapter's overhead over ``Scorer.score_batch`` on the same batch (target <= 5%), in wall time
  and in client CPU time (less noisy on a shared machine), runs interleaved, medians reported; and
  the adapter's own work isolated (the same call with the grader replaying the batch's verdicts);
* with half of each group's completions duplicated, the judge calls the server saw against the
  unique completions x criteria (target: equal).

The timed server runs in its own process (``python -m rubric_reward.testing.judge_server``) so it
does not share the client's GIL; the duplicate count uses an in-process server, which counts requests.

    python benchmarks/reward_batch.py [--prompts 8] [--generations 8] [--criteria 10]
                                      [--latency-ms 50] [--concurrency 64] [--repeats 7] [--chat] [--cache]

``--chat`` sends conversational prompts (a system and a user turn, a fresh list per generation, as TRL's
data loader gives them); ``--cache`` puts a SQLite reply cache behind the judge (adapter and Scorer alike)
and makes every timed batch new text, so each call misses the cache and stores its reply.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import tempfile

from _bench import filler, rubric_spec, timed  # first: puts this checkout on sys.path

from rubric_reward import Scorer  # noqa: E402
from rubric_reward.judges import Judge, JudgeConfig, SQLiteCache  # noqa: E402
from rubric_reward.rl import RubricReward  # noqa: E402
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge  # noqa: E402
from rubric_reward.testing.judge_server import spawn as spawn_judge  # noqa: E402


def make_batch(prompts: int, generations: int, words: int, duplicate_half: bool = False,
               chat: bool = False) -> tuple[list, list]:
    ps, cs = [], []
    for p in range(prompts):
        prompt = f"Question {p}: explain how rubric-based rewards work, with an example."
        for g in range(generations):
            k = g % max(1, generations // 2) if duplicate_half else g
            body = filler(p * 7 + k, words)
            ps.append([{"role": "system", "content": "Answer carefully."}, {"role": "user", "content": prompt}]
                      if chat else prompt)
            cs.append(f"[{p}.{k}] {body}")
    return ps, cs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--criteria", type=int, default=10)
    ap.add_argument("--words", type=int, default=120)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--chat", action="store_true", help="conversational prompts")
    ap.add_argument("--cache", action="store_true", help="a reply cache; every timed batch misses it")
    args = ap.parse_args(argv)

    rubric = rubric_spec(args.criteria)
    prompts, completions = make_batch(args.prompts, args.generations, args.words, chat=args.chat)
    n_calls = len(completions) * args.criteria
    ideal = math.ceil(n_calls / args.concurrency) * args.latency_ms / 1000

    proc, url = spawn_judge(args.latency_ms)
    judge = {"model": "judge", "base_url": url, "max_concurrency": args.concurrency, "limit_scope": "process"}
    cache_dir = tempfile.mkdtemp() if args.cache else None
    cache_path = os.path.join(cache_dir, "cache.sqlite") if cache_dir else None
    reward = RubricReward(judge=judge, rubric=rubric, cache=cache_path)
    scorer_judge = Judge(JudgeConfig(**judge), cache=SQLiteCache(cache_path)) if cache_path else judge
    scorer = Scorer(rubric, [scorer_judge], scoring={"abstention": "zero"})
    metrics: dict[str, float] = {}
    fresh = itertools.count()

    def texts() -> list[str]:  # with a cache, new text every batch: every call misses and stores
        if not args.cache:
            return completions
        n = next(fresh)
        return [f"{c} ({n})" for c in completions]

    def trl_kwargs() -> dict:
        return dict(prompts=prompts, completions=texts(), completion_ids=[[0] * 150 for _ in completions],
                    trainer_state=None, log_metric=metrics.__setitem__, log_extra=lambda *_: None)

    try:
        warm_p, warm_c = make_batch(1, 8, args.words, chat=args.chat)  # open the connection pools
        reward(prompts=warm_p, completions=[c + " warm" for c in warm_c])
        scorer.score_batch([(p, c + " warm") for p, c in zip(warm_p, warm_c, strict=True)])
        a_wall, a_cpu, s_wall, s_cpu, d_wall, d_cpu = [], [], [], [], [], []
        runs = {
            "adapter": (lambda: reward(**trl_kwargs()), a_wall, a_cpu),
            "scorer": (lambda: scorer.score_batch(list(zip(prompts, texts(), strict=True))), s_wall, s_cpu),
            "scorer+deadline": (lambda: scorer.score_batch(list(zip(prompts, texts(), strict=True)),
                                                           deadline_s=reward.config.deadline_s), d_wall, d_cpu),
        }
        names = list(runs)
        for i in range(args.repeats):  # interleaved in rotating order, so drifting load hits all alike
            for name in names[i % 3:] + names[: i % 3]:
                fn, walls, cpus = runs[name]
                w, c, got = timed(fn)
                walls.append(w)
                cpus.append(c)
                if name == "adapter":
                    out = got
                    assert all(x is not None for x in out), "unscored completions in the timed batch"
                elif name == "scorer":
                    res = got
                    assert all(r.ok for r in res)
        assert args.cache or [r.score for r in res] == out, "adapter and Scorer disagree"
        # the adapter's own work, isolated: the same call with the grader replaying these verdicts
        replay = [r for r in res]

        async def replayed(pairs, **_):
            return replay[: len(pairs)]

        reward.scorer.grader.grade_many = replayed
        own = statistics.median(timed(lambda: reward(**trl_kwargs()))[1] for _ in range(20))
    finally:
        reward.close()
        scorer.close()
        proc.terminate()
        proc.wait(5)

    aw, sw, ac, sc, dw, dc = (statistics.median(x) for x in (a_wall, s_wall, a_cpu, s_cpu, d_wall, d_cpu))
    print(f"batch: {len(completions)} completions ({args.prompts} prompts x {args.generations}), "
          f"{args.criteria} criteria = {n_calls} judge calls, latency {args.latency_ms:g} ms, "
          f"concurrency {args.concurrency}, median of {args.repeats}{', chat prompts' if args.chat else ''}"
          f"{', reply cache (misses)' if args.cache else ''}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"adapter wall        {aw * 1000:8.1f} ms   ideal {ideal * 1000:.0f} ms   ratio {aw / ideal:.3f} "
          f"(target <= 1.15)  [min {min(a_wall) * 1000:.1f} ms, ratio {min(a_wall) / ideal:.3f}]")
    print(f"Scorer.score_batch  {sw * 1000:8.1f} ms   ratio {sw / ideal:.3f}")
    print(f"Scorer + deadline   {dw * 1000:8.1f} ms   ratio {dw / ideal:.3f}   (the adapter's default "
          f"deadline_s={reward.config.deadline_s:g}, same batch)")
    print(f"adapter overhead    wall {100 * (aw / sw - 1):+6.2f}%   client CPU {100 * (ac / sc - 1):+6.2f}% "
          f"({ac * 1000:.0f} vs {sc * 1000:.0f} ms) over Scorer (target <= 5%)")
    print(f"                    wall {100 * (aw / dw - 1):+6.2f}%   client CPU {100 * (ac / dc - 1):+6.2f}% "
          f"({ac * 1000:.0f} vs {dc * 1000:.0f} ms) over Scorer with the same deadline")
    print(f"adapter's own work  {own * 1000:.1f} ms client CPU per batch with replayed verdicts "
          f"= {100 * own / sc:.2f}% of Scorer's CPU on the batch")
    print(f"client CPU per call adapter {1000 * ac / n_calls:.3f} ms, Scorer {1000 * sc / n_calls:.3f} ms "
          f"({n_calls} judge calls per batch)")

    # duplicates: half of each group repeats the other half
    dup_p, dup_c = make_batch(args.prompts, args.generations, args.words, duplicate_half=True)
    unique = len(set(zip(dup_p, dup_c, strict=True)))
    with JudgeServer(ScriptedJudge(), record_bodies=False) as server:
        rr = RubricReward(judge={**judge, "base_url": server.base_url}, rubric=rubric)
        try:
            out = rr(prompts=dup_p, completions=dup_c)
        finally:
            rr.close()
        calls = server.requests
    assert all(x is not None for x in out)
    print(f"duplicates          {len(dup_c)} completions, {unique} unique -> {calls} judge calls "
          f"(unique x criteria = {unique * args.criteria}; target: equal)")


if __name__ == "__main__":
    main()
