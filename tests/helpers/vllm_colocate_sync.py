"""Run in the vLLM venv: does a colocated vLLM generate with the new weights after TRL's colocate sync?

    python tests/helpers/vllm_colocate_sync.py MODEL_DIR DTYPE KERNEL   # KERNEL: picked | torch

``picked`` keeps the CPU GEMM kernels vLLM chooses on this machine (oneDNN / AMX packing on AVX512-BF16 CPUs),
``torch`` forces its ``torch.nn.functional.linear`` fallback (what it uses where those kernels are not
taken). The sync is TRL's own colocate loop (``VLLMGeneration.sync_weights`` on a stand-in holding the LLM),
wrapped by :func:`rubric_reward.recipes.grpo.vllm_sync.repack_colocated_sync`. Prints one JSON line: the greedy tokens
of vLLM before and after the sync and those of the perturbed transformers model it was synced from.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def main(model_dir: str, dtype: str, kernel: str) -> dict:
    import torch
    from transformers import AutoModelForCausalLM
    from trl.generation.vllm_generation import VLLMGeneration

    if kernel == "torch":
        import vllm._custom_ops as ops

        ops._supports_onednn = False  # and check_cpu_sgl_kernel needs bf16 weights of kernel-friendly shapes
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from rubric_reward.recipes.grpo.vllm_sync import repack_colocated_sync

    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    torch.manual_seed(123)
    with torch.no_grad():  # a policy that has moved away from the weights vLLM loaded
        for p in policy.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    llm = LLM(model=model_dir, dtype=dtype, enforce_eager=True, max_model_len=256, gpu_memory_utilization=0.2)
    prompt, params = [1, 2, 3, 4, 5, 6, 7, 8], SamplingParams(temperature=0.0, max_tokens=12)

    def vllm_tokens() -> list[int]:
        return list(llm.generate([TokensPrompt(prompt_token_ids=prompt)], params, use_tqdm=False)[0]
                    .outputs[0].token_ids)

    generation = VLLMGeneration.__new__(VLLMGeneration)  # TRL's sync_weights, without an accelerator
    generation.mode, generation.enable_sleep_mode, generation.llm, generation.accelerator = "colocate", False, llm, None
    generation._iter_named_params = lambda: ((n, p.data) for n, p in policy.named_parameters())

    class Trainer:
        vllm_generation = generation

    before = vllm_tokens()
    wrapped = repack_colocated_sync(Trainer())
    expected = policy.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False)[0, len(prompt):].tolist()
    try:
        generation.sync_weights()
    except Exception as exc:  # reported, so the test can say what failed
        return {"wrapped": wrapped, "error": f"{type(exc).__name__}: {exc}"}
    return {"wrapped": wrapped, "before": before, "after": vllm_tokens(), "expected": expected}


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(*sys.argv[1:4])), flush=True)
