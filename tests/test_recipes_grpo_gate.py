"""The GRPO recipe's judge gate (``qualify:``, rubric_reward.recipes.grpo.gate): checked before anything loads,
and run before training on the tiny config against a defective loopback judge (slow): ``on_fail: stop`` ends the run
with one line naming the failing criteria, ``warn`` trains and the summary carries the card."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rubric_reward.recipes.grpo.gate import GateConfig, add_card_to_summary

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "grpo" / "tiny_cpu.yaml"
BIN = Path(sys.executable).parent


def test_the_section_is_read_once_and_checked_before_anything_loads():
    assert GateConfig.coerce(None) is None and GateConfig.coerce({}) == GateConfig()
    gate = GateConfig.coerce({"on_fail": "warn", "prompts": 4, "repeats": 3, "persuasion": False})
    assert (gate.on_fail, gate.prompts, gate.repeats, gate.persuasion) == ("warn", 4, 3, False)
    for bad, named in (({"on_fail": "maybe"}, "on_fail"), ({"repeats": 1}, "repeats"), ({"completion": 3}, "completion"),
                       ({"completions": 1}, "completions")):
        with pytest.raises(ValueError, match=named):
            GateConfig.coerce(bad)


def test_the_check_names_the_section(tmp_path):
    from rubric_reward.recipes.grpo.check import ConfigError, check_arguments

    base = ["--config", str(TINY), "--model_name_or_path", "Qwen/Qwen3-0.6B", "--judge_base_url", "http://127.0.0.1:9/v1"]
    assert check_arguments(base + ["--qualify", '{"on_fail": "warn"}']).settings["qualify"] == '{"on_fail": "warn"}'
    with pytest.raises(ConfigError, match=r"command line \(--qualify\): qualify: field 'on_fail'"):
        check_arguments(base + ["--qualify", '{"on_fail": "maybe"}'])
    offline = REPO / "configs" / "grpo" / "offline_default.yaml"  # its rubrics are checks: no judge to qualify
    with pytest.raises(ConfigError, match="no judge to qualify"):
        check_arguments(["--config", str(offline), "--qualify", "{}"])


def test_the_card_goes_into_the_summary(tmp_path):
    (tmp_path / "summary.md").write_text("# Summary\n")
    (tmp_path / "summary.json").write_text(json.dumps({"headline": "h"}))
    card = {"overall": "usable_with_changes", "reward": {"rubric": {"noise_share": {"estimate": 0.3}}},
            "criteria": {"a": {"status": "noisy", "monitor": False}, "b": {"status": "ok", "monitor": False}}}
    add_card_to_summary(tmp_path / "summary.md", card, tmp_path)
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["qualify"]["overall"] == "usable_with_changes" and data["qualify"]["failing"] == {"a": ["noisy"]}
    assert data["headline"] == "h" and data["qualify"]["card"] == "qualify/card.md"
    assert "## Judge card (before training)" in (tmp_path / "summary.md").read_text()


# ------------------------------------------------------------------------------------------ slow


def _judged_names() -> list[str]:
    from rubric_reward.data import load_offline_prompts

    return sorted({c.name for p in load_offline_prompts() for c in p.rubric.criteria if c.is_judged})


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1",
                TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1", ACCELERATE_USE_CPU="1")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_gate_on_the_tiny_config(tmp_path: Path, tiny_model: Path) -> None:
    from rubric_reward.testing.judge_server import JudgeServer
    from rubric_reward.testing.planted import PlantedJudge

    names = _judged_names()
    defective = PlantedJudge(lambda c, r: "MET" if len(r.split()) % 2 else "UNMET", noisy={n: 0.5 for n in names})
    gate = '{"on_fail": "%s", "repeats": 3, "persuasion": false, "bootstrap_resamples": 200}'
    with JudgeServer(defective) as server:
        common = ["--config", str(TINY), "--model_name_or_path", str(tiny_model), "--judge_base_url",
                  server.base_url]
        # on_fail: stop: one line, exit 2, nothing trained (the card is there to read)
        out = tmp_path / "stop"
        proc = subprocess.run([sys.executable, "train/grpo.py", *common, "--output_dir", str(out),
                               "--qualify", gate % "stop"], cwd=REPO, env=_env(), capture_output=True, text=True,
                              timeout=400)
        errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
        assert len(errors) == 1 and errors[0].startswith("grpo.py: error: qualify: the judge card says "), errors
        assert "(noisy)" in errors[0] and "qualify/card.md" in errors[0]
        assert any(name in errors[0] for name in names)
        assert not list(out.glob("checkpoint-*")) and not (out / "train_log.jsonl").exists()
        card = json.loads((out / "qualify" / "card.json").read_text())
        assert card["overall"] != "usable" and {c["status"] for n, c in card["criteria"].items() if n in names} == \
            {"noisy"}

        # on_fail: warn: trains, and the summary carries the card
        out = tmp_path / "warn"
        cmd = [str(BIN / "accelerate"), "launch", "--config_file",
               str(REPO / "configs" / "accelerate" / "one_process.yaml"), "--quiet", "train/grpo.py", *common,
               "--output_dir", str(out), "--qualify", gate % "warn", "--max_steps", "2", "--ifeval", "false"]
        proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=480)
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, log[-4000:]
        assert "[grpo] warning: qualify: the judge card says" in log and "[grpo] trained 2 steps" in log
        summary = json.loads((out / "summary.json").read_text())
        assert summary["qualify"]["overall"] == card["overall"] and summary["qualify"]["failing"]
        assert "## Judge card (before training)" in (out / "summary.md").read_text()
        assert (out / "qualify" / "card.md").is_file()
