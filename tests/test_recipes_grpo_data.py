"""AdvancedIF loading and the train / selection / report split, on synthetic rows of AdvancedIF's shape.

AdvancedIF is CC-BY-NC: no real row is bundled; these rows imitate its columns (all strings): a JSON
conversation ending on the user turn, metadata whose ``rubrics`` is a JSON string inside JSON, a benchmark.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rubric_reward.recipes.grpo.data import (
    ADVANCEDIF_DEFAULT_SPLIT,
    MULTI_TURN,
    SINGLE_TURN,
    SYSTEM_STEERABILITY,
    DataError,
    load_advancedif,
    load_advancedif_splits,
    load_prompt_rows,
    rows_from_dataset,
    split_rows,
    to_dataset,
)
from rubric_reward.rubric import Rubric

pytestmark = pytest.mark.timeout(60)


def advancedif_row(i: int, benchmark: str, *, double: bool = True) -> dict[str, str]:
    """One synthetic row in AdvancedIF's CSV shape."""
    questions = [f"Does the response mention item {i}?", "Is the response under 100 words?"]
    if benchmark == MULTI_TURN:
        conversation = [{"role": "user", "content": f"List {i} fruits."},
                        {"role": "assistant", "content": "Apple, pear."},
                        {"role": "user", "content": f"Now only the ones starting with {chr(65 + i % 26)}."}]
    elif benchmark == SYSTEM_STEERABILITY:
        conversation = [{"role": "system", "content": "Answer like a pirate."},
                        {"role": "user", "content": f"What is {i} plus one?"}]
    else:
        conversation = [{"role": "user", "content": f"Write {i} words about rain, no commas."}]
    rubrics = json.dumps(questions) if double else questions
    return {"conversation_history": json.dumps(conversation),
            "prompt_metadata": json.dumps({"rubrics": rubrics, "source": "synthetic"}),
            "benchmark_name": benchmark}


def synthetic_rows(single: int = 40, multi: int = 30, system: int = 20) -> list[dict[str, str]]:
    rows = [advancedif_row(i, SINGLE_TURN, double=i % 3 != 0) for i in range(single)]
    rows += [advancedif_row(1000 + i, MULTI_TURN) for i in range(multi)]
    rows += [advancedif_row(2000 + i, SYSTEM_STEERABILITY) for i in range(system)]
    return rows


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["conversation_history", "prompt_metadata", "benchmark_name"])
        w.writeheader()
        w.writerows(rows)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------- parsing
def test_csv_rows_parse_double_encoded_rubrics_system_and_multi_turn(tmp_path):
    rows = load_advancedif(write_csv(tmp_path / "advancedif.csv", synthetic_rows(4, 2, 2)))
    assert len(rows) == 8 and not rows.skipped
    assert rows.benchmarks() == {SINGLE_TURN: 4, MULTI_TURN: 2, SYSTEM_STEERABILITY: 2}
    by_bench = {r["benchmark"]: r for r in rows}
    # Both encodings (a JSON string inside JSON, and a plain list) give the same question list.
    assert rows[0]["rubric"] == ["Does the response mention item 0?", "Is the response under 100 words?"]
    assert rows[1]["rubric"] == ["Does the response mention item 1?", "Is the response under 100 words?"]
    assert [m["role"] for m in by_bench[MULTI_TURN]["prompt"]] == ["user", "assistant", "user"]
    assert [m["role"] for m in by_bench[SYSTEM_STEERABILITY]["prompt"]] == ["system", "user"]
    assert by_bench[SYSTEM_STEERABILITY]["prompt"][0]["content"] == "Answer like a pirate."
    assert all(r["id"].startswith("advif-") for r in rows) and len({r["id"] for r in rows}) == 8
    # The questions make a valid rubric of binary criteria.
    assert len(Rubric.from_obj(rows[0]["rubric"]).criteria) == 2


def test_ids_do_not_depend_on_row_order_and_formats_agree(tmp_path):
    data = synthetic_rows(5, 3, 3)
    from_csv = load_advancedif(write_csv(tmp_path / "a.csv", data))
    from_jsonl = load_advancedif(write_jsonl(tmp_path / "a.jsonl", list(reversed(data))))
    assert sorted(r["id"] for r in from_csv) == sorted(r["id"] for r in from_jsonl)
    assert {r["id"]: r for r in from_csv} == {r["id"]: r for r in from_jsonl}


def test_save_to_disk_folder_and_benchmark_filter(tmp_path):
    import datasets

    datasets.Dataset.from_list(synthetic_rows(6, 4, 2)).save_to_disk(str(tmp_path / "ds"))
    rows = load_advancedif(tmp_path / "ds", benchmarks=[SINGLE_TURN])
    assert len(rows) == 6 and rows.filtered == 6 and rows.benchmarks() == {SINGLE_TURN: 6}
    with pytest.raises(DataError, match="no row of benchmark"):
        load_advancedif(tmp_path / "ds", benchmarks="no_such_benchmark")


def test_identical_rows_get_distinct_ids():
    row = advancedif_row(1, SINGLE_TURN)
    rows = load_advancedif([row, dict(row), dict(row)])
    ids = [r["id"] for r in rows]
    assert ids[1] == ids[0] + "-2" and ids[2] == ids[0] + "-3"


BAD_ROWS = [
    ("missing rubric", {"prompt_metadata": json.dumps({"source": "x"})}, "prompt_metadata.rubrics"),
    ("empty metadata", {"prompt_metadata": ""}, "prompt_metadata"),
    ("undecodable metadata", {"prompt_metadata": "{not json"}, "prompt_metadata"),
    ("undecodable inner rubric", {"prompt_metadata": json.dumps({"rubrics": "[\"q1\", "})}, "prompt_metadata.rubrics"),
    ("empty rubric list", {"prompt_metadata": json.dumps({"rubrics": "[]"})}, "prompt_metadata.rubrics"),
    ("undecodable conversation", {"conversation_history": "[{\"role\": \"user\""}, "conversation_history"),
    ("ends on assistant", {"conversation_history": json.dumps(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])}, "conversation_history"),
    ("message without role", {"conversation_history": json.dumps([{"content": "hi"}])}, "conversation_history"),
]


@pytest.mark.parametrize("case, change, field", BAD_ROWS, ids=[c[0] for c in BAD_ROWS])
def test_bad_row_error_names_row_and_field(tmp_path, case, change, field):
    data = synthetic_rows(3, 0, 0)
    data.insert(2, {**advancedif_row(99, SINGLE_TURN), **change})
    path = write_csv(tmp_path / "bad.csv", data)
    with pytest.raises(DataError) as info:
        load_advancedif(path)
    message = str(info.value)
    assert str(path) in message and "row 2:" in message and f"'{field}'" in message
    assert "Traceback" not in message


def test_a_json_error_names_its_position_once():
    # the parser's "Invalid control character at" gave "... at at char 12"
    row = {**advancedif_row(1, SINGLE_TURN), "conversation_history": '[{"role": "user", "content": "a\nb"}]'}
    with pytest.raises(DataError, match=r"not valid JSON \(Invalid control character at char 31\)") as info:
        load_advancedif([row])
    assert " at at " not in str(info.value)


def test_bad_rows_skipped_and_counted(tmp_path):
    data = synthetic_rows(6, 0, 0)
    for i, (_, change, _) in enumerate(BAD_ROWS):
        data.append({**advancedif_row(500 + i, SINGLE_TURN), **change})
    rows = load_advancedif(write_csv(tmp_path / "bad.csv", data), on_bad_row="skip")
    assert len(rows) == 6 and len(rows.skipped) == len(BAD_ROWS)
    assert [s.row for s in rows.skipped] == list(range(6, 6 + len(BAD_ROWS)))
    assert rows.skipped_reasons() == {"prompt_metadata.rubrics": 3, "prompt_metadata": 2, "conversation_history": 3}
    assert "skipped 8 bad rows" in rows.describe()


def test_all_rows_bad_is_an_error():
    with pytest.raises(DataError, match="no usable rows"):
        load_advancedif([{**advancedif_row(1, SINGLE_TURN), "prompt_metadata": ""}], on_bad_row="skip")


# ------------------------------------------------------------------------------------------- generic rows
def test_generic_rows_prompt_string_messages_rubric_forms(tmp_path):
    inline = {"name": "r", "criteria": [{"name": "a", "requirement": "Says hi."},
                                        {"name": "c", "check": "ifeval:punctuation:no_comma"}]}
    data = [
        {"id": "s", "prompt": "Say hi.", "rubric": inline},
        {"id": "m", "prompt": json.dumps([{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": "Say hi."}]),
         "rubric": json.dumps(json.dumps(["Does it say hi?"]))},
        {"id": "lib", "prompt": "Say hi.", "rubric": "greeting-rubric"},
        {"id": "yaml", "prompt": "Say hi.", "rubric": "name: y\ncriteria:\n  - name: a\n    requirement: Says hi.\n"},
    ]
    rows = load_prompt_rows(write_jsonl(tmp_path / "p.jsonl", data))
    assert rows[0]["prompt"] == [{"role": "user", "content": "Say hi."}] and rows[0]["rubric"] == inline
    assert rows[1]["prompt"][0]["role"] == "system" and rows[1]["rubric"] == ["Does it say hi?"]
    assert rows[2]["rubric"] == "greeting-rubric"  # a rubric id, looked up by the reward
    assert rows[3]["rubric"] == {"name": "y", "criteria": [{"name": "a", "requirement": "Says hi."}]}
    ds = to_dataset(rows)
    assert ds.column_names == ["prompt", "rubric", "id", "benchmark"]
    assert json.loads(ds[0]["rubric"]) == inline and ds[2]["rubric"] == "greeting-rubric"
    back = rows_from_dataset(ds)
    assert [r["rubric"] for r in back] == [r["rubric"] for r in rows]
    assert [r["prompt"] for r in back] == [r["prompt"] for r in rows]


def test_generic_invalid_inline_rubric_and_duplicate_id(tmp_path):
    bad = [{"id": "a", "prompt": "x", "rubric": {"criteria": [{"name": "k", "check": "ifeval:no_such_check"}]}}]
    with pytest.raises(DataError, match=r"row 0: .*'rubric'"):
        load_prompt_rows(bad)
    dup = [{"id": "a", "prompt": "x", "rubric": ["q?"]}, {"id": "a", "prompt": "y", "rubric": ["q?"]}]
    with pytest.raises(DataError, match=r"row 1: field 'id': id 'a' already used by row 0"):
        load_prompt_rows(dup)
    assert len(load_prompt_rows(dup, on_bad_row="skip")) == 1


def test_offline_prompts_as_rows():
    rows = load_prompt_rows("offline")
    assert len(rows) == 12 and rows.benchmarks() == {"offline": 12}
    for r in rows:
        assert r["prompt"][-1]["role"] == "user"
        rubric = Rubric.from_obj(json.loads(json.dumps(r["rubric"])))
        assert rubric.criteria


# ------------------------------------------------------------------------------------------- split
def _rows(n_per: dict[str, int]) -> list[dict]:
    return [{"id": f"{b}-{i}", "prompt": [{"role": "user", "content": "x"}], "rubric": ["q?"], "benchmark": b}
            for b, n in n_per.items() for i in range(n)]


def test_split_default_is_paper_selection_plus_report_on_402_single_turn_rows():
    rows = load_advancedif([advancedif_row(i, SINGLE_TURN) for i in range(402)]
                           + [advancedif_row(5000 + i, MULTI_TURN) for i in range(10)])
    splits = load_advancedif_splits(rows_as_source(rows))
    assert (len(splits.train), len(splits.selection), len(splits.report)) == (240, 81, 81)
    assert ADVANCEDIF_DEFAULT_SPLIT["benchmarks"] == (SINGLE_TURN,)
    assert {r["benchmark"] for s in ("train", "selection", "report") for r in splits[s]} == {SINGLE_TURN}


def rows_as_source(rows):
    """Back to AdvancedIF's columns (the loader's input shape)."""
    return [{"conversation_history": json.dumps(r["prompt"]),
             "prompt_metadata": json.dumps({"rubrics": json.dumps(r["rubric"])}),
             "benchmark_name": r["benchmark"]} for r in rows]


def test_split_disjoint_deterministic_and_order_free():
    rows = _rows({"a": 50, "b": 30, "c": 20})
    one = split_rows(rows, train="rest", selection=20, report=10, seed=3)
    two = split_rows(list(reversed(rows)), train="rest", selection=20, report=10, seed=3)
    assert one.manifest() == two.manifest()
    ids = [set(one.ids(s)) for s in ("train", "selection", "report")]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert sum(map(len, ids)) == 100
    other = split_rows(rows, train="rest", selection=20, report=10, seed=4)
    assert other.ids("selection") != one.ids("selection")


def test_split_is_stratified_by_benchmark():
    splits = split_rows(_rows({"a": 50, "b": 30, "c": 20}), train="rest", selection=20, report=10)
    assert splits.counts() == {"train": {"a": 35, "b": 21, "c": 14},
                               "selection": {"a": 10, "b": 6, "c": 4},
                               "report": {"a": 5, "b": 3, "c": 2}}
    unstratified = split_rows(_rows({"a": 50, "b": 30, "c": 20}), selection=20, report=10, stratify=None)
    assert len(unstratified.selection) == 20 and unstratified.counts()["selection"] == {"all": 20}


def test_split_train_size_does_not_move_selection_or_report():
    rows = _rows({"a": 60, "b": 40})
    small = split_rows(rows, train=10, selection=10, report=10)
    large = split_rows(rows, train="rest", selection=10, report=10)
    assert small.ids("selection") == large.ids("selection") and small.ids("report") == large.ids("report")
    assert len(small.unused) == 70 and set(small.ids("train")) <= set(large.ids("train"))


def test_split_fractions_and_errors():
    rows = _rows({"a": 10})
    splits = split_rows(rows, train=0.6, selection=0.2, report=0.2)
    assert [len(splits[s]) for s in ("train", "selection", "report")] == [6, 2, 2]
    with pytest.raises(ValueError, match="more than the 10 rows"):
        split_rows(rows, train=8, selection=2, report=2)
    with pytest.raises(ValueError, match="only one size may be 'rest'"):
        split_rows(rows, train="rest", selection="rest")
    with pytest.raises(ValueError, match="unique 'id'"):
        split_rows(rows + rows[:1])
    with pytest.raises(ValueError, match="fraction"):
        split_rows(rows, selection=1.5)


def test_split_small_strata_never_overdraw():
    rows = _rows({"a": 1, "b": 1, "c": 8})
    splits = split_rows(rows, train="rest", selection=3, report=3)
    assert len(splits.selection) == 3 and len(splits.report) == 3 and len(splits.train) == 4
    assert len({*splits.ids("train"), *splits.ids("selection"), *splits.ids("report")}) == 10


def test_manifest_written(tmp_path):
    splits = split_rows(_rows({"a": 10}), selection=2, report=2)
    path = splits.write_manifest(tmp_path / "splits.json")
    data = json.loads(path.read_text())
    assert data["seed"] == 0 and len(data["report_ids"]) == 2 and len(data["train_ids"]) == 6


def test_splits_say_what_was_loaded(tmp_path):
    data = synthetic_rows(30, 5, 0) + [{**advancedif_row(900, SINGLE_TURN), "prompt_metadata": ""}]
    path = write_csv(tmp_path / "a.csv", data)
    splits = load_advancedif_splits(path, on_bad_row="skip", selection=5, report=5)
    assert (len(splits.train), len(splits.selection), len(splits.report)) == (20, 5, 5)
    text = splits.describe()
    assert "30 rows" in text and "skipped 1 bad rows (prompt_metadata: 1)" in text
    assert "5 rows of other benchmarks left out" in text and splits.manifest()["source"] == splits.source
    limited = load_advancedif_splits(path, selection=5, report=5, limit=25)
    assert len(limited.train) == 15


def test_hub_id_goes_to_load_dataset(monkeypatch):
    """A hub id is loaded with datasets.load_dataset (replaced here: tests never reach the network)."""
    import datasets

    calls = []

    def fake_load_dataset(name, subset=None, *, split=None, revision=None):
        calls.append((name, subset, split, revision))
        return datasets.Dataset.from_list(synthetic_rows(3, 2, 1))

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    rows = load_advancedif("facebook/AdvancedIF", revision="abc123")
    assert calls == [("facebook/AdvancedIF", None, "train", "abc123")]
    assert rows.source == "hf:facebook/AdvancedIF[train]" and len(rows) == 6


def test_reward_reads_the_dataset_rubric_column():
    """The reward's rubric resolver accepts every rubric form to_dataset writes."""
    from rubric_reward.rewards.rubrics import RubricResolver as RubricSource

    rows = list(load_advancedif(synthetic_rows(3, 2, 2))) + list(load_prompt_rows("offline"))
    ds = to_dataset(rows)
    resolved = RubricSource().rows(len(ds), {"rubric": ds["rubric"]})
    assert all(isinstance(r, Rubric) for r in resolved), [r for r in resolved if not isinstance(r, Rubric)][:1]
    assert [len(r.criteria) for r in resolved] == [len(Rubric.from_obj(row["rubric"]).criteria) for row in rows]


def test_wrong_file_says_which_columns_it_has(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"question": "hi", "answer": "yo"}])
    with pytest.raises(DataError, match=r"row 0: field 'conversation_history' is missing"):
        load_advancedif(path)
    with pytest.raises(DataError, match=r"no usable rows \(1 skipped, most often: field 'conversation_history' is "
                                        r"missing or empty; the first row's columns: \['answer', 'question'\]\)"):
        load_advancedif(path, on_bad_row="skip")


def test_hub_failure_is_one_clear_error(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'facebook/AdvancedIF' on the Hub (LocalEntryNotFoundError)\nmore")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match=r"hf:facebook/AdvancedIF\[train\]: could not load it from the Hugging Face "
                                        r"hub \(ConnectionError: Couldn't reach"):
        load_advancedif()
