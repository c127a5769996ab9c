"""How often a trained GRPO checkpoint's completions repeat themselves, sampled at training temperatures and greedy.

The report scores greedy completions; training samples at ``temperature``. A loop the reward penalises
(``text:repeats_itself``) only teaches when rollouts produce it, so this prints the share of completions that
repeat themselves (the summary's own test, ``recipes.grpo.hacks.repeats_itself``) per temperature:

    python benchmarks/loop_rate.py runs/grpo-offline --temperatures 0 0.8 0.6

RUN is a `train/grpo.py` output folder (its ``best/`` adapter and ``report_completions.jsonl`` prompts). Sampling is
seeded, so a rerun on the same machine prints the same table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a train/grpo.py output folder")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.8, 0.6],
                        help="0 is greedy (one completion per prompt)")
    parser.add_argument("--every", type=int, default=4, help="every N-th report prompt (default 4: 35 of 140)")
    parser.add_argument("--samples", type=int, default=4, help="completions per prompt when sampling")
    parser.add_argument("--max_new_tokens", type=int, default=96)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--dtype", default="auto", help="auto, float32 or bfloat16 (auto: the recipe's rule)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch

    from rubric_reward.util.cpu_memory import retain_freed_memory
    from rubric_reward.recipes.grpo.hacks import repeats_itself
    from rubric_reward.evaluation.rollouts import _load_transformers

    retain_freed_memory()
    lm, tok = _load_transformers(args.model, str(args.run / "best"), True, args.dtype)
    rows = [json.loads(line) for line in (args.run / "report_completions.jsonl").open()][::args.every]
    texts = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
    enc = tok(texts, return_tensors="pt", padding=True)
    print(f"{args.run}: {len(rows)} report prompts, {lm.dtype}, {args.max_new_tokens} tokens, seed {args.seed}")
    print("| temperature | completions | repeat themselves | share | seconds |\n|---|---|---|---|---|")
    for temperature in args.temperatures:
        torch.manual_seed(args.seed)
        start = time.perf_counter()
        sampling = ({"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0,
                     "num_return_sequences": args.samples} if temperature > 0 else {"do_sample": False})
        with torch.no_grad():
            out = lm.generate(**enc, max_new_tokens=args.max_new_tokens, **sampling)
        completions = tok.batch_decode(out[:, enc.input_ids.shape[1]:], skip_special_tokens=True)
        loops = sum(repeats_itself(c) for c in completions)
        print(f"| {'greedy' if temperature == 0 else temperature} | {len(completions)} | {loops} | "
              f"{loops / len(completions):.1%} | {time.perf_counter() - start:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
