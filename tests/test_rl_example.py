"""The hand-written GRPO loop of examples/grpo_loop.py on the tiny Qwen3 and the loopback judge."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "grpo_loop.py"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_hand_written_grpo_loop_trains_on_rubric_rewards(judge_server, tmp_path):
    import torch

    from rubric_reward.testing.tiny_model import build_tiny_qwen3

    spec = importlib.util.spec_from_file_location("grpo_loop", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    server = judge_server({"even": lambda r, _: "MET" if len(r) % 2 == 0 else "UNMET"})
    model_dir = build_tiny_qwen3(tmp_path / "tiny-qwen3")
    rubric = {"criteria": [{"name": "even", "requirement": "The answer has an even number of characters."}]}
    config = {"judge": "scripted", "base_url": server.base_url, "rubric": rubric}
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 64-wide model: thread hand-offs cost more than they save on a busy machine
    try:
        model, history = example.train(str(model_dir), ["Say hello.", "Name a colour."], config, steps=2, group=4,
                                       max_new_tokens=8)
    finally:
        torch.set_num_threads(threads)
    assert len(history) == 4 and all(len(batch) == 4 for batch in history)
    assert all(x in (0.0, 1.0) for batch in history for x in batch)  # every completion judged or guarded
    assert server.requests > 0
    from transformers import AutoModelForCausalLM

    fresh = AutoModelForCausalLM.from_pretrained(model_dir)
    changed = any(not torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters(), strict=True))
    spread = any(len(set(batch)) > 1 for batch in history)
    assert changed == spread  # an update happens exactly when a group's rewards differ
