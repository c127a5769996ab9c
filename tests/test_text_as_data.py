"""Unencodable text is data, and internal details (tracebacks, paths) stay in the log.

A lone surrogate (``"\\ud800"``) is valid JSON but not UTF-8: it is replaced by U+FFFD in what is
judged, and named as the bad field in a rubric. Before, it ended in an INTERNAL failure carrying a
full traceback in the result, the service's answer and results.jsonl.
"""

from __future__ import annotations

import json
import logging

import pytest

from rubric_reward import Scorer
from rubric_reward.cli import main
from rubric_reward.rubric import Rubric, RubricError
from rubric_reward.serve import ServeConfig, ServiceThread

try:
    from .test_serve import _post
except ImportError:  # pragma: no cover - run as a top-level module
    from test_serve import _post

RUBRIC = {"criteria": [{"name": "c", "requirement": "Be right."}]}
LEAKS = ("Traceback", 'File "', "site-packages", "rubric_reward/")


def _clean(text: str) -> bool:
    return not any(mark in text for mark in LEAKS)


@pytest.mark.timeout(30)
def test_a_lone_surrogate_is_judged_as_a_replacement_character(judge_server):
    server = judge_server()
    with Scorer(RUBRIC, "judge", base_url=server.base_url) as scorer:
        result = scorer.score("Q\ud800?", "bad \ud800 text, a real pair \ud83d\ude00")
        conversation = scorer.score([{"role": "user", "content": "Hi \udfff"}], "fine \udc80 answer")
    assert result.score == 1.0 and result.error is None and conversation.score == 1.0
    sent = server.bodies[0]["messages"][-1]["content"]
    assert "bad \ufffd text, a real pair \U0001f600" in sent and "Q\ufffd?" in sent


@pytest.mark.timeout(60)
def test_the_service_scores_a_surrogate_without_a_traceback(judge_server):
    server = judge_server()
    cfg = ServeConfig.from_dict({"judge": {"model": "judge", "base_url": server.base_url}, "rubric": RUBRIC})
    raw = b'{"items": [{"id": "a", "prompt": "Q?", "response": "bad \\ud800 text"}]}'
    with ServiceThread(cfg) as svc:
        status, out = _post(svc.url + "/score", None, raw=raw)
    assert status == 200, out
    [row] = out["results"]
    assert row["score"] == 1.0 and row["error"] is None and _clean(json.dumps(out))


def test_score_command_writes_a_surrogate_response_as_data(tmp_path, judge_server):
    server = judge_server()
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps(RUBRIC))
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "a", "prompt": "Q?", "response": "bad \\ud800 text"}\n')
    out = tmp_path / "results.jsonl"
    assert main(["score", "--rubric", str(rubric), "--input", str(data), "--judge", "m",
                 "--base-url", server.base_url, "--out", str(out), "--quiet"]) == 0
    text = out.read_text(encoding="utf-8")
    [row] = [json.loads(line) for line in text.splitlines()]
    assert row["score"] == 1.0 and _clean(text)


def test_a_surrogate_in_a_rubric_names_the_field():
    with pytest.raises(RubricError, match=r"criterion.*field 'requirement' is not valid text"):
        Rubric.from_obj({"criteria": [{"name": "c", "requirement": "Be \ud800 right."}]})


@pytest.mark.timeout(30)
def test_an_internal_failure_keeps_its_traceback_in_the_log(judge_server, monkeypatch, caplog):
    import rubric_reward.grading.grader as grader

    def broken(*args, **kwargs):
        raise OSError("/srv/secret/path/model.bin is unreadable")

    monkeypatch.setattr(grader, "render_call", broken)
    server = judge_server()
    with caplog.at_level(logging.ERROR), Scorer(RUBRIC, "judge", base_url=server.base_url) as scorer:
        result = scorer.score("Q?", "An answer.")
    assert result.score is None and result.verdicts[0].error.kind.value == "internal"
    shown = json.dumps(result.to_dict())
    assert "OSError" in shown and "/srv/secret" not in shown and _clean(shown)
    assert "Traceback" in caplog.text and "/srv/secret/path" in caplog.text


def test_a_surrogate_in_an_item_id_is_a_named_error(tmp_path):
    from rubric_reward.evaluation.dataset import load_items
    from rubric_reward.io.rows import DataError
    from rubric_reward.items import Item

    with pytest.raises(ValueError, match="field 'id' is not valid text"):
        Item(response="fine", id="a\ud800")
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "ok", "response": "x"}\n{"id": "a\\ud800", "response": "x"}\n')
    with pytest.raises(DataError, match=r"in\.jsonl.*field 'id' is not valid text"):
        load_items(data, rubric=RUBRIC)


@pytest.mark.timeout(60)
def test_the_service_names_a_surrogate_item_id(judge_server):
    server = judge_server()
    cfg = ServeConfig.from_dict({"judge": {"model": "judge", "base_url": server.base_url}, "rubric": RUBRIC})
    with ServiceThread(cfg) as svc:
        status, out = _post(svc.url + "/score", None, raw=b'{"items": [{"id": "a\\ud800", "response": "x"}]}')
    assert status == 422 and out["error"]["field"] == "items[0].id", out
