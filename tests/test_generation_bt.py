"""Bradley-Terry: hand-computed solutions, ties as half wins, stability on an unbeaten candidate."""

import math

import pytest

from rubric_reward.generation.bradley_terry import bradley_terry, win_probability


def test_plain_mle_matches_a_hand_computed_solution():
    # strengths 4 : 2 : 1, and win counts exactly equal to their expectations:
    # 0 vs 1: 2 of 3 (4/6), 1 vs 2: 2 of 3 (2/3), 0 vs 2: 4 of 5 (4/5). The MLE is then exactly log(4, 2, 1).
    comps = [(0, 1, 1)] * 2 + [(1, 0, 1)] + [(1, 2, 1)] * 2 + [(2, 1, 1)] + [(0, 2, 1)] * 4 + [(2, 0, 1)]
    bt = bradley_terry(3, comps, prior=0.0)
    expected = [math.log(p) - math.log(8) / 3 for p in (4, 2, 1)]
    assert bt.converged
    assert bt.strengths == pytest.approx(expected, abs=1e-9)
    assert bt.order() == [0, 1, 2]


def test_prior_solution_matches_hand_computation():
    # two candidates, one win for 0. By symmetry theta = (t, -t) with 1 - sigmoid(2t) = prior * t.
    # Choosing prior = 0.5 / ln 3 makes t = ln(3) / 2 the solution (sigmoid(ln 3) = 3/4).
    bt = bradley_terry(2, [(0, 1, 1.0)], prior=0.5 / math.log(3))
    assert bt.strengths == pytest.approx([math.log(3) / 2, -math.log(3) / 2], abs=1e-9)
    assert win_probability(*bt.strengths) == pytest.approx(0.75)


def test_ties_count_as_half_wins():
    tie = bradley_terry(3, [(0, 1, 0.5), (1, 2, 1.0), (0, 2, 0.5)] * 2)
    split = bradley_terry(3, [(0, 1, 1.0), (0, 1, 0.0), (1, 2, 1.0), (1, 2, 1.0), (0, 2, 1.0), (2, 0, 1.0)])
    assert tie.strengths == pytest.approx(split.strengths, abs=1e-9)
    assert bradley_terry(2, [(0, 1, 0.5)] * 5).strengths == pytest.approx([0.0, 0.0], abs=1e-12)


def test_unbeaten_candidate_stays_finite_and_on_top():
    comps = [(0, j, 1.0) for j in (1, 2, 3)] * 3 + [(1, 2, 1.0), (2, 3, 0.5)]
    bt = bradley_terry(4, comps, prior=0.1)
    assert bt.converged and bt.iterations < 50
    assert all(math.isfinite(s) for s in bt.strengths)
    assert bt.order()[0] == 0 and bt.strengths[0] < 20
    # the same data, listed in another order and with pairs flipped, gives the same answer
    flipped = [(j, i, 1.0 - c) for i, j, c in reversed(comps)]
    assert bradley_terry(4, flipped, prior=0.1).strengths == pytest.approx(bt.strengths, abs=1e-9)
    # without a prior the unbeaten candidate runs away: this is what the prior is for
    assert bradley_terry(4, comps, prior=0.0, max_iter=30).strengths[0] > bt.strengths[0] + 10


def test_uncompared_candidate_sits_at_the_prior_mean_and_bad_input_is_refused():
    bt = bradley_terry(3, [(0, 1, 1.0)], prior=1.0)
    assert bt.strengths[2] == pytest.approx(0.0, abs=1e-12)
    assert bt.strengths[0] == pytest.approx(-bt.strengths[1], abs=1e-12)
    assert bt.strengths[0] > bt.strengths[2] > bt.strengths[1]
    for bad in ([(0, 0, 1.0)], [(0, 3, 1.0)], [(0, 1, 1.5)]):
        with pytest.raises(ValueError):
            bradley_terry(3, bad)
    with pytest.raises(ValueError):
        bradley_terry(2, [], prior=-1)


def test_package_export_is_the_function_even_after_the_submodule_is_imported():
    import rubric_reward.generation.preferences  # noqa: F401  (imports the bradley_terry submodule)
    from rubric_reward.generation import bradley_terry as exported

    assert callable(exported) and exported.__name__ == "bradley_terry"
