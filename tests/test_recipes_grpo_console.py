"""The main job's console (issue 33.4): it ends with its result, and a step without judge calls says why."""

from __future__ import annotations

import json
from types import SimpleNamespace

from rubric_reward.recipes.grpo.console import NO_JUDGE_NOTE, StepLog, final_lines


def _summary(tmp_path, **overrides):
    summary = {
        "headline": "GRPO trained m for 20 steps. On the 80 held-out report prompts its mean score went from 0.6 "
                    "to 0.8 (+0.2, 95% CI [+0.1, +0.3], Wilcoxon p = 0.001: a difference distinguishable from zero).",
        "metric": "score", "settings": {"confidence": 0.95},
        "report": {"judge": {"difference": {"estimate": 0.2, "low": 0.1, "high": 0.3}}},
        "report_by_type": [{"benchmark": "punctuation:no_comma", "n": 16,
                            "difference": {"estimate": -0.2, "low": -0.3, "high": -0.05}}],
        "hacking": {"flags": []},
        "ifeval": {"dir": str(tmp_path / "ifeval"), "overall": {"strict": {"prompt_level": {
            "delta": -0.1, "pvalue": 0.01}, "instruction_level": {"delta": 0.05, "pvalue": 0.2}}}},
        "plots": {"scores": "plots/report_scores.png", "monitor": "monitor.png"},
    }
    summary.update(overrides)
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "ifeval").mkdir(exist_ok=True)
    (tmp_path / "ifeval" / "comparison.json").write_text(json.dumps({"strict": {"per_instruction": [
        {"name": "detectable_format:title", "n": 9, "delta": -0.4, "pvalue_holm": 0.01},
        {"name": "punctuation:no_comma", "n": 20, "delta": 0.2, "pvalue_holm": 0.01}]}}))
    return tmp_path / "summary.md"


def test_the_run_ends_with_its_result_regressions_cautions_and_files(tmp_path):
    lines = final_lines(_summary(tmp_path))
    assert lines[0].startswith("[grpo] result: GRPO trained m") and "distinguishable from zero" in lines[0]
    text = "\n".join(lines)
    assert "regression: report split, punctuation:no_comma: -0.200" in text
    assert "regression: IFEval strict prompt-level accuracy -10.0 points" in text
    assert "regression: IFEval type detectable_format:title: -40.0 points" in text
    assert "IFEval type punctuation:no_comma" not in text  # an improvement is no regression
    assert "none fired" in text
    assert lines[-1].startswith("[grpo] files in ") and "summary.md" in lines[-1] and "monitor.png" in lines[-1]


def test_hacking_flags_and_watch_are_cautions(tmp_path):
    path = _summary(tmp_path, hacking={"flags": ["mean length fell by more than half"]}, report_by_type=[],
                    ifeval=None)
    (tmp_path / "ifeval" / "comparison.json").unlink()
    (tmp_path / "monitor.jsonl").write_text(json.dumps({"step": 10, "mean": 0.5, "watch": ["length collapse"]})
                                            + "\n")
    lines = final_lines(path)
    assert "[grpo] caution, reward hacking? mean length fell by more than half" in lines
    assert "[grpo] caution, the reward-hacking watch flagged step 10: length collapse" in lines
    assert any(line.startswith("[grpo] regressions: none") for line in lines)
    assert "none fired" not in "\n".join(lines)
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "best.json").write_text(json.dumps({"step": 5, "passed_over": [10]}))
    assert ("[grpo] best/ is step 5: the best selection score among the checkpoints the watch did not flag "
            "(passed over step(s) 10)") in final_lines(path)


def test_a_missing_summary_json_is_one_line(tmp_path):
    [line] = final_lines(tmp_path / "summary.md")
    assert line.startswith("[grpo] result: no summary.json")


def test_the_first_step_without_judge_calls_explains_itself_once(tmp_path, capsys):
    log = StepLog(tmp_path)
    state = SimpleNamespace(is_world_process_zero=True, global_step=1, max_steps=3)
    for step in (1, 2):
        state.global_step = step
        log.on_log(None, state, None, {"reward": 0.5, "loss": 0.1, "rubric/judge_calls": 0.0})
    out = capsys.readouterr().out
    assert out.count(NO_JUDGE_NOTE) == 1 and "programmatic check" in NO_JUDGE_NOTE and "--judge" in NO_JUDGE_NOTE
    assert out.index("step 1/3") < out.index(NO_JUDGE_NOTE) < out.index("step 2/3")
