"""IFEval generation speed: ``eval/ifeval.py`` against the GRPO recipe's own IFEval stage, on the same prompts.

Both systems of an IFEval comparison (the base model and base + a LoRA adapter) are generated greedily twice per
round, in alternating order:

* **recipe**: what the recipe's final report does (``generate_responses`` with the recipe's
  ``generation_kwargs``: batch ``eval_batch_size``, adapter merged), timed in this process, model loads included;
* **eval/ifeval.py**: ``python eval/ifeval.py --model M --adapter A --limit N --max-new-tokens T`` as a user runs it,
  timed as a whole process (start-up, both systems, scoring and the report files included).

Tokens are the generated tokens of both systems (the model's tokenizer on the responses), so tokens/s compares
like with like; the ratio is eval/ifeval.py's tokens/s over the recipe's, per round. The adapter is a fresh
LoRA (r 16, all linear layers) of the bundled model: generation costs the same whatever its weights.

    python benchmarks/ifeval_speed.py                       # 20 prompts x 64 tokens, 2 rounds
    python benchmarks/ifeval_speed.py --limit 60 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import ROOT


def _adapter(model_path: str, folder: Path) -> str:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_path),
                           LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
    model.save_pretrained(folder)
    return str(folder)


def _tokens(tokenizer, texts: list[str]) -> int:
    return sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)


def _recipe(model: str, adapter: str, prompts: list[str], max_new_tokens: int, tokenizer) -> tuple[float, int]:
    from rubric_reward.recipes.grpo.arguments import RecipeArguments
    from rubric_reward.recipes.grpo.builders import generation_kwargs
    from rubric_reward.evaluation.rollouts import generate_responses

    kwargs = generation_kwargs(RecipeArguments(), max_new_tokens)
    start = time.perf_counter()
    texts = [t for a in (None, adapter) for t in generate_responses(
        prompts, model=model, adapter=a, keep_think=True, progress=False, **kwargs)]
    return time.perf_counter() - start, _tokens(tokenizer, texts)


def _script(model: str, adapter: str, limit: int, max_new_tokens: int, out: Path, tokenizer) -> tuple[float, int]:
    cmd = [sys.executable, str(ROOT / "eval" / "ifeval.py"), "--model", model, "--adapter", adapter,
           "--limit", str(limit), "--max-new-tokens", str(max_new_tokens), "--out-dir", str(out), "--no-progress"]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - start
    texts = [json.loads(line)["response"] for f in sorted(out.rglob("responses.jsonl")) for line in f.open()]
    return wall, _tokens(tokenizer, texts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--limit", type=int, default=20, help="IFEval prompts (the first N, as --limit takes them)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()

    from transformers import AutoTokenizer

    from rubric_reward.evaluation.ifeval_prompts import load_ifeval
    from rubric_reward.io.models import resolve_model
    from rubric_reward.util.threads import set_torch_threads

    threads = set_torch_threads(None)
    model = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(model)
    prompts = [row.prompt for row in load_ifeval()[:args.limit]]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        adapter = _adapter(model, Path(tmp) / "adapter")
        for r in range(args.rounds):
            order = ("recipe", "script") if r % 2 == 0 else ("script", "recipe")
            got = {}
            for what in order:
                if what == "recipe":
                    got[what] = _recipe(model, adapter, prompts, args.max_new_tokens, tokenizer)
                else:
                    got[what] = _script(model, adapter, args.limit, args.max_new_tokens, Path(tmp) / f"out{r}",
                                        tokenizer)
            rows.append(got)
    print(f"IFEval generation, {args.limit} prompts x 2 systems, <= {args.max_new_tokens} new tokens, "
          f"{args.model}; torch threads {threads}; load average {os.getloadavg()[0]:.1f}\n")
    print("| round | recipe s | recipe tokens | recipe tok/s | eval/ifeval.py s | its tokens | its tok/s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for i, got in enumerate(rows):
        (ra, ta), (sa, sb) = got["recipe"], got["script"]
        print(f"| {i} | {ra:.1f} | {ta} | {ta / ra:.1f} | {sa:.1f} | {sb} | {sb / sa:.1f} | "
              f"{(sb / sa) / (ta / ra):.2f} |")


if __name__ == "__main__":
    main()
