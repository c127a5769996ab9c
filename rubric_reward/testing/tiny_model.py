"""A tiny Qwen3 causal LM with a locally trained tokenizer, for offline tests of model paths.

No hub access: the BPE tokenizer is trained on a few KB of text made here, and the model is built
from a ``Qwen3Config`` with random weights (well under 1 MB on disk). Its outputs are meaningless;
it exercises loading, chat templates, batching, logprobs, LoRA and trainer plumbing.
:func:`build_random_qwen3` writes a randomly initialised model of a real Qwen3 shape (:data:`QWEN3_SHAPES`) with
the same tokenizer, for measuring speed and memory at real sizes (``scripts/gpu_check.sh``); ids the tokenizer
does not know decode to nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CHATML_TEMPLATE", "QWEN3_SHAPES", "build_random_qwen3", "build_tiny_qwen3", "qwen3_config"]

# The published shapes of two Qwen3 models (their config.json), for randomly initialised stand-ins: the
# memory, speed and kernels of the real sizes without their weights (which cannot travel to an offline machine).
QWEN3_SHAPES = {
    "qwen3-0.6b": {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
                   "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
                   "tie_word_embeddings": True, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                   "max_position_embeddings": 40960},
    "qwen3-4b": {"hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
                 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
                 "tie_word_embeddings": True, "rope_theta": 5000000.0, "rms_norm_eps": 1e-6,
                 "max_position_embeddings": 262144},
}

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_WORDS = (
    "the a response prompt rubric criterion judge verdict reason score MET UNMET CANNOT_ASSESS N/A "
    "answer question task write essay poem list formal casual warm rude neutral yes no true false "
    "refund order customer reply step policy tone clear short long summary word sentence paragraph "
    "highlight section title comma json bullet letter quote end phrase language english number "
    "system user assistant think data fenced block instructions label option value weight"
).split()


def _corpus() -> list[str]:
    import json
    import random

    rng = random.Random(0)
    lines = []
    for _ in range(400):
        words = rng.choices(_WORDS, k=rng.randint(5, 25))
        lines.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ":", ","]))
        lines.append(json.dumps({"reason": " ".join(rng.choices(_WORDS, k=6)), "verdict": rng.choice(_WORDS)}))
    lines += ["```response\n```", "## Criterion\n### name", "- \"MET\": the criterion holds", "0123456789"]
    return lines


def build_tiny_qwen3(out_dir: str | Path, *, vocab_size: int = 1024, hidden_size: int = 64, layers: int = 2,
                     heads: int = 4, seed: int = 0) -> Path:
    """Write a tiny ``Qwen3ForCausalLM`` and its tokenizer to ``out_dir`` (reused if already there)."""
    out = Path(out_dir)
    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None)
    fast.add_tokens(["<think>", "</think>"])  # normal tokens, as in Qwen3
    fast.chat_template = CHATML_TEMPLATE

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(fast), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
        head_dim=hidden_size // heads, max_position_embeddings=4096, tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, bos_token_id=None,
    )
    return _save(Qwen3ForCausalLM(config), fast, out)


def _save(model: Any, tokenizer: Any, out: Path) -> Path:
    """Write model and tokenizer to ``out`` through a temporary folder (a crash leaves no half model)."""
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(out) if not out.exists() else None
    return out


def qwen3_config(shape: str, *, eos_token_id: int | None = None, pad_token_id: int | None = None) -> Any:
    """The ``Qwen3Config`` of a shape in :data:`QWEN3_SHAPES`."""
    from transformers import Qwen3Config

    if shape not in QWEN3_SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(QWEN3_SHAPES)}")
    return Qwen3Config(**QWEN3_SHAPES[shape], eos_token_id=eos_token_id, pad_token_id=pad_token_id,
                       bos_token_id=None)


def build_random_qwen3(out_dir: str | Path, shape: str, *, tokenizer_dir: str | Path, device: str = "cpu",
                       dtype: str = "bfloat16", seed: int = 0) -> Path:
    """Write a randomly initialised Qwen3 of ``shape`` (built on ``device``, saved in ``dtype``) with the
    tokenizer of ``tokenizer_dir`` (e.g. :func:`build_tiny_qwen3`'s); reused if already there."""
    out = Path(out_dir)
    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    import torch
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = qwen3_config(shape, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen3ForCausalLM._from_config(config, dtype=getattr(torch, dtype))
    return _save(model, tokenizer, out)
