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
def test_hand_written_grpo_loop_trains_on_rubric_rewards(judge_server, tmp_path, tiny_model):
    import torch

    spec = importlib.util.spec_from_file_location("grpo_loop", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    server = judge_server({"even": lambda r, _: "MET" if len(r) % 2 == 0 else "UNMET"})
    model_dir = tiny_model
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


def _example():
    spec = importlib.util.spec_from_file_location("grpo_loop", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def test_report_says_when_a_group_teaches_nothing(capsys):
    _example().report([[1.0, 1.0, 1.0, 1.0], [1.0, 0.5, None, 0.5]], ["a", "b"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("no spread: zero advantage, this group teaches nothing")
    assert lines[1] == "step 1, 'b': rewards [1.00, 0.50, None, 0.50], spread 0.50"
    assert lines[2] == "1 of 2 groups had a reward spread (only those move the policy)"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_demo_as_written_shows_varied_rewards():
    """``python examples/grpo_loop.py`` as the README gives it: groups whose rewards differ."""
    import os
    import subprocess
    import sys

    root = EXAMPLE.parents[1]
    proc = subprocess.run([sys.executable, str(EXAMPLE)], cwd=root, capture_output=True, text=True, timeout=170,
                          env=dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    groups = [x for x in proc.stdout.splitlines() if x.startswith("step ")]
    assert len(groups) == 6 and sum("spread 0." in x and "no spread" not in x for x in groups) >= 3, proc.stdout
