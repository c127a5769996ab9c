"""Group judging against per-criterion and per-item judging on one GRPO-sized batch (a benchmark).

One batch of 8 prompts x 8 completions x 10 criteria goes through ``RubricReward`` (as TRL calls it) with
the judge in each mode: ``per_criterion``, ``per_item``, ``group`` (one criterion per call) and ``group``
with k criteria per call. It prints

* per mode: judge calls, prompt characters and prompt tokens as the loopback server counted them (with
  the SmolLM2 tokenizer when its converted folder is in the cache, else characters / 4; completion tokens
  are the server's characters / 4),
  and the wall time of the reward call at 50 ms and 500 ms judge latency (the server in its own process);
* parity: with a scripted judge whose verdicts depend only on the completion, whether every mode gives
  the per-criterion rewards;
* position bias: a scripted judge that favours the first-shown completion (``first``: MET for it on every
  criterion; ``primacy``: MET with a chance falling from 0.8 at the first position to 0 at the last), over
  ``--bias-seeds`` grading seeds: the share of groups whose reward ranking equals the unbiased one, and the
  mean absolute reward error, for group judging without shuffling, with shuffling, and with shuffling plus
  the reversed second pass.

    python benchmarks/group_judging.py [--prompts 8] [--generations 8] [--criteria 10] [--k 5]
                                       [--concurrency 64] [--latencies 50,500] [--bias-seeds 10]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import time

from _bench import filler, rubric_spec

from rubric_reward.rl import RubricReward
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge
from rubric_reward.testing.judge_server import spawn as spawn_judge

TASK = ("You are a support agent for an online shop. A customer writes: my order arrived with a cracked "
        "screen, the box was dented, and I need the laptop for work on Monday. I paid with a gift card and a "
        "credit card. Explain what you will do, what the customer must send you, when the refund or the "
        "replacement arrives, and how the two payment methods are refunded. Keep it under 200 words, use a "
        "warm tone, give one clear next step, and do not invent any policy the shop does not have. ") * 2


def modes(k: int) -> dict[str, dict]:
    # one pass each (the default group_passes: 2 doubles the group calls): the figures docs/judges.md states
    return {"per_criterion": {"mode": "per_criterion"}, "per_item": {"mode": "per_item"},
            "group": {"mode": "group", "group_passes": 1},
            f"group, k={k}": {"mode": "group", "group_criteria": k, "group_passes": 1}}


def make_batch(prompts: int, generations: int, words: int) -> tuple[list, list]:
    ps, cs = [], []
    for p in range(prompts):
        prompt = [{"role": "user", "content": f"[case {p}] {TASK}"}]
        for g in range(generations):
            ps.append(prompt)  # TRL repeats one prompt object per generation
            cs.append([{"role": "assistant", "content": f"Reply {p}.{g}: {filler(p * 11 + g * 3, words)}"}])
    return ps, cs


def completion_only(name: str, response: str) -> str:
    """A verdict from the completion alone (the same text gets the same verdict in any call)."""
    return "MET" if hashlib.sha256(f"{name}|{response}".encode()).digest()[0] % 3 else "UNMET"


def scripted(criteria: int, **kw) -> ScriptedJudge:
    names = [f"criterion_{i}" for i in range(criteria)]
    return ScriptedJudge({n: (lambda r, _, n=n: completion_only(n, r)) for n in names}, **kw)


def token_counter():
    """Prompt tokens of a request body: the SmolLM2 tokenizer when converted, else characters / 4."""
    from rubric_reward.io.models import default_model_dir

    folder = default_model_dir()
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        return "SmolLM2 tokenizer", lambda body: sum(len(tok.encode(str(m.get("content", ""))).ids)
                                                     for m in body["messages"])
    return "characters / 4", lambda body: sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4 + 1


def reward_call(judge: dict, rubric: dict, prompts: list, completions: list, **grading) -> tuple[list, float]:
    reward = RubricReward(judge=judge, rubric=rubric, grading=grading or {})
    try:
        start = time.perf_counter()
        out = reward(prompts=prompts, completions=completions)
        return out, time.perf_counter() - start
    finally:
        reward.close()


def volumes(args, rubric, prompts, completions) -> tuple[dict, dict, str]:
    how, count = token_counter()
    rows, rewards = {}, {}
    with JudgeServer(scripted(args.criteria), count_tokens=count) as server:
        for name, mode in modes(args.k).items():
            server.reset_stats()
            judge = {"model": "judge", "base_url": server.base_url, "max_concurrency": args.concurrency,
                     "limit_scope": "process", **mode}
            rewards[name], _ = reward_call(judge, rubric, prompts, completions)
            chars = sum(len(str(m.get("content", ""))) for b in server.bodies for m in b["messages"])
            prompt_tokens = sum(count(b) for b in server.bodies)
            total = sum(t for _, t in server.tokens)
            rows[name] = {"calls": server.requests, "chars": chars, "prompt_tokens": prompt_tokens,
                          "completion_tokens": total - prompt_tokens}
    return rows, rewards, how


def walls(args, rubric, prompts, completions) -> dict:
    out: dict = {}
    for latency in args.latencies:
        proc, url = spawn_judge(latency)
        try:
            for name, mode in modes(args.k).items():
                judge = {"model": "judge", "base_url": url, "max_concurrency": args.concurrency,
                         "limit_scope": "process", **mode}
                reward = RubricReward(judge=judge, rubric=rubric)
                try:
                    reward(prompts=prompts[:8], completions=[[{"role": "assistant", "content": "warm-up"}]] * 8)
                    times = []
                    for _ in range(args.repeats):
                        start = time.perf_counter()
                        reward(prompts=prompts, completions=completions)
                        times.append(time.perf_counter() - start)
                finally:
                    reward.close()
                out[(name, latency)] = statistics.median(times)
        finally:
            proc.terminate()
            proc.wait(5)
    return out


def ranks(values: list) -> tuple:
    """Competition ranks (ties share the lower rank) of a group's rewards."""
    return tuple(sum(1 for w in values if w > v) for v in values)


def bias(args, rubric, prompts, completions, truth: list) -> dict:
    from scipy.stats import kendalltau

    n = args.generations
    profiles = {"first": 1.0, "primacy": lambda pos, size: 0.8 * (1 - pos / max(1, size - 1))}
    settings = {"no shuffle, 1 pass": ({"group_passes": 1}, {"shuffle": False}),
                "shuffle, 1 pass": ({"group_passes": 1}, {}),
                "shuffle, 2 passes": ({"group_passes": 2}, {})}
    out: dict = {}
    for profile, p in profiles.items():
        with JudgeServer(scripted(args.criteria, position_bias=p), record_bodies=False) as server:
            for label, (mode, grading) in settings.items():
                same = groups = 0
                errors, taus = [], []
                for seed in range(args.bias_seeds):
                    judge = {"model": "judge", "base_url": server.base_url, "max_concurrency": args.concurrency,
                             "limit_scope": "process", "mode": "group", **mode}
                    got, _ = reward_call(judge, rubric, prompts, completions, seed=seed, **grading)
                    for g in range(0, len(got), n):
                        groups += 1
                        same += ranks(got[g:g + n]) == ranks(truth[g:g + n])
                        tau = kendalltau(got[g:g + n], truth[g:g + n]).statistic
                        taus.append(1.0 if tau != tau else tau)  # both constant: the same (no) ranking
                    errors += [abs(a - b) for a, b in zip(got, truth, strict=True)]
                out[(profile, label)] = (same / groups, statistics.mean(taus), statistics.mean(errors), groups)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--criteria", type=int, default=10)
    ap.add_argument("--k", type=int, default=5, help="criteria per group call in the 'group, k' mode")
    ap.add_argument("--words", type=int, default=120)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latencies", type=lambda s: [float(x) for x in s.split(",")], default=[50.0, 500.0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bias-seeds", type=int, default=10)
    args = ap.parse_args(argv)

    rubric = rubric_spec(args.criteria)
    prompts, completions = make_batch(args.prompts, args.generations, args.words)
    rows, rewards, how = volumes(args, rubric, prompts, completions)
    wall = walls(args, rubric, prompts, completions)
    truth = rewards["per_criterion"]
    biased = bias(args, rubric, prompts, completions, truth)

    print(f"batch: {args.prompts} prompts x {args.generations} completions x {args.criteria} criteria, "
          f"concurrency {args.concurrency}, wall = median of {args.repeats}; tokens counted at the server with "
          f"the {how}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    lat = " | ".join(f"wall at {x:g} ms" for x in args.latencies)
    print(f"| mode | judge calls | prompt characters | prompt tokens | completion tokens | {lat} | "
          "rewards = per_criterion |")
    print("|---|---|---|---|---|" + "---|" * len(args.latencies) + "---|")
    base = rows["per_criterion"]
    for name, row in rows.items():
        cells = " | ".join(f"{wall[(name, x)]:.2f} s" for x in args.latencies)
        print(f"| {name} | {row['calls']} | {row['chars']:,} ({row['chars'] / base['chars']:.0%}) | "
              f"{row['prompt_tokens']:,} ({row['prompt_tokens'] / base['prompt_tokens']:.0%}) | "
              f"{row['completion_tokens']:,} | {cells} | {'yes' if rewards[name] == truth else 'NO'} |")
    print()
    print("position bias: groups whose reward ranking equals the unbiased one, mean Kendall tau-b against it, "
          "mean |reward error|")
    print("| judge bias | group judging | same ranking | mean tau-b | mean abs. error | groups |")
    print("|---|---|---|---|---|---|")
    for (profile, label), (rate, tau, err, groups) in biased.items():
        print(f"| {profile} | {label} | {rate:.0%} | {tau:.2f} | {err:.3f} | {groups} |")


if __name__ == "__main__":
    main()
