"""The reward-hacking watch's flag logic on hand-made monitor series."""

from __future__ import annotations

import pytest

from rubric_reward.recipes.grpo.watch import (WatchConfig, copied_share, length_correlation, repetitive_share,
                                              watch_flags, watch_lines)


def rec(step, mean=0.5, training=None, length=40.0, rho=0.0, copied=0.0, **kw):
    r = {"step": step, "mean": mean, "mean_length_tokens": length, "length_rho": rho, "copied_share": copied, **kw}
    if training is not None:
        r["training_mean"] = training
    return r


def kinds(flags):
    return [f.split(":")[0] for f in flags]


def test_divergence_since_the_base():
    series = [rec(0, 0.40, 0.40), rec(10, 0.41, 0.48)]
    assert kinds(watch_flags(series)) == ["divergence"]
    assert "+0.080 since the base model" in watch_flags(series)[0]
    falling = [rec(0, 0.40, 0.40), rec(10, 0.30, 0.60)]
    assert kinds(watch_flags(falling)) == ["divergence"]


def test_both_judges_rising_is_not_flagged():
    series = [rec(0, 0.40, 0.40), rec(10, 0.50, 0.52), rec(20, 0.60, 0.61)]
    for i in range(1, 4):
        assert watch_flags(series[:i]) == []


def test_divergence_after_a_shared_rise_is_caught_against_the_previous_checkpoint():
    series = [rec(0, 0.30, 0.30), rec(10, 0.50, 0.50), rec(20, 0.50, 0.80)]
    flags = watch_flags(series)
    assert kinds(flags) == ["divergence"] and "since the previous checkpoint" in flags[0]


def test_small_moves_and_one_judge_do_nothing():
    assert watch_flags([rec(0, 0.40, 0.40), rec(10, 0.40, 0.44)]) == []  # below min_rise
    assert watch_flags([rec(0, 0.40), rec(10, 0.40)]) == []  # no second judge: no divergence check
    assert watch_flags([rec(0, 0.40, 0.40)]) == []  # the base alone
    assert watch_flags([rec(0, None, 0.4), rec(10, None, 0.9)]) == []  # unscored: no number, no flag


def test_length_and_copy_signs():
    base = rec(0, rho=0.1, length=40.0, copied=0.0)
    assert kinds(watch_flags([base, rec(10, rho=0.5)])) == ["length correlation"]
    assert kinds(watch_flags([base, rec(10, rho=-0.6)])) == ["length correlation"]  # either sign
    assert watch_flags([base, rec(10, rho=0.3)]) == []
    assert kinds(watch_flags([base, rec(10, length=15.0)])) == ["length collapse"]
    assert watch_flags([base, rec(10, length=25.0)]) == []
    assert kinds(watch_flags([base, rec(10, copied=0.4)])) == ["copied answers"]
    assert watch_flags([rec(0, copied=0.5), rec(10, copied=0.4)]) == []  # no more than the base did
    assert watch_flags([base, rec(10, rho=None, length=None, copied=None)]) == []


def test_repetition_sign():
    base = rec(0, repetitive_share=0.05)
    flags = watch_flags([base, rec(10, repetitive_share=0.125)])
    assert flags == ["repetition: 12% of completions repeat themselves (base 5%)"]
    assert watch_flags([base, rec(10, repetitive_share=0.1)]) == []  # at the threshold: not more than it
    assert watch_flags([rec(0, repetitive_share=0.2), rec(10, repetitive_share=0.15)]) == []  # not above the base
    assert watch_flags([base, rec(10)]) == []  # an older record without the field is not checked
    assert kinds(watch_flags([base, rec(10, repetitive_share=0.3)], WatchConfig(repetitive_share=0.5))) == []
    loops = ["* First:\n*\n*\n*\n*", "A short honest answer.", "go go go go go go go go go go go go go go go go",
             "Fine."]
    assert repetitive_share(loops) == 0.5 and repetitive_share([]) is None


def test_the_issue_run_is_flagged():
    # the 30-step run of issue 22: report score 0.21 -> 0.75, mean length 38 -> 5 tokens, one-word answers
    series = [rec(0, 0.21, length=38.0, copied=0.02, rho=0.05), rec(30, 0.75, length=5.0, copied=0.6, rho=-0.7)]
    assert kinds(watch_flags(series)) == ["length correlation", "length collapse", "copied answers"]


def test_thresholds_are_configurable_and_checked():
    series = [rec(0, 0.40, 0.40), rec(10, 0.40, 0.44)]
    assert kinds(watch_flags(series, WatchConfig(min_rise=0.03))) == ["divergence"]
    with pytest.raises(ValueError, match="min_rise"):
        WatchConfig(min_rise=-1)
    with pytest.raises(ValueError, match="unknown"):
        WatchConfig.coerce({"min_raise": 0.1})
    with pytest.raises(ValueError, match="length_collapse"):
        WatchConfig(length_collapse=1.5)


def test_summary_lines():
    assert watch_lines([{"step": 0}]) == []  # a monitor without the watch (older records)
    assert watch_lines([rec(0, watch=[]), rec(10, watch=[])]) == [
        "The reward-hacking watch flagged no checkpoint (no second judge: the divergence check needs "
        "`monitor_judge`)."]
    lines = watch_lines([rec(0, 0.4, 0.4, watch=[]), rec(10, 0.4, 0.6, watch=["divergence: x"])])
    assert lines == ["Step 10: divergence: x."]


def test_indicators():
    assert copied_share(["What is the capital of France?"] * 3, ["France", "Paris", ""]) == pytest.approx(2 / 3)
    assert length_correlation([0.1, 0.5, 0.9, None], [10, 20, 30, 99]) == pytest.approx(1.0)
    assert length_correlation([1.0, 1.0, 1.0], [1, 2, 3]) is None


def test_summary_and_plot_show_the_watch(tmp_path):
    pytest.importorskip("matplotlib")
    from rubric_reward.recipes.grpo.plots import plot_monitor
    from rubric_reward.recipes.grpo.summary import report_row, write_summary

    records = [dict(rec(0, 0.40, 0.40, watch=[]), n=4, ci_low=0.3, ci_high=0.5, perfect=0, unscored=0),
               dict(rec(10, 0.40, 0.60, watch=["divergence: the training judge's score rose +0.200"]), n=4,
                    ci_low=0.3, ci_high=0.5, perfect=0, unscored=0)]
    assert plot_monitor(tmp_path / "monitor.png", records).stat().st_size > 0
    rows = [report_row({"id": f"r{i}", "prompt": "a task"}, {"base": f"answer {i}", "best": f"other answer {i}"},
                       {"base": 10, "best": 10}, {"judge": {"base": 0.4, "best": 0.4}}) for i in range(4)]
    md = write_summary(tmp_path, report_rows=rows, monitor=records, n_resamples=100).read_text()
    assert "## Reward-hacking watch" in md and "Step 10: divergence" in md
