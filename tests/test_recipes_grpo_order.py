"""The training order: 'balanced' deals the strata in turn, seeded; 'shuffle' leaves TRL's shuffle on."""

from collections import Counter
from types import SimpleNamespace

import pytest

from rubric_reward.recipes.grpo.arguments import RecipeArguments
from rubric_reward.recipes.grpo.builders import train_rows
from rubric_reward.recipes.grpo.data import load_prompt_rows, split_rows
from rubric_reward.recipes.grpo.data.order import balanced_order


@pytest.fixture(scope="module")
def splits():
    return split_rows(load_prompt_rows("offline-instructions"), selection=40, report=80, train="rest", seed=0)


@pytest.mark.parametrize("seed", range(5))
def test_every_prefix_is_balanced(splits, seed):
    order = balanced_order(splits.train, stratify=splits.stratify, seed=seed)
    assert sorted(r["id"] for r in order) == sorted(r["id"] for r in splits.train)
    for n in (5, 20, 40, 120):
        counts = Counter(r["benchmark"] for r in order[:n])
        assert max(counts.values()) - min(counts.values()) == 0 and len(counts) == 5


def test_seeded_and_deterministic(splits):
    a = [r["id"] for r in balanced_order(splits.train, stratify="benchmark", seed=1)]
    assert a == [r["id"] for r in balanced_order(list(reversed(splits.train)), stratify="benchmark", seed=1)]
    assert a != [r["id"] for r in balanced_order(splits.train, stratify="benchmark", seed=2)]


def test_uneven_strata_run_out_in_turn():
    rows = [{"id": f"a{i}", "t": "a"} for i in range(5)] + [{"id": "b0", "t": "b"}]
    order = balanced_order(rows, stratify="t", seed=0)
    assert {r["t"] for r in order[:2]} == {"a", "b"} and len(order) == 6


def test_train_rows_turns_trl_shuffle_off(splits):
    training = SimpleNamespace(seed=3, shuffle_dataset=True)
    rows = train_rows(RecipeArguments(train_order="balanced"), training, splits)
    assert training.shuffle_dataset is False and Counter(r["benchmark"] for r in rows[:10]) == Counter(
        {t: 2 for t in ("bullets", "fewer_words", "highlights", "no_comma", "placeholders")})
    training = SimpleNamespace(seed=3, shuffle_dataset=True)
    assert train_rows(RecipeArguments(), training, splits) == splits.train and training.shuffle_dataset is True


def test_unknown_order_is_one_line_error():
    with pytest.raises(ValueError, match="train_order must be one of shuffle, balanced, got 'random'"):
        RecipeArguments(train_order="random")
