"""What the commands print, as a newcomer reads it (issue 21, items 11 and 12)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import yaml
from _runner_fixtures import config_dict, serve, write_dataset

from rubric_reward.cli import main


def test_validate_counts_in_words(tmp_path, capsys):
    one = tmp_path / "one.yaml"
    one.write_text(yaml.safe_dump({"criteria": [{"name": "bad", "requirement": "It insults.", "weight": -1}]}))
    none = tmp_path / "none.yaml"
    none.write_text(yaml.safe_dump({"criteria": [{"name": "a", "requirement": "A."}, {"name": "b",
                                                                                       "requirement": "B."}]}))
    assert main(["validate", str(one), str(none)]) == 0
    out = capsys.readouterr().out
    assert "1 criterion (1 binary; 1 penalty)" in out and "2 criteria (2 binary; 0 penalties)" in out


def test_score_counts_a_screened_response_in_the_bar_but_not_as_verdicts(tmp_path, capsys, judge_server):
    server = judge_server({}, default="MET")
    rubric = tmp_path / "r.yaml"
    rubric.write_text(yaml.safe_dump({"criteria": [{"name": "helpful", "requirement": "The answer helps."}]}))
    rows = [{"id": f"r{i}", "prompt": "Name a colour.", "response": f"Colour number {i} is blue."} for i in range(19)]
    rows.append({"id": "screened", "prompt": "Name a colour.", "response": ":"})  # degenerate: no judge call
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["score", "--rubric", str(rubric), "--input", str(data), "--out", str(tmp_path / "o.jsonl"),
                 "--judge", "m", "--base-url", server.base_url])
    assert code == 0
    captured = capsys.readouterr()
    assert "20/20" in captured.err  # the bar reaches the end (it stopped at 19/20: one unit per judge call)
    assert "screened, not judged: punctuation" in captured.out
    assert "MET 19" in captured.out and "UNMET" not in captured.out  # the forced worst label is no verdict
    assert "1 screened response left out" in captured.out


def test_eval_says_why_items_failed(tmp_path, capsys):
    write_dataset(tmp_path, n=3)
    config = config_dict(tmp_path, SimpleNamespace(base_url="http://127.0.0.1:9/v1"))  # nothing listens
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    assert main(["eval", "--config", str(tmp_path / "run.yaml"), "--quiet", "--no-report"]) == 1
    err = capsys.readouterr().err
    assert "0/3 items ok, 3 failed" in err
    assert "failed verdicts: connection 9 (e.g. " in err  # 3 items x 3 criteria, with the first message
    assert "the judge could not be reached (http://127.0.0.1:9/v1)" in err


def test_compare_prints_a_table_and_json_on_request(tmp_path, capsys):
    write_dataset(tmp_path, n=6)
    with serve() as server:
        for name in ("a", "b"):
            config = config_dict(tmp_path, server, out=name, seed=0 if name == "a" else 1)
            (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(config))
            assert main(["eval", "--config", str(tmp_path / f"{name}.yaml"), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("| run | items paired | mean score (run vs baseline) | difference [95% CI] |")
    assert lines[2].startswith(f"| {tmp_path / 'b'} | 6 | ") and len(lines) < 10
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_shared"] == 6
