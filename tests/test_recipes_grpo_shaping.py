"""Shaping rewards (rubric_reward.recipes.grpo.shaping): TRL's own functions, checked in one line, training only."""

from __future__ import annotations

import pytest

from rubric_reward.recipes.grpo.arguments import RecipeArguments
from rubric_reward.recipes.grpo.shaping import build_shaping, check_shaping


def test_build_gives_trls_functions_in_order() -> None:
    from trl.rewards import get_repetition_penalty_reward, get_soft_overlong_punishment

    funcs = build_shaping({"soft_overlong_punishment": {"soft_punish_cache": 4},
                           "repetition_penalty": {"ngram_size": 2, "max_penalty": -0.5}}, 10)
    ids = [[1, 2, 3], [5, 5, 5, 5, 5, 5, 5, 5], list(range(10))]
    assert funcs[0](ids) == get_soft_overlong_punishment(10, 4)(ids) == [0.0, -0.5, -1.0]
    assert funcs[1](ids) == get_repetition_penalty_reward(2, -0.5)(ids)
    assert funcs[1](ids)[1] < funcs[1](ids)[0] == 0.0
    assert build_shaping(None, 96) == [] and build_shaping({}, 96) == []


def test_defaults_are_trls() -> None:
    rep, = build_shaping({"repetition_penalty": None}, 96)
    assert (rep.ngram_size, rep.max_penalty) == (3, -1.0)
    over, = build_shaping({"soft_overlong_punishment": {}}, 96)
    assert over([[0] * 80, [0] * 96]) == [0.0, -1.0]
    with pytest.raises(ValueError, match="needs max_completion_length"):
        build_shaping({"soft_overlong_punishment": {}}, None)


@pytest.mark.parametrize(("spec", "kwargs", "named"), [
    ("repetition", {}, "shaping_rewards: expected a mapping"),
    ({"length": {}}, {}, "shaping_rewards: unknown field(s) ['length']"),
    ({"repetition_penalty": 3}, {}, "field 'repetition_penalty' must be a mapping of RepetitionPenalty fields"),
    ({"repetition_penalty": {"ngram": 3}}, {}, "shaping_rewards.repetition_penalty: unknown field(s) ['ngram']"),
    ({"repetition_penalty": {"ngram_size": True}}, {}, "field 'ngram_size' must be an integer"),
    ({"repetition_penalty": {"ngram_size": 0}}, {}, "field 'ngram_size' must be >= 1"),
    ({"repetition_penalty": {"max_penalty": "-1"}}, {}, "field 'max_penalty' must be a number"),
    ({"soft_overlong_punishment": {"soft_punish_cache": 0}}, {}, "field 'soft_punish_cache' must be >= 1"),
    ({"soft_overlong_punishment": {"soft_punish_cache": 97}}, {"max_completion_length": 96}, "exceeds"),
    ({"repetition_penalty": {}}, {"reward_weights": [1.0, 0.5, 0.5]}, "3 weight(s) for 2 rewards"),
])
def test_bad_specs_are_one_line_naming_the_field(spec, kwargs, named) -> None:
    with pytest.raises(ValueError) as info:
        check_shaping(spec, **kwargs)
    assert named in str(info.value) and "\n" not in str(info.value)


def test_recipe_arguments_take_a_command_line_mapping() -> None:
    recipe = RecipeArguments(shaping_rewards='{repetition_penalty: {max_penalty: -0.5}}')
    assert recipe.shaping_rewards == {"repetition_penalty": {"max_penalty": -0.5}}
    with pytest.raises(ValueError, match="shaping_rewards.repetition_penalty: field 'max_penalty' must be <= 0"):
        RecipeArguments(shaping_rewards='{repetition_penalty: {max_penalty: 1}}')



def test_per_criterion_rewards_take_the_training_rubrics_weights_then_the_shaping_terms() -> None:
    import json
    from pathlib import Path
    from types import SimpleNamespace

    from rubric_reward.recipes.grpo.arguments import RecipeArguments
    from rubric_reward.recipes.grpo.builders import reward_funcs
    from rubric_reward.rl import RubricReward

    rows = [json.loads(x) for x in (Path(__file__).resolve().parents[1] / "rubric_reward" / "data" / "instructions"
                                    / "prompts.jsonl").read_text().splitlines()[:12]]
    reward = RubricReward(reward="score")
    shaping = build_shaping({"repetition_penalty": {}}, 96)
    training = SimpleNamespace(reward_weights=None, multi_objective_aggregation="normalize_then_sum")
    recipe = RecipeArguments(per_criterion_rewards=True)
    funcs = reward_funcs(recipe, training, reward, rows, shaping)
    assert [getattr(f, "criterion", None) for f in funcs[:3]] == ["fewer_words", "long_enough", "on_topic"]
    assert funcs[-1] is shaping[0] and len(training.reward_weights) == len(funcs)
    assert training.reward_weights[:3] == [2.0, 1.0, 1.0] and training.reward_weights[-1] == 1.0
    assert reward_funcs(RecipeArguments(), training, reward, rows, shaping) == [reward, *shaping]
    reward.close()
