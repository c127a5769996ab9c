"""Issue 14 (items 5, 6, 9, 13): the command line never shows a traceback for bad input, names the
file, entry and field on one line, and its exit status says what happened."""

from __future__ import annotations

import argparse
import fcntl
import json
from pathlib import Path

import pytest
import yaml

from rubric_reward import __version__
from rubric_reward.cli import build_parser, main

try:
    from ._runner_fixtures import config_dict, serve, write_dataset
except ImportError:  # pragma: no cover
    from _runner_fixtures import config_dict, serve, write_dataset

ROOT = Path(__file__).resolve().parents[1]
RUBRIC = ROOT / "examples" / "rubrics" / "advancedif_style.json"

pytestmark = pytest.mark.timeout(60)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def _score(tmp_path, *extra, rubric=RUBRIC, data=None, base_url="http://127.0.0.1:9/v1"):
    if data is None:
        data = tmp_path / "in.jsonl"
        data.write_text(json.dumps({"prompt": "p", "response": "r"}) + "\n")
    return main(["score", "--rubric", str(rubric), "--input", str(data), "--judge", "m", "--base-url", base_url,
                 "--out", str(tmp_path / "o.jsonl"), "--quiet", *extra])


# ---------------------------------------------------------------------------- 13. exit codes, table, help
def test_score_exits_1_when_any_item_is_unscored_unless_failures_are_allowed(tmp_path, judge_server, capsys):
    server = judge_server({"c2": lambda resp, body: "MET" if "good" in resp else "garbage"})
    data = tmp_path / "in.jsonl"
    data.write_text("\n".join(json.dumps({"id": i, "prompt": "p", "response": r})
                              for i, r in enumerate(["good one", "bad one", "good two"])) + "\n")
    assert _score(tmp_path, data=data, base_url=server.base_url) == 1
    out = capsys.readouterr()
    assert "1 of 3 items unscored" in out.err
    assert "failed" in out.out and "MET 2" in out.out  # counts per criterion, failures shown
    assert _score(tmp_path, "--allow-failures", data=data, base_url=server.base_url) == 0


def test_the_criterion_table_counts_abstentions(tmp_path, judge_server, capsys):
    server = judge_server({"c1": "CANNOT_ASSESS"})
    data = tmp_path / "in.jsonl"
    data.write_text("\n".join(json.dumps({"prompt": "p", "response": f"r{i}"}) for i in range(4)) + "\n")
    assert _score(tmp_path, data=data, base_url=server.base_url) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if "c1" in line and "│" in line)
    assert "4" in row.split("│")[-3]  # the abstained column


def test_version_and_help_for_every_option(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and __version__ in capsys.readouterr().out
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {'/'.join(a.option_strings) or a.dest}"
               for name, p in sub.choices.items() for a in p._actions
               if not isinstance(a, argparse._HelpAction) and not a.help]
    assert missing == []


# ---------------------------------------------------------------------------- 5, 9. bad input
@pytest.mark.parametrize("text, field", [
    ("judges:\n  - base_url: http://127.0.0.1:9/v1\n", "model"),
    ("judges:\n  - model: m\n    temperature: [\n", "not valid YAML"),
    ("judges:\n  - model: m\n    temperature: hot\n", "temperature"),
    ("judges:\n  - model: m\n    timeout_s: '10'\n", "timeout_s"),
    ("judges:\n  - model: m\n    weight: '2'\n", "weight"),
    ("judges:\n  - model: m\n    base_url: 8000\n", "base_url"),
])
def test_bad_judge_yaml_is_one_line_naming_the_file_and_field(tmp_path, capsys, text, field):
    judges = tmp_path / "judge.yaml"
    judges.write_text(text)
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"response": "r"}) + "\n")
    code = main(["score", "--rubric", str(RUBRIC), "--input", str(data), "--judge", str(judges),
                 "--out", str(tmp_path / "o.jsonl"), "--quiet"])
    err = _one_line_error(capsys)
    assert code == 2 and str(judges) in err and field in err


def test_bad_paths_and_rows_are_one_line_errors(tmp_path, capsys):
    assert _score(tmp_path, rubric=tmp_path) == 2  # a directory as the rubric
    assert "is a directory" in _one_line_error(capsys)
    assert _score(tmp_path, data=tmp_path / "missing.jsonl") == 2
    err = _one_line_error(capsys)
    assert "missing.jsonl: no such file" in err and "Errno" not in err
    data = tmp_path / "rows.jsonl"
    data.write_text('{"response": "ok"}\n{"response": 7}\n')
    assert _score(tmp_path, data=data) == 2
    assert "line 2: field 'response' must be a string" in _one_line_error(capsys)
    data.write_text('{"response": "ok"}\n{"response": "a",\n')
    assert _score(tmp_path, data=data) == 2
    err = _one_line_error(capsys)
    assert "line 2: not valid JSON at column" in err and "line 1 column" not in err  # one line number


def test_bad_eval_config_and_a_locked_run_folder_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: [unclosed\n")
    assert main(["eval", "--config", str(bad)]) == 2
    assert str(bad) in _one_line_error(capsys)
    write_dataset(tmp_path, n=2)
    with serve() as server:
        cfg = tmp_path / "run.yaml"
        cfg.write_text(yaml.safe_dump(config_dict(tmp_path, server)))
        (tmp_path / "run").mkdir()
        with open(tmp_path / "run" / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert main(["eval", "--config", str(cfg), "--quiet"]) == 2
        assert "another run is using this folder" in _one_line_error(capsys)
        assert server.requests == 0


# ---------------------------------------------------------------------------- 6, 7, 9. validate
def test_validate_checks_every_file_and_names_each_bad_one(tmp_path, capsys):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("criteria:\n  - requirement: caf\xe9 au lait\n".encode("latin-1"))
    huge = tmp_path / "huge.yaml"
    huge.write_text("criteria:\n  - {name: a, requirement: A., weight: 1.0e+308}\n"
                    "  - {name: b, requirement: B., weight: 1.0e+308}\n")
    absent = tmp_path / "absent.yaml"
    absent.write_text("criteria:\n  - name: a\n")
    assert main(["validate", str(RUBRIC), str(latin), str(huge), str(absent), str(RUBRIC)]) == 1
    out = capsys.readouterr()
    assert out.out.count("ok:") == 2 and "Traceback" not in out.err
    lines = out.err.strip().splitlines()
    assert len(lines) == 3
    assert str(latin) in lines[0] and "UTF-8" in lines[0]
    assert str(huge) in lines[1] and "inf" in lines[1]
    assert str(absent) in lines[2] and "'requirement' is missing" in lines[2]


def test_ifeval_names_a_missing_adapter_before_loading_anything(tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("_ifeval_cli_h", ROOT / "eval" / "ifeval.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    with pytest.raises(SystemExit) as exc:
        cli.main(["--model", "no/such-model", "--adapter", str(tmp_path / "nope"), "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--adapter" in err and "no such folder" in err


def test_ifeval_comparison_lists_unmatched_keys_as_numbers():
    from rubric_reward.checks.ifeval import IFEvalResult
    from rubric_reward.evaluation.ifeval_report import _aligned

    def result(key):
        return IFEvalResult(prompt=f"p{key}", instruction_id_list=["punctuation:no_comma"],
                            follow_all_instructions=True, follow_instruction_list=[True], key=key)

    with pytest.raises(ValueError) as exc:
        _aligned([result(1)], [result(1), result(30), result(1000), result(2)])
    assert "[2, 30, 1000]" in str(exc.value)  # sorted as numbers, not as text ('1000' < '2' < '30')
