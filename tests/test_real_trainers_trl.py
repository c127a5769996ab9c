"""TRL 1.16's experimental AsyncGRPOTrainer, through its own scoring code: the reward is pickled (the trainer
spawns a CUDA-free child and checks ``pickle.dumps`` of its reward functions first), then TRL's
``_AsyncRolloutLoop._score_group`` calls it one prompt group at a time with no ``trainer_state`` or log hooks and
takes ``nansum`` over functions with no ``reward_weights``. So weights must be folded into the function:
``combine_rewards(..., weights=...)`` does that, and keeps an unscored rubric row out (advantage 0) instead of
counting it as 0. The loop object is a stand-in holding the attributes ``_score_group`` reads; the method, the
group type and the aggregation are TRL's."""

from __future__ import annotations

import asyncio
import os
import pickle
from types import SimpleNamespace

import pytest

from rubric_reward.testing.judge_server import Fault, FaultPlan

RUBRIC = {"name": "capital", "criteria": [
    {"name": "names_paris", "requirement": "The response names Paris as the capital of France."},
    {"name": "polite", "requirement": "The response asks politely."}]}
SCRIPT = {"names_paris": lambda r, b: "MET" if "Paris" in r else "UNMET",
          "polite": lambda r, b: "MET" if "please" in r else "UNMET"}
RESPONSES = ["Paris, please.", "Lyon.", "Paris.", "Please ask again."]


def length_reward(completions, **kwargs):  # module level: picklable, as TRL's spawned child needs
    return [len(c[-1]["content"] if isinstance(c, list) else c) / 100 for c in completions]


@pytest.mark.timeout(300)
def test_async_grpo_scores_a_group_with_weights_folded_in(judge_server):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from accelerate import PartialState
    from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, TrainingSequence, _AsyncRolloutLoop

    PartialState(cpu=True)  # TRL's child has one (its logger needs it)

    from rubric_reward.rl import RubricReward, combine_rewards

    # the 2nd judge call fails for good (a 400 is not retried): one completion's rubric is unscored
    server = judge_server(SCRIPT, faults=FaultPlan(fixed={1: Fault(status=400)}))
    rubric = RubricReward(judge={"model": "judge", "base_url": server.base_url, "max_concurrency": 1},
                          rubric=RUBRIC, rubric_column=None)
    reward = pickle.loads(pickle.dumps(combine_rewards(rubric, [length_reward], weights=[2.0, 0.5])))
    n = len(RESPONSES)
    group = RolloutGroup(
        prompts=[[{"role": "user", "content": "What is the capital of France?"}]] * n,
        reward_kwargs={"topic": ["geo"] * n},
        completions=[[{"role": "assistant", "content": r}] for r in RESPONSES],
        completions_ids=[[1, 2, 3]] * n,
        completions_sequences=[[TrainingSequence(input_ids=[0, 1, 2, 3], completion_mask=[0, 1, 1, 1],
                                                 old_log_probs=[0.0] * 4, rollout_id=str(i))] for i in range(n)],
        tool_call_counts=[0] * n, tool_failure_counts=[0] * n, model_version=0, group_id=0,
        env_rewards=[None] * n, rollout_rewards=[None] * n)
    loop = SimpleNamespace(reward_funcs=[reward], reward_func_names=[reward.__name__], _env_reward_types=[],
                           _provides_rollout_reward=False)
    try:
        samples = asyncio.run(_AsyncRolloutLoop._score_group(loop, group))
    finally:
        reward.close()
    rewards = [s.metrics["reward"] for s in samples]
    unscored = [i for i, r in enumerate(rewards) if r != r]  # NaN: every function said None
    assert len(unscored) == 1 and samples[unscored[0]].advantage == 0.0
    for i, (text, value) in enumerate(zip(RESPONSES, rewards, strict=True)):
        if i not in unscored:
            expected = 2.0 * (("Paris" in text) + ("please" in text)) / 2
            assert value == pytest.approx(expected + 0.5 * len(text) / 100), text
    scored = [s.advantage for i, s in enumerate(samples) if i not in unscored]
    assert abs(sum(scored)) < 1e-6 and max(scored) > 0  # normalised within the group's scored rows


@pytest.mark.timeout(300)
def test_environment_factory_env_owns_the_rubric_reward(judge_server):
    """TRL 1.16's GRPOTrainer with ``environment_factory`` and no ``reward_funcs``: what it does with the env,
    call for call (grpo_trainer.py: the probe with ``inspect.getmembers(type(instance), inspect.isfunction)``,
    tools rendered by transformers' ``get_json_schema``, ``reset(**row)`` per rollout, the tool call, then its
    async wrapper ``[await e.get_reward() if type(e) is _env_type else None for e in environments]``). The
    GRPOTrainer itself is not built here (a model and generation are beside the point)."""
    import inspect

    from transformers.utils import get_json_schema

    from rubric_reward.integrations.trl_env import RubricEnvironment, rubric_environment

    server = judge_server(SCRIPT)
    factory = pickle.loads(pickle.dumps(rubric_environment(
        judge={"model": "judge", "base_url": server.base_url}, rubric=RUBRIC)))  # AsyncGRPO pickles it
    probe = factory()
    members = dict(inspect.getmembers(type(probe), predicate=inspect.isfunction))
    assert "reset" in members and "get_reward" in members and inspect.iscoroutinefunction(probe.get_reward)
    tools = [getattr(probe, m) for m in members if m not in ("reset", "get_reward") and not m.startswith("_")]
    assert [t.__name__ for t in tools] == ["submit_answer"]
    schema = get_json_schema(tools[0])
    assert schema["function"]["parameters"]["required"] == ["answer"]

    rows = [{"prompt": [{"role": "user", "content": "What is the capital of France?"}], "rubric": None}] * 4
    inline = {"name": "city", "criteria": [{"name": "names_paris", "requirement": "It names Paris."}]}
    rows = rows[:3] + [{"prompt": rows[0]["prompt"], "rubric": inline}]
    environments = [probe] + [factory() for _ in rows[1:]]
    for env, row in zip(environments, rows, strict=True):
        assert env.reset(**row) is None
    answers = ["Paris, please.", "Lyon.", None, "Paris."]  # the third rollout never submits
    for env, answer in zip(environments, answers, strict=True):
        if answer is not None:
            assert env.submit_answer(answer=answer) == "Answer submitted."
    _env_type = RubricEnvironment

    async def get_reward(environments, _env_type=_env_type, **kwargs):  # TRL's wrapper, verbatim
        return [await e.get_reward() if type(e) is _env_type else None for e in environments]

    try:
        rewards = asyncio.run(get_reward(environments))
    finally:
        factory.close()
    assert rewards == [1.0, 0.0, 0.0, 1.0]  # Lyon fails both criteria; no answer gets no_answer_reward
    assert any(b["messages"] for b in server.bodies)
