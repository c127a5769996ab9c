"""``rubric-reward redteam`` (issue 32): the bundled suite, offline against loopback judges and the bundled judge."""

from __future__ import annotations

import json

import pytest

from rubric_reward.cli import main
from rubric_reward.evaluation.redteam import CASES, FAMILIES


def test_the_suite_is_bundled_and_grouped():
    assert len(CASES) >= 60 and set(FAMILIES) >= {"planted", "persuasion", "forged", "master_key", "sibling"}


@pytest.mark.timeout(120)
def test_redteam_passes_against_a_gullible_loopback_judge_in_every_mode(tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["redteam", "--judge", "loopback:gullible", "--per-family", "4", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["modes"]) == {"per_criterion", "per_item", "k", "logprob", "group"}
    for rows in report["modes"].values():
        assert all(r["moved"] == 0 and r["sibling_moved"] == 0 for r in rows.values())
        assert rows["planted"]["flagged"] == rows["planted"]["n"]
    assert "PASS" in capsys.readouterr().out


@pytest.mark.timeout(120)
def test_redteam_fails_when_a_persuaded_judge_is_let_through(capsys):
    # judged (suspect) by a judge that is persuaded: the command reports it and exits 1
    assert main(["redteam", "--judge", "loopback:gullible", "--per-family", "2", "--modes", "per_criterion,group",
                 "--injection", "suspect", "--families", "persuasion,sibling"]) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text and "group/sibling: a sibling" not in text  # no sibling moved, even judged


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_redteam_against_the_bundled_judge_on_a_small_subset(tmp_path):
    out = tmp_path / "report.json"
    main(["redteam", "--per-family", "2", "--modes", "per_criterion", "--injection", "suspect", "--json", str(out)])
    report = json.loads(out.read_text())
    assert report["modes"]["per_criterion"]["planted"]["n"] == 2
