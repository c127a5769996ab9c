import json

import pytest

from rubric_reward.rubric import (
    ABSTAIN_LABEL, NA_LABEL, CriterionKind, Rubric, RubricError, load_rubric, load_rubrics,
)

MIXED = {
    "name": "mixed",
    "guidelines": "Be strict.",
    "criteria": [
        {"name": "thesis", "requirement": "States a thesis.", "weight": 10},
        {"name": "tone", "kind": "ordinal", "requirement": "Tone?", "weight": 4, "allow_abstain": True,
         "options": [{"label": "bad", "value": 0}, {"label": "ok", "value": 0.5, "description": "fine"},
                     {"label": "good", "value": 1}]},
        {"name": "genre", "kind": "nominal", "requirement": "Genre?", "options": {"essay": 1.0, "poem": 0.0}},
        {"name": "rambles", "requirement": "Rambles.", "weight": -3},
        {"name": "no_comma", "check": "ifeval:punctuation:no_comma"},
    ],
}


def test_mixed_rubric_types_and_labels():
    r = Rubric.from_obj(MIXED)
    assert [c.kind for c in r] == [CriterionKind.BINARY, CriterionKind.ORDINAL, CriterionKind.NOMINAL,
                                   CriterionKind.BINARY, CriterionKind.CHECK]
    assert r["thesis"].labels == ("MET", "UNMET", ABSTAIN_LABEL)
    assert r["tone"].labels == ("bad", "ok", "good", NA_LABEL)
    assert r["genre"].labels == ("essay", "poem")  # options default to no abstention
    assert r["tone"].value_of("ok") == 0.5 and r["tone"].value_of(NA_LABEL) is None
    assert r.positive_weight == 16 and len(r.judged) == 4
    assert not r["no_comma"].is_judged


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_round_trip(tmp_path, suffix):
    r = Rubric.from_obj(MIXED)
    path = tmp_path / f"r{suffix}"
    r.save(path)
    assert load_rubric(path) == r
    assert load_rubric(path).fingerprint() == r.fingerprint()


def test_advancedif_lists():
    questions = ["Is it a haiku?", "Does it mention the sea?"]
    r = Rubric.from_questions(questions)
    assert [c.requirement for c in r] == questions and all(c.weight == 1 for c in r)
    assert [c.name for c in r] == ["c1", "c2"]
    # AdvancedIF stores rubrics as a JSON-encoded string inside JSON
    assert Rubric.from_obj(json.dumps(questions)) == r


def test_rubric_library(tmp_path):
    path = tmp_path / "lib.yaml"
    path.write_text("a: ['Q1?']\nb: {criteria: ['Q2?', 'Q3?']}\n")
    lib = load_rubrics(path)
    assert set(lib) == {"a", "b"} and len(lib["b"]) == 2 and lib["a"].name == "a"


def _crit(**kw):
    return {"criteria": [{"name": "x", "requirement": "r", **kw}]}


MALFORMED = [
    ({"criteria": []}, "'criteria' is empty"),
    ({"name": "n"}, "missing field 'criteria'"),
    ({"criteria": "nope"}, "must be a list"),
    ({"criteria": [1]}, "must be a mapping or a string"),
    ({"criteria": ["a"], "extra": 1}, "unknown field(s) ['extra']"),
    (_crit(requirement=""), "field 'requirement' is empty"),
    (_crit(weight="heavy"), "field 'weight' must be a number"),
    (_crit(weight=float("inf")), "field 'weight' must be finite"),
    (_crit(weight=True), "field 'weight' must be a number"),
    (_crit(kind="scale"), "field 'kind' is 'scale'"),
    (_crit(kind="ordinal"), "field 'options' is missing"),
    (_crit(kind="ordinal", options=[{"label": "a", "value": 1}]), "at least two options"),
    (_crit(kind="ordinal", options=[{"label": "a", "value": 1.5}, {"label": "b", "value": 0}]),
     "options[0]: field 'value' must be in [0, 1], got 1.5"),
    (_crit(kind="ordinal", options=[{"label": "a", "value": -0.1}, {"label": "b", "value": 0}]), "must be in [0, 1]"),
    (_crit(kind="ordinal", options=[{"label": "a"}, {"label": "b", "value": 0}]), "field 'value' is missing"),
    (_crit(kind="ordinal", options=[{"label": "a", "value": "high"}, {"label": "b", "value": 0}]),
     "field 'value' must be a number"),
    (_crit(kind="ordinal", options=[{"label": "a", "value": 1}, {"label": "a", "value": 0}]), "duplicate labels ['a']"),
    (_crit(kind="ordinal", options=[{"label": "", "value": 1}, {"label": "b", "value": 0}]), "field 'label' is empty"),
    (_crit(kind="ordinal", options=[{"value": 1}, {"label": "b", "value": 0}]), "field 'label' is missing"),
    (_crit(kind="nominal", options=[{"label": "N/A", "value": 1}, {"label": "b", "value": 0}]), "reserved"),
    (_crit(kind="nominal", options=[{"label": "a", "value": 1, "colour": 2}, {"label": "b", "value": 0}]),
     "unknown field(s) ['colour']"),
    (_crit(options=[{"label": "a", "value": 1}, {"label": "b", "value": 0}], kind="binary"), "takes no 'options'"),
    (_crit(allow_abstain="yes"), "field 'allow_abstain' must be true or false"),
    (_crit(colour="red"), "unknown field(s) ['colour']"),
    (_crit(check="no colon"), "field 'check' must look like 'family:name'"),
    (_crit(check="ifeval:x", kind="ordinal"), "cannot be combined"),
    (_crit(check="ifeval:x", kwargs=[1]), "field 'kwargs' must be a mapping"),
    (_crit(kwargs={"a": 1}), "only for check criteria"),
    ({"criteria": [{"name": "x", "requirement": "a"}, {"name": "x", "requirement": "b"}]},
     "duplicate criterion names ['x']"),
    ({"criteria": [{"requirement": "a", "weight": 0}, {"requirement": "b", "weight": 0}]}, "every weight is zero"),
    ({"criteria": [{"name": " ", "requirement": "a"}]}, "field 'name' is empty"),
    ({"criteria": [{"name": 3, "requirement": "a"}]}, "field 'name' must be a string"),
]


@pytest.mark.parametrize(("obj", "message"), MALFORMED, ids=[m for _, m in MALFORMED])
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_malformed_rubric_files_name_the_problem(tmp_path, obj, message, suffix):
    import yaml

    path = tmp_path / f"rubric{suffix}"
    path.write_text(json.dumps(obj) if suffix == ".json" else yaml.safe_dump(obj))
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    assert message in str(info.value) and str(path) in str(info.value)


def test_malformed_errors_name_the_criterion():
    with pytest.raises(RubricError, match=r"criterion 'tone' \(criteria\[0\]\): options\[1\]"):
        Rubric.from_obj({"criteria": [{"name": "tone", "kind": "ordinal", "requirement": "t",
                                       "options": [{"label": "a", "value": 0}, {"label": "b", "value": 2}]}]})


@pytest.mark.parametrize(("text", "suffix", "message"), [
    ("criteria: [a, b", ".yaml", "not valid YAML"),
    ("{\"criteria\": [}", ".json", "not valid JSON"),
])
def test_unparseable_files(tmp_path, text, suffix, message):
    path = tmp_path / f"bad{suffix}"
    path.write_text(text)
    with pytest.raises(RubricError, match=message):
        load_rubric(path)


def test_missing_file(tmp_path):
    with pytest.raises(RubricError, match="no such file"):
        load_rubric(tmp_path / "nope.yaml")
