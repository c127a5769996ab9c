"""A real TRL GRPOTrainer (tiny Qwen3, CPU) rewarded by RubricReward through the loopback judge.

One test, one trl import: plain prompts with the sync reward alone; conversational prompts with the
async form next to a second reward, the rubric read from a column; and a judge that fails every call
(an all-None batch), where the steps must still complete.
"""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("trl")

from rubric_reward.rl import RubricReward  # noqa: E402
from rubric_reward.testing.judge_server import Fault, FaultPlan  # noqa: E402

RUBRIC = {"criteria": [{"name": "short", "requirement": "The answer is short."},
                       {"name": "polite", "requirement": "The answer is polite."}]}


def _train(model_dir, out_dir, dataset, rewards, **extra):
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(out_dir), max_steps=2, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=8, learning_rate=1e-4, logging_steps=1, save_strategy="no", report_to=[],
        use_cpu=True, bf16=False, seed=0, disable_tqdm=True, **extra,
    )
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=rewards, args=args, train_dataset=dataset)
    trainer.train()
    logged: dict[str, list[float]] = {}
    for entry in trainer.state.log_history:
        for k, v in entry.items():
            logged.setdefault(k, []).append(v)
    return trainer, logged


def _finite_rubric_metrics(logged, *required):
    names = [k for k in logged if k.startswith("rubric/")]
    for name in required:
        assert f"rubric/{name}" in logged, (name, sorted(logged))
    for name in names:
        assert all(isinstance(v, float) and math.isfinite(v) for v in logged[name]), (name, logged[name])
    return names


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_grpo_trainer_with_rubric_reward(judge_server, tmp_path, tiny_model):
    import torch
    from datasets import Dataset

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 64-wide model: thread hand-offs cost more than they save on a busy machine
    try:
        _run_all(judge_server, tmp_path, Dataset, tiny_model)
    finally:
        torch.set_num_threads(threads)


def _run_all(judge_server, tmp_path, Dataset, model):
    length_verdict = {"short": lambda r, b: "MET" if len(r) < 20 else "UNMET", "polite": "MET"}
    server = judge_server(length_verdict)

    # 1. plain prompts, sync form, the only reward
    plain = Dataset.from_dict({"prompt": ["Write a short answer.", "Reply to the customer."]})
    reward = RubricReward(judge="judge", base_url=server.base_url, rubric=RUBRIC)
    trainer, logged = _train(model, tmp_path / "plain", plain, reward, log_completions=True)
    names = _finite_rubric_metrics(logged, "reward_mean", "unscored_frac", "judge_calls", "pass/short",
                                   "latency_p50_s", "cost_total", "guarded_frac")
    assert len(logged["rubric/reward_mean"]) == 2 and "rewards/rubric/mean" in logged
    assert server.requests > 0
    assert "rubric_score" in trainer._logs["extra"] and "rubric_failed" in trainer._logs["extra"]
    assert len(trainer._logs["extra"]["rubric_score"]) == len(trainer._logs["completion"])
    reward.close()

    # 2. conversational prompts, async form next to a second reward, rubric from a column
    convo = Dataset.from_dict({
        "prompt": [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}],
                   [{"role": "user", "content": "Name a colour."}]],
        "rubric": [json.dumps(RUBRIC), '["Is the answer polite?"]'],  # a JSON rubric, AdvancedIF questions
    })

    def brevity(completions, **_):
        return [-len(c[0]["content"]) / 100 for c in completions]

    areward = RubricReward(judge="judge", base_url=server.base_url).as_async()
    requests_before = server.requests
    _, logged = _train(model, tmp_path / "convo", convo, [areward, brevity])
    _finite_rubric_metrics(logged, "reward_mean", "unscored_frac", "judge_calls")
    assert "rewards/rubric/mean" in logged and "rewards/brevity/mean" in logged
    assert server.requests > requests_before
    assert any("Be brief." in b["messages"][-1]["content"] for b in server.bodies[requests_before:])
    areward.close()

    # 3. the criteria as separate rewards (GDPO): judged once per batch, each criterion logged by TRL
    from rubric_reward.rl.criteria import criterion_rewards

    reward = RubricReward(judge="judge", base_url=server.base_url, rubric=RUBRIC)
    funcs, weights = criterion_rewards(reward, [reward.source.default])
    requests_before = server.requests
    _, logged = _train(model, tmp_path / "criteria", plain, funcs, reward_weights=weights,
                       multi_objective_aggregation="normalize_then_sum")
    assert len(logged["rubric/reward_mean"]) == 2  # the rubric reward ran once per step, not once per criterion
    assert server.requests - requests_before == sum(logged["rubric/judge_calls"]) <= 2 * 4 * 2
    assert {"rewards/rubric:short/mean", "rewards/rubric:polite/mean"} <= set(logged)
    reward.close()

    # 4. a judge that fails every call: every reward None, the steps still complete
    broken = judge_server(length_verdict, faults=FaultPlan(rate=1.0, kinds=(Fault(status=503),)))
    failing = RubricReward(judge={"model": "judge", "max_retries": 0}, base_url=broken.base_url, rubric=RUBRIC)
    trainer, logged = _train(model, tmp_path / "broken", plain, failing)
    assert trainer.state.global_step == 2
    assert logged["rubric/unscored_frac"] == [1.0, 1.0]
    _finite_rubric_metrics(logged, "unscored_frac", "failures/server")
    failing.close()
    assert names
