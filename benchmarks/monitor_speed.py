"""The checkpoint monitor and the final report at the speed of their models: each stage against its bound.

    python benchmarks/monitor_speed.py                                  # the offline default's models and splits
    python benchmarks/monitor_speed.py --config configs/grpo/X.yaml --repeats 3

Stages, run exactly as the recipe runs them (``CheckpointMonitor`` / ``run_report_stage``'s calls):

* **generate**: ``rollouts.generate_responses`` with a saved LoRA checkpoint (random LoRA weights, the config's
  rank and modules), the config's ``eval_max_new_tokens`` / ``eval_batch_size``; the wall time includes loading
  the model and the adapter, as the monitor's does. Bound: one plain batched greedy ``model.generate`` of the
  same (merged) model over the same prompts in batches of the same size, model already loaded: tokens/s.
* **score**: ``RubricReward.score_batch`` of those completions with the monitor's reward (judge loaded).
  Bound: the local judge's own bound (``benchmarks/local_judge.py``: one forward per completion over its
  distinct prefix plus its criteria's tails, hidden states only, same judge model).
* **report**: base and best completions of the report split, then both scored: the sum of the four stages
  against the sum of their bounds.

Every stage and bound runs ``--repeats`` times interleaved (bound, stage, bound, stage, ...) and the fastest of
each counts, so a shared machine's drift hits both alike. Ratios are bound tokens/s over stage tokens/s (1.00x =
at the bound). Tokens are counted by re-tokenizing the decoded completions, for stage and bound alike.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from _bench import ROOT, timed


def setup(config: str, threads: int | None):
    """(recipe, ModelConfig, policy path, splits, reward) from a recipe config, as ``train/grpo.py`` builds them."""
    from rubric_reward.io.models import resolve_model
    from rubric_reward.recipes.grpo import build_reward, build_splits, parse_args

    from rubric_reward.util.threads import set_torch_threads

    recipe, _, model = parse_args(["--config", config])
    set_torch_threads(threads or recipe.torch_threads)  # the recipe's choice unless --threads says otherwise
    return recipe, model, resolve_model(model.model_name_or_path), build_splits(recipe), build_reward(recipe)


def make_checkpoint(policy: str, model_args, out: Path) -> Path:
    """A LoRA adapter saved like a checkpoint (the config's rank and modules), with random (non-zero) weights."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32)
    lora = LoraConfig(r=model_args.lora_r, lora_alpha=model_args.lora_alpha,
                      target_modules=model_args.lora_target_modules or "all-linear", task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lora)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    peft_model.save_pretrained(out)
    AutoTokenizer.from_pretrained(policy).save_pretrained(out)
    return out


def count_tokens(tokenizer, texts: list[str]) -> int:
    return sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)


class Bounds:
    """The loaded models the bounds run on: the merged policy (base or checkpoint) and the judge backend."""

    def __init__(self, policy: str, checkpoint: Path, reward) -> None:
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from rubric_reward.judges.config import load_judges
        from rubric_reward.judges.transformers_backend import TransformersBackend

        self.tok = AutoTokenizer.from_pretrained(policy)
        self.tok.padding_side = "left"
        base = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32).eval()
        self.models = {"base": base, "best": PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32), str(checkpoint)).merge_and_unload().eval()}
        (judge,) = load_judges(reward.config.judge)
        self.mode = judge.verdict_mode
        self.judge = TransformersBackend(judge)
        self.judge.prepare()

    def generate(self, which: str, prompts: list, max_new_tokens: int, batch_size: int) -> list[str]:
        import torch

        model, tok = self.models[which], self.tok
        eos = [tok.eos_token_id] + ([model.generation_config.eos_token_id]
                                    if isinstance(model.generation_config.eos_token_id, int) else [])
        texts = [tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
        out = []
        for start in range(0, len(texts), batch_size):
            enc = tok(texts[start:start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.inference_mode():
                rows = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, temperature=None,
                                      top_p=None, top_k=None, eos_token_id=eos, pad_token_id=tok.pad_token_id)
            for row in rows[:, enc["input_ids"].shape[1]:].tolist():
                cut = next((j for j, t in enumerate(row) if t in eos), len(row))
                out.append(tok.decode(row[:cut], skip_special_tokens=True))
        return out

    def score(self, rows: list[dict], completions: list[str]) -> tuple[float, int]:
        """The local judge's bound over every row's judged criteria: (seconds, tokens)."""
        from local_judge import bound

        from rubric_reward.items import Item
        from rubric_reward.rubric import Rubric

        seconds = tokens = 0
        for row, text in zip(rows, completions, strict=True):
            rubric = Rubric.from_obj(json.loads(row["rubric"]) if isinstance(row["rubric"], str) else row["rubric"])
            if not rubric.judged:
                continue
            s, t = bound(self.judge, rubric, [Item(response=text, prompt=row["prompt"])], self.mode)
            seconds, tokens = seconds + s, tokens + t
        return seconds, tokens


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(ROOT / "configs" / "grpo" / "offline_default.yaml"))
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: the recipe's choice)")
    args = p.parse_args()
    from rubric_reward.util.threads import prepare_environment

    prepare_environment()  # as train/grpo.py does, before torch loads
    from rubric_reward.evaluation.rollouts import generate_responses

    from rubric_reward.recipes.grpo import generation_kwargs

    recipe, model_args, policy, splits, reward = setup(args.config, args.threads)
    import torch

    kwargs = {**generation_kwargs(recipe), "progress": False}
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = make_checkpoint(policy, model_args, Path(tmp) / "checkpoint-1")
        bounds = Bounds(policy, checkpoint, reward)
        reward.score_batch([splits.selection[0]["prompt"]], ["warm-up"],
                           **{k: [splits.selection[0][k]] for k in splits.selection[0] if k != "prompt"})
        print(f"policy {policy}, judge {reward.config.judge}, {os.cpu_count()} CPUs, torch threads "
              f"{torch.get_num_threads()}, OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY')}, load average {os.getloadavg()[0]:.1f}, repeats {args.repeats}")
        best: dict[str, tuple[float, int]] = {}

        def keep(name: str, seconds: float, tokens: int) -> None:
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, tokens)

        for _ in range(args.repeats):
            for split, systems in (("selection", ("best",)), ("report", ("base", "best"))):
                rows = list(splits[split])
                prompts = [r["prompt"] for r in rows]
                columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
                for system in systems:
                    adapter = str(checkpoint) if system == "best" else None
                    s, _, texts = timed(lambda: bounds.generate(system, prompts, kwargs["max_new_tokens"],
                                                             kwargs["batch_size"]))
                    keep(f"{split} {system} generate bound", s, count_tokens(bounds.tok, texts))
                    s, _, texts = timed(lambda: generate_responses(prompts, model=policy, adapter=adapter, **kwargs))
                    keep(f"{split} {system} generate", s, count_tokens(bounds.tok, texts))
                    s, t = bounds.score(rows, texts)
                    keep(f"{split} {system} score bound", s, t)
                    s, _, _ = timed(lambda: reward.score_batch(prompts, texts, **columns))
                    keep(f"{split} {system} score", s, t)
        reward.close()
    table(best)


def table(best: dict[str, tuple[float, int]]) -> None:
    print("| stage | wall s | tokens | tokens/s | bound s | bound tokens/s | stage / bound |")
    print("|---|---|---|---|---|---|---|")
    report = [0.0, 0.0]
    for name in [n for n in best if not n.endswith(" bound")]:
        (s, t), (bs, bt) = best[name], best[name + " bound"]
        ratio = (bt / bs) / (t / s) if t and bt else s / bs
        if name.startswith("report"):
            report[0] += s
            report[1] += bs * (t / bt if bt else 1.0)  # the bound's time at the stage's token count
        print(f"| monitor: {name.removeprefix('selection ')} " if name.startswith("selection") else f"| {name} ",
              end="")
        print(f"| {s:.2f} | {t:,} | {t / s:,.0f} | {bs:.2f} | {bt / bs:,.0f} | {ratio:.2f}x |")
    print(f"| report (all four stages) | {report[0]:.2f} | | | {report[1]:.2f} | | {report[0] / report[1]:.2f}x |")


if __name__ == "__main__":
    main()
