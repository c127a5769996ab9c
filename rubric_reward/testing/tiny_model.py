"""A tiny Qwen3 causal LM with a locally trained tokenizer, for offline tests of model paths.

No hub access: the BPE tokenizer is trained on a few KB of text made here, and the model is built
from a ``Qwen3Config`` with random weights (well under 1 MB on disk). Its outputs are meaningless;
it exercises loading, chat templates, batching, logprobs, LoRA and trainer plumbing.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHATML_TEMPLATE", "build_tiny_qwen3"]

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
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = fast.eos_token_id
    model.generation_config.pad_token_id = fast.pad_token_id
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp)
    fast.save_pretrained(tmp)
    tmp.rename(out) if not out.exists() else None
    return out
