"""The local judge at the speed of its model: token trees vs the old one-row-per-label judge vs the bound.

    python benchmarks/local_judge.py                        # every row (several minutes: the old judge is slow)
    python benchmarks/local_judge.py --impls new bound      # without the old judge
    python benchmarks/local_judge.py --shapes readme --modes logprob --impls old new bound vllm
    python benchmarks/local_judge.py --impls new bound --dtypes float32 bfloat16   # the weights' dtype

Shapes: ``readme`` is the README's main command (examples/responses.jsonl: 4 responses x 5 judged
criteria of examples/rubrics/support_reply.yaml); ``grpo`` is one GRPO step (16 completions x 4
criteria). Implementations: ``new`` (TransformersBackend on token trees), ``old`` (the previous
implementation, kept in tests/helpers/reference_judge.py), ``bound`` (no judging: one forward over each
response's distinct prefix plus its criteria's tails, hidden states only, same model), ``vllm`` (the
in-process vLLM judge with prefix caching, run with $RUBRIC_REWARD_VLLM_PYTHON or
/work/main/.venv-vllm/bin/python when present). Every row runs in its own subprocess, so its peak RSS
is its own; the model load is excluded from the wall time (not from the RSS). ``--dtypes`` runs ``new`` and
``bound`` with each ``engine_args.dtype`` (the wall / bound ratio is against the bound of the same dtype;
``verdicts = float32`` counts the verdicts equal to the float32 row's). Compare rows of one run:
on a shared machine, runs are not comparable with each other.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from _bench import ROOT  # first: puts this checkout on sys.path

SENTENCES = [
    "I'm sorry your refund has taken this long.", "Refunds post within 5-7 business days after approval.",
    "Yours was approved on Monday, so it should arrive by Friday.", "Please check the card you paid with.",
    "If it has not arrived by then, reply with your order number and I will escalate it.",
    "We value your patience.", "Our policy guarantees refunds within 24 hours.", "Refunds take time.",
    "You can track the refund status on the Orders page of your account.", "Thanks for reaching out!",
    "Banks sometimes hold refunds for a few extra days.", "I have added a note to your case.",
]


def workload(shape: str):
    from rubric_reward.items import Item
    from rubric_reward.rubric import Rubric, load_rubric

    rubric = load_rubric(ROOT / "examples/rubrics/support_reply.yaml")
    if shape == "readme":
        from rubric_reward.io.rows import numbered_jsonl_rows

        rows = [row for _, row in numbered_jsonl_rows(ROOT / "examples/responses.jsonl")]
        return rubric, [Item(response=r["response"], prompt=r["prompt"], id=r["id"]) for r in rows]
    d = rubric.to_dict()
    d["criteria"] = [c for c in d["criteria"] if c["name"] not in ("register",)]
    rubric = Rubric.from_obj(d)
    rng = random.Random(0)
    prompt = "My refund has not arrived after two weeks. When will I get it?"
    items = [Item(response=" ".join(rng.sample(SENTENCES, rng.randint(3, 7))), prompt=prompt, id=str(i))
             for i in range(16)]
    return rubric, items


def cpu_s() -> float:
    """CPU seconds of this process (all threads): steadier than wall time on a shared machine."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_one(shape: str, mode: str, impl: str, model: str, budget: int, max_tokens: int,
            dtype: str = "float32") -> dict:
    from rubric_reward import JudgeConfig, Scorer
    from rubric_reward.judges.judge import Judge

    rubric, items = workload(shape)
    n_calls = len(items) * len(rubric.judged)
    cfg = JudgeConfig(model=model, backend="vllm" if impl == "vllm" else "transformers", verdict_mode=mode,
                      max_tokens=max_tokens, engine_args={"dtype": dtype} if impl in ("new", "bound") else {})
    if impl == "vllm":
        from rubric_reward.judges.vllm_backend import VLLMBackend

        backend = VLLMBackend(cfg)
    elif impl == "old":
        from tests.helpers.reference_judge import ReferenceTransformersBackend

        backend = ReferenceTransformersBackend(cfg)
    else:
        from rubric_reward.judges.transformers_backend import TransformersBackend

        backend = TransformersBackend(cfg, token_budget=budget)
    t0 = time.perf_counter()
    backend.prepare()
    load_s = time.perf_counter() - t0
    if impl == "bound":
        c0 = cpu_s()
        wall, tokens = bound(backend, rubric, items, mode)
        return {"load_s": load_s, "wall_s": wall, "cpu_s": cpu_s() - c0, "calls": n_calls, "tokens": tokens,
                "scored": None}
    scorer = Scorer(rubric, Judge(cfg, backend))
    t0, c0 = time.perf_counter(), cpu_s()
    results = scorer.score_batch(items)
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    scorer.close()
    tokens = getattr(getattr(backend, "stats", None), "token_slots", None)
    if impl == "old":
        tokens = backend.token_slots
    return {"load_s": load_s, "wall_s": wall, "cpu_s": cpu, "calls": n_calls, "tokens": tokens,
            "scored": sum(r.score is not None for r in results), "items": len(results),
            "verdicts": [v.label for r in results for v in r.verdicts],
            "parse_failures": sum(1 for r in results for v in r.verdicts if v.error and v.error.kind.value == "parse")}


def bound(backend, rubric, items, mode: str) -> tuple[float, int]:
    """One causal forward per response over its distinct prefix plus its criteria's tails (hidden states only)."""
    import torch

    from rubric_reward.judges.base import ChatRequest
    from rubric_reward.judges.local import ANSWER_PREFIX
    from rubric_reward.judges.token_trees import shared_prefix_len
    from rubric_reward.grading.criterion_prompt import render_call

    seqs = []
    for item in items:
        prompts = []
        for c in rubric.judged:
            call = render_call(rubric, item, [c])
            text = backend._prompt_text(ChatRequest(call.messages, schema=call.schema))
            prompts.append(backend._ids(text + (ANSWER_PREFIX if mode == "logprob" else "")))
        shared = min(shared_prefix_len(prompts[0], p) for p in prompts)
        seqs.append(prompts[0][:shared] + [t for p in prompts for t in p[shared:]])
    decoder = backend._model.get_decoder()
    t0 = time.perf_counter()
    with torch.inference_mode():
        for s in seqs:
            decoder(input_ids=torch.tensor([s]))
    return time.perf_counter() - t0, sum(map(len, seqs))


def child(args: argparse.Namespace) -> None:
    out = run_one(args.shape[0], args.mode[0], args.impl[0], args.model, args.token_budget, args.max_tokens,
                  args.dtypes[0])
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(out), flush=True)


def vllm_python() -> str | None:
    path = os.environ.get("RUBRIC_REWARD_VLLM_PYTHON") or "/work/main/.venv-vllm/bin/python"
    return path if Path(path).exists() else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", "--shape", dest="shape", nargs="+", default=["readme", "grpo"],
                   choices=["readme", "grpo"])
    p.add_argument("--modes", "--mode", dest="mode", nargs="+", default=["logprob", "generate"],
                   choices=["logprob", "generate"])
    p.add_argument("--impls", "--impl", dest="impl", nargs="+", default=["bound", "new", "old"],
                   choices=["bound", "new", "old", "vllm"])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--token-budget", type=int, default=2048)
    p.add_argument("--max-tokens", type=int, default=128, help="generate mode: max new tokens per call")
    p.add_argument("--dtypes", nargs="+", default=["float32"], choices=["auto", "float32", "bfloat16", "float16"],
                   help="engine_args.dtype of the new and bound rows")
    p.add_argument("--timeout", type=float, default=900, help="seconds per row")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)

    print(f"model {args.model}, token budget {args.token_budget}, generate max_tokens {args.max_tokens}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    header = ("| shape | mode | impl | dtype | calls | wall s | CPU s | calls/s | peak RSS MB | tokens run "
              "| wall / bound | CPU / bound | scored | verdicts = float32 |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for shape in args.shape:
        for mode in args.mode:
            runs = [(impl, dtype) for dtype in args.dtypes
                    for impl in sorted(args.impl, key=["bound", "new", "old", "vllm"].index)
                    if impl in ("new", "bound") or dtype == args.dtypes[0]]
            bound_s = bound_cpu = None
            reference = None
            for impl, dtype in runs:
                shown = dtype if impl in ("new", "bound") else "-"
                python = sys.executable
                if impl == "vllm":
                    python = vllm_python()
                    if python is None:
                        print(f"| {shape} | {mode} | vllm | - | - | no vLLM venv | | | | | | | | |")
                        continue
                cmd = [python, str(Path(__file__).resolve()), "--child", "--shape", shape, "--mode", mode,
                       "--impl", impl, "--model", args.model, "--token-budget", str(args.token_budget),
                       "--max-tokens", str(args.max_tokens), "--dtypes", dtype]
                env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
                try:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
                    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
                except subprocess.TimeoutExpired:
                    print(f"| {shape} | {mode} | {impl} | {shown} | - | > {args.timeout:.0f} (timed out) | | | | | | | | |",
                          flush=True)
                    continue
                if not line:
                    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                    print(f"| {shape} | {mode} | {impl} | {shown} | - | failed: {tail[0][:100]} | | | | | | | | |",
                          flush=True)
                    continue
                r = json.loads(line[0][7:])
                if impl == "bound":
                    bound_s, bound_cpu = r["wall_s"], r.get("cpu_s")
                ratio = f"{r['wall_s'] / bound_s:.2f}x" if bound_s and impl != "bound" else "-"
                cpu = r.get("cpu_s")
                cpu_ratio = f"{cpu / bound_cpu:.2f}x" if bound_s and bound_cpu and cpu and impl != "bound" else "-"
                scored = "-" if r["scored"] is None else f"{r['scored']}/{r['items']}"
                if r.get("parse_failures"):
                    scored += f" ({r['parse_failures']} parse failures)"
                tokens = "-" if r["tokens"] is None else f"{r['tokens']:,}"
                cpu_txt = "-" if cpu is None else f"{cpu:.1f}"
                same = "-"
                if impl == "new" and r.get("verdicts") is not None:
                    if dtype == "float32":
                        reference = r["verdicts"]
                    if reference is not None:
                        same = f"{sum(a == b for a, b in zip(r['verdicts'], reference))}/{len(reference)}"
                print(f"| {shape} | {mode} | {impl} | {shown} | {r['calls']} | {r['wall_s']:.2f} | {cpu_txt} | "
                      f"{r['calls'] / r['wall_s']:.2f} | {r['peak_rss_mb']:.0f} | {tokens} | {ratio} | {cpu_ratio} "
                      f"| {scored} | {same} |",
                      flush=True)


if __name__ == "__main__":
    main()
