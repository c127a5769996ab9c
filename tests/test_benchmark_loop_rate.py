"""benchmarks/loop_rate.py on a tiny model: one table row per temperature, loops counted by the summary's test."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_loop_rate_prints_a_row_per_temperature(tiny_model: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = tmp_path / "run"
    lm = peft.get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model),
                             peft.LoraConfig(r=2, target_modules="all-linear"))
    lm.save_pretrained(run / "best")
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(run / "best")
    rows = [{"prompt": [{"role": "user", "content": f"Describe topic {i} in one line."}]} for i in range(3)]
    (run / "report_completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    spec = importlib.util.spec_from_file_location("loop_rate", REPO / "benchmarks" / "loop_rate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(run), "--model", str(tiny_model), "--temperatures", "0", "0.8", "--every", "1",
                        "--samples", "2", "--max_new_tokens", "6", "--dtype", "float32"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| temperature") and len(table) == 3
    assert table[1].startswith("| greedy | 3 | ") and table[2].startswith("| 0.8 | 6 | ")
