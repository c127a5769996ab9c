import json
import subprocess
import sys
from pathlib import Path

import pytest

from rubric_reward.cli import main

ROOT = Path(__file__).resolve().parents[1]
RUBRIC = ROOT / "examples" / "rubrics" / "advancedif_style.json"


def test_validate_ok_and_errors(tmp_path, capsys):
    assert main(["validate", str(RUBRIC)]) == 0
    assert "3 criteria" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("criteria:\n  - name: x\n    requirement: y\n    weight: heavy\n")
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "criterion 'x'" in err and "field 'weight'" in err and "Traceback" not in err


def test_score_end_to_end(tmp_path, judge_server):
    server = judge_server({"c2": "UNMET"})
    data = tmp_path / "in.jsonl"
    data.write_text("\n".join(json.dumps({"id": f"r{i}", "prompt": "Write a haiku.", "response": f"poem {i}"})
                              for i in range(5)) + "\n")
    out = tmp_path / "out" / "results.jsonl"
    code = main(["score", "--rubric", str(RUBRIC), "--input", str(data), "--judge", "m",
                 "--base-url", server.base_url, "--out", str(out), "--quiet"])
    assert code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(5)]
    assert all(r["score"] == pytest.approx(2 / 3) for r in rows)
    assert rows[0]["verdicts"][1]["label"] == "UNMET" and rows[0]["verdicts"][1]["reason"]


def test_score_rejects_bad_input(tmp_path, capsys):
    data = tmp_path / "in.jsonl"
    data.write_text('{"prompt": "no response field"}\n')
    code = main(["score", "--rubric", str(RUBRIC), "--input", str(data), "--judge", "m",
                 "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "o.jsonl")])
    assert code == 2 and "line 1: each row needs a 'response' field" in capsys.readouterr().err


def test_console_script_entry_point():
    proc = subprocess.run([sys.executable, "-m", "rubric_reward.cli", "--help"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0 and "validate" in proc.stdout and "score" in proc.stdout
