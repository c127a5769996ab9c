"""One way to write report numbers (rubric_reward.evaluation.formatting)."""

import json
import math

from rubric_reward.evaluation.formatting import ci_text, fmt, interval_dict, jsonable, markdown_table, pct, pvalue
from rubric_reward.stats import Interval


def test_undefined_statistics_read_n_a_never_nan():
    assert [fmt(None), fmt(math.nan), pct(None), pvalue(None), ci_text(None)] == ["n/a"] * 5
    assert (fmt(0.12345), fmt(3), fmt(True), fmt(0.5, 2, signed=True)) == ("0.123", "3", "true", "+0.50")
    assert (pct(0.5), pct(0, signed=True), pct(-0.0123, signed=True), pvalue(0.0004321)) == (
        "50.00", "+0.00", "-1.23", "0.000432")


def test_intervals_as_text_and_as_json():
    ci = {"estimate": 0.5, "low": 0.25, "high": 0.75}
    assert ci_text(ci) == "0.500 [0.250, 0.750]"
    assert ci_text(ci, signed=True) == "+0.500 [+0.250, +0.750]"
    assert ci_text(ci, estimate=False) == "[0.250, 0.750]"
    assert ci_text({"estimate": 0.5, "low": None, "high": None}) == "0.500 [n/a]"
    iv = Interval(estimate=math.nan, low=None, high=None, confidence=0.95, n=1)
    assert interval_dict(iv) == {"estimate": None, "low": None, "high": None, "confidence": 0.95, "n": 1}
    assert json.dumps(jsonable({"a": (1, math.inf), 2: iv}), allow_nan=False)


def test_markdown_tables_escape_cells():
    assert markdown_table(["a", "b"], [[1, "x|y"]]) == "| a | b |\n|---|---|\n| 1 | x\\|y |"
