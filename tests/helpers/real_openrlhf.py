"""Run inside the OpenRLHF 0.11.2 venv (scripts/setup_trainers.sh): OpenRLHF's own reward code against ours.

Usage: python real_openrlhf.py SPEC.json OUT.json   (cwd: the repository root)

SPEC: {"service_url": url of `rubric-reward serve` (OpenRLHF endpoint /openrlhf), "reward_yaml": path,
       "samples": [{"prompt", "response", "label"}...], "n_samples_per_prompt": int}

Real OpenRLHF code: ``openrlhf.utils.agent.SingleTurnAgentExecutor`` (the reward request path: it decodes the
query, then POSTs to the URL with aiohttp, 5 tries, or imports the ``.py`` file and calls ``reward_func`` in a
thread), ``SamplesGenerator._process_response_into_experience`` (the answer into an ``Experience``),
``make_experience_batch`` and ``RemoteExperienceMaker.compute_advantages_and_returns`` (group-normalised
advantages from the rewards). Stubs, for what cannot install on CPU (see tests/test_real_trainers.py):
``vllm`` (a module with the three names OpenRLHF imports at the top; the engine that generates is a stub
returning the scripted response's token ids) and ``flash_attn`` (imported at the top of
``openrlhf.models.ring_attn_utils``; never called here). The tokenizer is a real, tiny, locally trained HF one.
"""

from __future__ import annotations

import asyncio
import importlib.machinery
import json
import sys
import tempfile
import types
from pathlib import Path
from types import SimpleNamespace


def stub_cuda_only_modules() -> None:
    vllm = types.ModuleType("vllm")

    class SamplingParams(SimpleNamespace):
        def __init__(self, **kw):
            super().__init__(**{"max_tokens": None, "logprobs": None, **kw})

    vllm.SamplingParams = SamplingParams
    inputs, utils = types.ModuleType("vllm.inputs"), types.ModuleType("vllm.utils")
    inputs.TokensPrompt = dict
    utils.random_uuid = lambda: "0"
    vllm.inputs, vllm.utils = inputs, utils
    sys.modules.update({"vllm": vllm, "vllm.inputs": inputs, "vllm.utils": utils})
    fa = types.ModuleType("flash_attn")
    bp, fu, fud = (types.ModuleType(n) for n in ("flash_attn.bert_padding", "flash_attn.utils",
                                                 "flash_attn.utils.distributed"))
    for name in ("index_first_axis", "pad_input", "rearrange", "unpad_input"):
        setattr(bp, name, None)
    fud.all_gather = None
    fa.bert_padding, fa.utils, fu.distributed = bp, fu, fud
    sys.modules.update({"flash_attn": fa, "flash_attn.bert_padding": bp, "flash_attn.utils": fu,
                        "flash_attn.utils.distributed": fud})
    # a spec, no __file__ and no distribution: transformers' availability checks read these as "not installed"
    for name in ("vllm", "vllm.inputs", "vllm.utils", "flash_attn", "flash_attn.bert_padding", "flash_attn.utils",
                 "flash_attn.utils.distributed"):
        sys.modules[name].__spec__ = importlib.machinery.ModuleSpec(name, None)


def tiny_tokenizer(folder: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    text = ("The capital of France is Paris. Lyon is a city in France. Please answer politely and briefly. "
            "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n") * 20
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<|im_end|>").save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


class StubEngine:
    """Stands in for OpenRLHF's vLLM engine: 'generates' the scripted response, then the end token."""

    def __init__(self, tokenizer, response: str):
        self.ids = tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        out = SimpleNamespace(token_ids=list(self.ids), finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    stub_cuda_only_modules()
    import os

    import torch
    from vllm import SamplingParams

    import openrlhf  # noqa: F401
    from openrlhf.trainer.ppo_utils.experience import make_experience_batch
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    tokenizer = tiny_tokenizer(Path(tempfile.mkdtemp(prefix="real_openrlhf_")) / "tok")
    samples = spec["samples"]
    n = spec["n_samples_per_prompt"]
    os.environ["RUBRIC_REWARD_CONFIG"] = spec["reward_yaml"]  # the .py reward file's setting
    os.environ.pop("RUBRIC_REWARD_URL", None)
    # as train_ppo_ray hands them over: `--reward.remote_url` split on commas
    paths = {"http": [spec["service_url"] + "/openrlhf"], "func": ["examples/serve/openrlhf_reward_func.py"]}
    out: dict = {}
    for mode, remote_url in paths.items():
        executor = SingleTurnAgentExecutor(remote_url)
        assert (executor.reward_func is not None) == (mode == "func")

        async def rollouts():
            return await asyncio.gather(*(
                executor.execute(s["prompt"], s["label"], SamplingParams(max_tokens=64), 512, tokenizer,
                                 StubEngine(tokenizer, s["response"])) for s in samples))

        responses = asyncio.run(rollouts())
        exps = [SamplesGenerator._process_response_into_experience(None, r, max_len=512) for r in responses]
        for i, e in enumerate(exps):
            e.index = [i]
            e.kl = torch.zeros_like(e.action_mask, dtype=torch.float32)
        batch = make_experience_batch([e for e in exps])
        args = SimpleNamespace(
            rollout=SimpleNamespace(n_samples_per_prompt=n, max_new_tokens=64),
            algo=SimpleNamespace(advantage=SimpleNamespace(estimator="group_norm", gamma=1.0, lambd=1.0)),
            reward=SimpleNamespace(clip_range=(-10.0, 10.0), overlong_buffer_len=None, stop_properly_penalty_coef=None),
            data=SimpleNamespace(max_len=512))
        maker = SimpleNamespace(strategy=SimpleNamespace(args=args), kl_ctl=SimpleNamespace(value=0.0),
                                advantage_estimator="group_norm")
        for name in ("get_advantages_and_returns", "get_cumulative_returns"):
            if hasattr(RemoteExperienceMaker, name):
                setattr(maker, name, getattr(RemoteExperienceMaker, name).__get__(maker))
        exps = RemoteExperienceMaker.compute_advantages_and_returns(maker, exps)
        out[mode] = {
            "raw": [{"reward": _plain(r["reward"]), "scores": _plain(r["scores"]),
                     "extra_logs": {k: _plain(v) for k, v in (r["extra_logs"] or {}).items()}} for r in responses],
            "rewards_shape": [list(e.rewards.shape) for e in exps],
            "info_shapes": {k: list(v.shape) for k, v in exps[0].info.items() if k.startswith("rubric_")},
            "batch_rewards_shape": list(batch.rewards.shape),
            "rewards": [float(x) for x in batch.rewards.flatten()],
            "unscored": [float(x) for x in torch.cat([e.info["rubric_unscored"].flatten() for e in exps])],
            "advantages": [float(e.advantages.flatten()[-1]) for e in exps],
        }
    Path(sys.argv[2]).write_text(json.dumps(out))


def _plain(value):
    if value is None:
        return None
    if hasattr(value, "tolist"):
        return {"tensor": value.tolist(), "shape": list(value.shape)}
    return value


if __name__ == "__main__":
    main()
