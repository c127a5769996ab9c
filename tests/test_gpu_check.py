"""scripts/gpu_check.sh rehearsed on the CPU (``--dry-run``): every stage of the GPU check, at the tiny size, with
trl/datasets from the carried wheels and the packages the GPU machine lacks made unimportable; the last stage runs
one shortened iteration of the dpo-loop (scripted judges)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WHEELS = REPO / ".whl" / "gpu-check"


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_gpu_check_dry_run(tmp_path: Path) -> None:
    if not any(WHEELS.glob("trl-*.whl")):  # a fresh clone: fetch them as the GPU check's preparation does
        subprocess.run(["bash", "scripts/gpu_check.sh", "--download"], cwd=REPO, capture_output=True, timeout=300)
    env = dict(os.environ, OUT=str(tmp_path), PYTHONPATH=str(REPO))
    proc = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run", "--work", str(tmp_path / "work")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=400)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    lines = [x for x in out.splitlines() if x.startswith("[gpu-check]")]
    for stage in ("environment", "wheels", "models", "generation", "grpo", "dpo-loop"):
        assert any(x.startswith(f"[gpu-check] {stage}: ") for x in lines), (stage, out[-3000:])
    assert "cannot run" not in out and "failed" not in out
    if any(WHEELS.glob("trl-*.whl")):
        assert any("trl 1.16.0" in x and str(tmp_path) in x for x in lines)  # the carried wheel, not the venv's
    assert any("qwen3-4b: 4.02B parameters" in x for x in lines)
    row = next(x for x in out.splitlines() if x.startswith("| tiny |")).split("|")
    assert all(cell.strip() not in ("", "-") for cell in row[2:5]), row  # step s, tokens/s, judge calls/s
    import json

    tiny = json.loads((tmp_path / "gpu_check.json").read_text())["rows"]["tiny"]
    assert tiny["step_s"] > 0
    # stage 6: one shortened dpo-loop iteration (about 25 s of the dry run on 2 cores)
    assert set(tiny["loop_stage_s"]) == {"preferences", "adapter", "merged", "heldout"}
    assert tiny["loop_pairs"] >= 1 and tiny["loop_dpo_steps"] == 1 and tiny["loop_device"] == "cpu"
    assert any(x.startswith("[gpu-check] dpo-loop: tiny: one iteration") for x in lines)
