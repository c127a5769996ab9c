"""Pair selection (seeded, covering, capped) and the chosen/rejected rule."""

import itertools
import math

import pytest

from rubric_reward.generation.preferences import PreferenceConfig, choose_pair, choose_pairs, select_pairs


@pytest.mark.parametrize("k,m", [(2, 1), (3, 2), (5, 3), (8, 4), (8, 10), (8, 28), (8, 100), (9, 10)])
def test_select_pairs_covers_every_candidate(k, m):
    for seed in range(5):
        pairs = select_pairs(k, m, seed=seed, key="p")
        assert len(pairs) == min(m, k * (k - 1) // 2)
        assert len(set(pairs)) == len(pairs)
        assert all(0 <= i < j < k for i, j in pairs)
        assert set(itertools.chain.from_iterable(pairs)) == set(range(k))


def test_select_pairs_is_seeded_by_seed_and_prompt():
    a = select_pairs(8, 10, seed=1, key="p1")
    assert a == select_pairs(8, 10, seed=1, key="p1")
    others = {tuple(select_pairs(8, 10, seed=s, key=key)) for s in range(3) for key in ("p1", "p2")}
    assert len(others) > 1
    assert select_pairs(1, 5) == []
    with pytest.raises(ValueError, match="cannot cover"):
        select_pairs(8, 3)
    with pytest.raises(ValueError, match="need m >= 4"):
        PreferenceConfig(k=8, m=3)


def test_choose_pair_takes_strongest_and_weakest():
    best, worst, why = choose_pair([0.1, 1.5, -2.0, 0.3])
    assert (best, worst) == (1, 2)
    assert "P(strongest beats weakest)" in why


def test_choose_pair_skips_indistinguishable_or_identical():
    best, worst, why = choose_pair([0.0, 0.0, 0.0])
    assert best is None and worst is None and why.startswith("indistinguishable")
    # sigmoid(0.2) = 0.5498 < 0.55: skipped; sigmoid(0.21) = 0.5523: kept
    assert choose_pair([0.1, -0.1])[0] is None
    assert choose_pair([0.105, -0.105])[:2] == (0, 1)
    assert choose_pair([1.0, -1.0], texts=["same", "same"])[0] is None
    assert choose_pair([1.0])[0] is None
    # equal strengths at the top: the lower index wins, deterministically
    assert choose_pair([2.0, 2.0, -3.0])[:2] == (0, 2)
    assert math.isclose(1 / (1 + math.exp(-0.2)), 0.5498, abs_tol=1e-4)


def test_choose_pairs_pairs_the_ranking_from_both_ends():
    # ranking 3 > 0 > 4 > 1 > 2 > 5 (5 and 2 tie at the bottom: the lower index ranks first)
    strengths = [1.0, -1.0, -2.0, 2.0, 0.5, -2.0]
    assert choose_pairs(strengths, max_pairs=1)[0] == [(3, 5)]
    pairs, why = choose_pairs(strengths, max_pairs=4)
    assert pairs == [(3, 5), (0, 2), (4, 1)]  # at most len // 2 pairs: every candidate in one row at most
    assert why.count(",") == 2
    # the second pair fails the skip rule: stop there, keep the first
    assert choose_pairs([2.0, 0.0, 0.0, -2.0], max_pairs=2)[0] == [(0, 3)]
    # an identical pair stops the walk too; the first failure is the reason when none passes
    assert choose_pairs([2.0, 1.0, -1.0, -2.0], texts=["a", "b", "b", "c"], max_pairs=3)[0] == [(0, 3)]
    assert choose_pairs([0.0, 0.0], max_pairs=3) == ([], choose_pair([0.0, 0.0])[2])
    assert choose_pair(strengths)[:2] == (3, 5)
    with pytest.raises(ValueError, match="pairs_per_prompt"):
        PreferenceConfig(pairs_per_prompt=0)
