"""Per-criterion rewards (``rubric_reward.rl.criteria``): one TRL reward function per criterion name.

The values are the ones the score counts (a parity test against the score on the bundled rubrics), the batch is
judged once whichever function TRL calls first, and what cannot be split is a one-line error.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rubric_reward.rl import RubricReward
from rubric_reward.rl.criteria import criterion_rewards, criterion_weights
from rubric_reward.rubric import Rubric

PROMPTS = Path(__file__).resolve().parents[1] / "rubric_reward" / "data" / "instructions" / "prompts.jsonl"
ROWS = [json.loads(line) for line in PROMPTS.read_text().splitlines()]
WORDS = "tea storm river the a and, of *bold* [name] * one\n* two\n* three\n again again again".split(" ")


def _completion(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 60)))


def _split(reward: RubricReward, rows: list[dict]):
    rubrics = reward.source.rows(len(rows), {"rubric": [r["rubric"] for r in rows]}, "rubric")
    return criterion_rewards(reward, rubrics)


def test_weighted_criterion_values_add_up_to_the_score() -> None:
    reward = RubricReward(reward="score")
    funcs, weights = _split(reward, ROWS)
    assert len(funcs) == len(set(f.__name__ for f in funcs)) == len(weights)
    rng = random.Random(0)
    rows = [rng.choice(ROWS) for _ in range(64)]
    prompts, rubrics = [r["prompt"] for r in rows], [r["rubric"] for r in rows]
    completions = [_completion(rng) for _ in rows]
    scores = reward(prompts=prompts, completions=completions, rubric=rubrics)
    columns = [f(prompts=prompts, completions=completions, rubric=rubrics) for f in funcs]
    for i, (row, score) in enumerate(zip(rows, scores, strict=True)):
        names = {c["name"] for c in row["rubric"]["criteria"]}
        values = {f.criterion: col[i] for f, col in zip(funcs, columns, strict=True)}
        assert {n for n, v in values.items() if v is not None} == names  # None exactly where the rubric has none
        positive = sum(w for f, w in zip(funcs, weights, strict=True) if f.criterion in names and w > 0)
        raw = sum(w * values[f.criterion] for f, w in zip(funcs, weights, strict=True) if f.criterion in names)
        assert score == pytest.approx(min(1.0, max(0.0, raw / positive)))
    reward.close()


def test_the_batch_is_judged_once_whichever_function_runs_first(monkeypatch: pytest.MonkeyPatch) -> None:
    reward = RubricReward(reward="score")
    funcs, _ = _split(reward, ROWS[:5])
    calls = []
    real = reward.call_records
    monkeypatch.setattr(reward, "call_records", lambda *a, **k: calls.append(1) or real(*a, **k))
    logged: dict[str, float] = {}
    batch = dict(prompts=[ROWS[0]["prompt"]] * 2, completions=["tea is good " * 6, "tea"],
                 rubric=[ROWS[0]["rubric"]] * 2, log_metric=logged.__setitem__)
    for f in reversed(funcs):
        f(**batch)
    assert len(calls) == 1 and logged["rubric/reward_mean"] > 0  # the rubric's own metrics, once
    funcs[0](**{**batch, "completions": list(batch["completions"])})  # a new batch (a new list) is scored again
    assert len(calls) == 2
    reward.close()


def test_unscored_rows_are_none_and_guarded_rows_are_at_their_worst() -> None:
    reward = RubricReward(reward="score", guards={"truncated": True, "max_completion_length": 4})
    funcs, weights = _split(reward, ROWS[:1])
    batch = dict(prompts=["p", "p", "p"], completions=["tea " * 20, "tea", "tea"],
                 completion_ids=[[1, 2, 3, 4], [1], [1]], rubric=[ROWS[0]["rubric"], ROWS[0]["rubric"], "{not: [a rubric"])
    got = {f.criterion: f(**batch) for f in funcs}
    for (name, values), w in zip(got.items(), weights, strict=True):
        assert values[0] == (0.0 if w > 0 else 1.0), name  # truncated: every criterion at its worst
        assert values[1] is not None and values[2] is None, name  # scored; an unusable rubric: unscored
    reward.close()


def test_what_cannot_be_split_is_one_line() -> None:
    a = Rubric.from_obj({"name": "a", "criteria": [{"name": "x", "requirement": "r", "weight": 2}]})
    b = Rubric.from_obj({"name": "b", "criteria": [{"name": "x", "requirement": "r", "weight": 1}]})
    with pytest.raises(ValueError, match="criterion 'x' has weight 2 in rubric 'a' and 1 in rubric 'b'"):
        criterion_weights([a, b])
    assert criterion_weights([a, a]) == {"x": 2.0}
    for overrides, field in (({"length_penalty": {"enabled": True}}, "length_penalty"),
                             ({"scoring": {"all_or_nothing": True}}, "all_or_nothing")):
        with pytest.raises(ValueError, match=field) as info:
            criterion_rewards(RubricReward(reward="score", **overrides), [a])
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="no criteria"):
        criterion_rewards(RubricReward(reward="score"), [])


def test_criterion_functions_pickle_without_their_last_batch() -> None:
    import pickle

    reward = RubricReward(reward="score")
    funcs, _ = _split(reward, ROWS[:3])
    batch = dict(prompts=[ROWS[0]["prompt"]], completions=["tea " * 20], rubric=[ROWS[0]["rubric"]])
    want = [f(**batch) for f in funcs]
    copies = pickle.loads(pickle.dumps(funcs))
    assert copies[0]._batches is copies[1]._batches and copies[0]._batches._completions is None
    assert [f(**batch) for f in copies] == want
    reward.close()
    copies[0].close()
