"""A hand-written GRPO loop (REINFORCE with a per-group mean baseline) rewarded by ``rubric_rewards``.

No trainer library: sample a group of completions per prompt, ask the rubric judge for rewards
(``None`` = unscorable, left out of the baseline), and push up the log-probability of the
completions that beat their group's mean. Run it offline on the tiny test model and the scripted
loopback judge with ``python examples/grpo_loop.py``; point ``--model``/``--judge``/``--base-url``
at real ones to train for real.
"""

from __future__ import annotations

import argparse

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rubric_reward.rl import rubric_rewards


def train(model_dir, prompts, reward_config, *, steps=2, group=4, max_new_tokens=16, lr=1e-4):
    tok, model = AutoTokenizer.from_pretrained(model_dir), AutoModelForCausalLM.from_pretrained(model_dir)
    opt, history = torch.optim.AdamW(model.parameters(), lr=lr), []
    for _ in range(steps):
        for prompt in prompts:
            chat = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                           return_tensors="pt", return_dict=True)["input_ids"]
            seqs = model.generate(chat, do_sample=True, max_new_tokens=max_new_tokens, num_return_sequences=group,
                                  pad_token_id=tok.pad_token_id)
            new = seqs[:, chat.shape[1]:]
            texts = tok.batch_decode(new, skip_special_tokens=True)
            raw = rubric_rewards([prompt] * group, texts, config=reward_config)
            r = torch.tensor([float("nan") if x is None else x for x in raw])
            ok = ~r.isnan()
            history.append(raw)
            if ok.sum() < 2:  # fewer than two scored completions: no baseline, nothing to learn
                continue
            adv = torch.where(ok, r - r[ok].mean(), torch.zeros_like(r))
            logp = model(seqs).logits[:, chat.shape[1] - 1:-1].log_softmax(-1).gather(-1, new[..., None])[..., 0]
            mask = (new != tok.pad_token_id).float()
            loss = -(adv[:, None] * logp * mask).sum() / mask.sum().clamp(min=1)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model, history


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="policy model folder or hub id (default: the tiny test model)")
    ap.add_argument("--judge", help="judge model (default: a scripted loopback judge)")
    ap.add_argument("--base-url")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    rubric = {"criteria": [{"name": "short", "requirement": "The answer has at most three words."},
                           {"name": "polite", "requirement": "The answer is polite."}]}
    prompts = ["Say hello to a customer.", "Name a colour."]
    server = None
    if args.judge is None:  # scripted: "short" is MET for at most three words, "polite" always
        from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge

        verdicts = {"short": lambda r, _: "MET" if len(r.split()) <= 3 else "UNMET"}
        server = JudgeServer(ScriptedJudge(verdicts)).start()
        args.judge, args.base_url = "scripted", server.base_url
    if args.model is None:
        import tempfile

        from rubric_reward.testing.tiny_model import build_tiny_qwen3

        args.model = str(build_tiny_qwen3(f"{tempfile.gettempdir()}/rubric-reward-tiny-qwen3"))
    try:
        _, history = train(args.model, prompts, {"judge": args.judge, "base_url": args.base_url, "rubric": rubric},
                           steps=args.steps)
    finally:
        if server is not None:
            server.stop()
    report(history, prompts)


def report(history, prompts):
    """One line per group: its rewards and spread, saying so when a group teaches nothing."""
    taught = 0
    for i, rewards in enumerate(history):
        scored = [x for x in rewards if x is not None]
        spread = max(scored) - min(scored) if len(scored) >= 2 else 0.0
        taught += spread > 0
        shown = ", ".join("None" if x is None else f"{x:.2f}" for x in rewards)
        note = f"spread {spread:.2f}" if spread > 0 else "no spread: zero advantage, this group teaches nothing"
        print(f"step {i // len(prompts) + 1}, {prompts[i % len(prompts)]!r}: rewards [{shown}], {note}")
    print(f"{taught} of {len(history)} groups had a reward spread (only those move the policy)")


if __name__ == "__main__":
    main()
