"""One decision, one place: every path that needs one of these decisions gets the same answer from the same code.

* a rubric with judged criteria needs a judge (``scorer.require_judge``): Scorer, the reward engine (the
  service's 422 ``no_judge``), RubricReward;
* are two prompts the same (``items.prompt_key``): the engine's normalisation, the grader's identical pairs and
  groups, a group judge's seeds, the TRL plugin's metrics;
* when to give up on a batch (``rubric_reward.util.deadlines``): the engine, the grader and the transport;
* the Judge protocol (``judges.base.JudgeLike``) the grader reads, and a Grader with no judge for checks only;
* one judge-call loop (``grading.calls.run_call``: send, strict read, one re-ask, usage, record) for
  per-criterion, per-item and group calls;
* the GRPO launch: one default config, one monitor-judge predicate, one base-URL rule;
* what a criterion counts with in the reward (``Criterion.reward_weight``: 0 for a monitor): the score, its
  logged terms (``arithmetic.score_terms``) and the per-criterion TRL rewards' weights.
"""

from __future__ import annotations

import pytest

JUDGED = {"name": "judged", "criteria": [{"name": "ok", "requirement": "Is it ok?"}]}
CHECKS = {"name": "checks", "criteria": [{"name": "c", "check": "ifeval:punctuation:no_comma"}]}


# ------------------------------------------------------------------------------------------ judged needs a judge


def test_every_path_says_a_judged_rubric_needs_a_judge_the_same_way() -> None:
    from rubric_reward import Scorer
    from rubric_reward.rewards.engine import RewardEngine
    from rubric_reward.rewards.samples import SampleError
    from rubric_reward.rl import RubricReward
    from rubric_reward.rubric import load_rubric
    from rubric_reward.scorer import NoJudgeError, require_judge

    with pytest.raises(NoJudgeError) as core:
        require_judge(load_rubric(JUDGED), False)
    said = str(core.value)
    assert "judge is needed" in said and "has no 'judge'" in said
    with pytest.raises(ValueError) as scorer:
        Scorer(JUDGED)
    with pytest.raises(ValueError) as engine:
        RewardEngine({"rubric": JUDGED})
    with pytest.raises(ValueError) as reward:
        RubricReward(rubric=JUDGED)
    assert str(scorer.value) == f"Scorer: {said}"
    assert str(engine.value) == f"RewardConfig: field 'rubric': {said}"
    assert str(reward.value) == f"rubric reward: {said}"
    # a per-sample rubric: the engine's SampleError (the service's 422) carries the same words
    engine_ok = RewardEngine({"rubric": CHECKS})
    with pytest.raises(SampleError) as sample:
        engine_ok.usable(load_rubric(JUDGED), "labels[0]")
    assert sample.value.code == "no_judge" and sample.value.message == said
    # programmatic checks need none, on every path
    for rubric in (CHECKS,):
        assert require_judge(load_rubric(rubric), False).name == "checks"
        assert not Scorer(rubric).has_judge and Scorer(rubric).judge_names == []
        RubricReward(rubric=rubric)


def test_a_grader_with_no_judge_grades_checks() -> None:
    from rubric_reward import Scorer

    with Scorer(CHECKS) as scorer:
        assert scorer.calls_per_item(scorer.rubric) == 0
        assert scorer.score("Say hi.", "hi there").score == 1.0
        assert scorer.score("Say hi.", "hi, there").score == 0.0


# ------------------------------------------------------------------------------------------ the same prompt


def _prompts():
    from rubric_reward.items import Conversation, as_messages

    base = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]
    same = [
        base,
        [dict(m) for m in base],  # an equal copy (a trainer's fresh list per generation)
        [{"content": m["content"], "role": m["role"]} for m in base],  # keys in another order
        [{**m, "name": "x"} for m in base],  # a field the judge never sees
        Conversation(as_messages(base)),  # the engine's normalised form
        [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, base[1]],  # content parts
    ]
    other = [[{"role": "user", "content": "Name a colour."}], "Name a colour.", None]
    return same, other


def test_prompt_key_is_one_answer() -> None:
    from rubric_reward.items import prompt_key

    same, other = _prompts()
    keys = {prompt_key(p) for p in same}
    assert len(keys) == 1
    assert len({prompt_key(p) for p in other} | keys) == 4 and prompt_key(None) is None
    assert prompt_key("text") == "text"


def test_every_path_groups_prompts_by_prompt_key() -> None:
    """The engine's normalisation, the grader's pair and group keys, a group judge's seed and the TRL
    plugin's metric keys all partition the same prompts the same way."""
    from rubric_reward.grading.grader import _pair_keys
    from rubric_reward.grading.group import _group_key
    from rubric_reward.items import Item, prompt_key
    from rubric_reward.rewards.engine import RewardEngine
    from rubric_reward.rl.reward import _Batch
    from rubric_reward.rubric import load_rubric

    same, other = _prompts()
    prompts = [*same, *other]
    expected = [prompt_key(p) for p in prompts]

    def partition(keys):
        first: dict = {}
        return [first.setdefault(k, i) for i, k in enumerate(keys)]

    engine = RewardEngine({"rubric": CHECKS})
    rubric = engine.rubrics.default
    pairs = engine.prepare_batch(prompts, ["a"] * len(prompts), [rubric] * len(prompts))
    normalised = [item.prompt for _, item in pairs]
    assert len({id(p) for p in normalised[: len(same)]}) == 1  # one normalised conversation for the six copies
    assert partition([prompt_key(p) for p in normalised]) == partition(expected)
    assert partition([k for _, k in _pair_keys(pairs)]) == partition(expected)
    raw = [(load_rubric(CHECKS), Item(response="a", prompt=p)) for p in prompts]  # Scorer's path: not normalised
    assert partition([k for _, k in _pair_keys(raw)]) == partition(expected)
    assert partition([_group_key(Item(response="a", prompt=p), ["a"]) for p in prompts]) == partition(expected)
    assert partition(_Batch(prompts).prompt_keys) == partition(expected)


# ------------------------------------------------------------------------------------------ giving up on a batch


def test_deadline_rule() -> None:
    from rubric_reward.util.deadlines import batch_net, earliest, give_up_at

    assert earliest(None, None) is None and earliest(5, None, 3) == 3
    assert batch_net(None, [2.0, 4.0]) == 4.0 and batch_net(None, [2.0, None]) is None
    assert batch_net(10.0, [2.0, None]) == 10.0 and batch_net(10.0, [2.0, 3.0]) == 3.0 and batch_net(7.0, []) == 7.0
    assert give_up_at(None) is None and give_up_at(1.0) == 1.5 and give_up_at(60.0) == 66.0


def test_engine_grader_and_transport_give_up_by_the_same_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine passes the earliest of the request's and the config's deadline to the grader; the transport
    cuts a call at the earliest of its own, the batch's and its judge's batch deadline."""
    import asyncio

    from rubric_reward.judges import transport as transport_module
    from rubric_reward.judges.config import JudgeConfig
    from rubric_reward.judges.transport import Transport, batch_scope
    from rubric_reward.rewards.engine import RewardEngine

    engine = RewardEngine({"rubric": CHECKS, "deadline_s": 30})
    seen = []

    async def fake_pairs(pairs, *, deadline_s=None, **kw):
        seen.append(deadline_s)
        return ["result"] * len(pairs)

    monkeypatch.setattr(engine.scorer, "ascore_pairs", fake_pairs)
    monkeypatch.setattr(engine, "record", lambda result, rubric=None: result)
    pair = engine.prepare("p", "a")
    for asked, expect in ((None, 30), (5, 5), (50, 30)):
        assert asyncio.run(engine.score([pair], deadline_s=asked)) == ["result"]
        assert seen[-1] == expect

    class _Backend:
        name = "b"

        async def complete(self, request):  # pragma: no cover - never called
            raise AssertionError

        async def aclose(self):
            return None

    clock = [100.0]
    monkeypatch.setattr(transport_module, "_now", lambda: clock[0])
    for call, own, batch, expect in ((None, None, None, None), (9.0, None, None, 109.0), (9.0, 4.0, None, 104.0),
                                     (9.0, 4.0, 2.0, 102.0), (None, 4.0, 6.0, 104.0), (1.0, 4.0, 6.0, 101.0)):
        t = Transport(JudgeConfig(model="m", call_deadline_s=call, batch_deadline_s=own), _Backend())
        if batch is None and own is None:
            assert t._deadline(100.0) == expect
            continue
        with batch_scope(batch):
            assert t._deadline(100.0) == expect


def test_grader_reads_the_judge_protocol() -> None:
    import inspect

    import rubric_reward.grading.grader as grader
    from rubric_reward.judges.base import JudgeLike
    from rubric_reward.judges.config import JudgeConfig
    from rubric_reward.judges.judge import Judge

    class _Backend:
        name = "b"

        async def complete(self, request):  # pragma: no cover - never called
            raise AssertionError

        async def aclose(self):
            return None

    judge = Judge(JudgeConfig(model="m", max_concurrency=3), _Backend())
    assert isinstance(judge, JudgeLike) and judge.limiter is judge.transport.limiter and not judge.caches
    assert grader.Grader([judge])._item_window([]) >= 6  # twice the judge's slots, read through the protocol
    assert "getattr(" not in inspect.getsource(grader)  # no probing: the protocol says what a judge has


@pytest.mark.parametrize("mode", ["per_criterion", "per_item", "group"])
def test_every_mode_runs_its_calls_through_the_one_loop(mode, judge_server, monkeypatch) -> None:
    import inspect

    import rubric_reward.grading.group as group
    from rubric_reward import JudgeConfig, Scorer
    from rubric_reward.grading import calls, grader

    for module in (grader, group):  # only the loop sends: no module of grading calls a judge itself
        source = inspect.getsource(module)
        assert ".complete(" not in source and "getattr(" not in source, module.__name__
    seen = []
    real = calls.run_call

    async def counted(judge, call, **kw):
        outcome = await real(judge, call, **kw)
        seen.append((type(call).__name__, outcome.record))
        return outcome

    monkeypatch.setattr(grader, "run_call", counted)
    monkeypatch.setattr(group, "run_call", counted)
    server = judge_server(default="MET")
    rubric = {"name": "r", "criteria": [{"name": "a", "requirement": "A?"}, {"name": "b", "requirement": "B?"}]}
    config = JudgeConfig(model="j", base_url=server.base_url, mode=mode, max_retries=0)
    scorer = Scorer(rubric, config)
    try:
        results = scorer.score_batch([("Q?", "one"), ("Q?", "two")])
    finally:
        scorer.close()
    assert [r.score for r in results] == [1.0, 1.0]
    calls_made = {"per_criterion": 4, "per_item": 2, "group": 2 * config.group_passes}[mode]  # group: a call per criterion
    assert len(seen) == calls_made == server.requests
    assert {name for name, _ in seen} == {"GroupCall" if mode == "group" else "JudgeCall"}
    assert all(record.judge == "j" and record.error is None for _, record in seen)


# ------------------------------------------------------------------------------------------ the GRPO launch


def test_launch_has_one_default_config_and_names_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from rubric_reward.recipes.grpo import arguments, launch

    repo = Path(__file__).resolve().parents[1]
    assert "DEFAULT_CONFIG =" not in (repo / "train" / "grpo.py").read_text()
    assert arguments.DEFAULT_CONFIG == repo / "configs" / "grpo" / "offline_default.yaml"
    calls, parsed = [], []
    real = arguments.with_config
    monkeypatch.setattr(launch, "with_config", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(launch, "check_arguments", lambda argv: None)
    monkeypatch.setattr(launch, "_parse", lambda argv: parsed.append(argv) or (None, None, None))
    monkeypatch.setattr(launch, "run", lambda *a, **k: None)
    assert launch.main(["--max_steps", "1"]) == 0
    assert len(calls) == 1 and len(parsed) == 1 and parsed[0][:2] == ["--config", str(arguments.DEFAULT_CONFIG)]


@pytest.mark.parametrize(("judge", "url", "expected"), [
    (None, None, False), ("", None, True), ({}, None, True), (None, "http://h/v1", True), ("m", None, True)])
def test_one_monitor_judge_predicate(judge, url, expected, monkeypatch: pytest.MonkeyPatch) -> None:
    """builders.monitor_reward, the check and the final report ask the same question."""
    from types import SimpleNamespace

    from rubric_reward.recipes.grpo import builders

    recipe = SimpleNamespace(monitor_judge=judge, monitor_judge_base_url=url)
    assert builders.has_monitor_judge(recipe) is expected
    built = []
    monkeypatch.setattr(builders, "build_reward", lambda recipe, **kw: built.append(kw) or "reward")
    training = object()
    assert (builders.monitor_reward(recipe, training) is training) is not expected
    builders.build_monitor_reward(recipe)  # what the final report scores with
    assert built[-1] == ({"judge": judge, "base_url": url} if expected else {})


def test_recipe_base_url_follows_the_library_rule() -> None:
    """The recipe's judge_base_url reaches judges the way RewardConfig.base_url / Scorer(base_url=) does: it
    fills judges that name no base_url; one that names its own keeps it."""
    from rubric_reward.judges.config import load_judges
    from rubric_reward.recipes.grpo import RecipeArguments
    from rubric_reward.recipes.grpo.builders import reward_config

    judges = [{"model": "a"}, {"model": "b", "base_url": "http://own:1/v1"}, "c"]
    recipe = RecipeArguments(judge=judges, judge_base_url="http://flag:2/v1")
    from_recipe = [(j.model, j.base_url) for j in reward_config(recipe).judge_configs()]
    from_library = [(j.model, j.base_url) for j in load_judges(judges, base_url="http://flag:2/v1")]
    assert from_recipe == from_library == [("a", "http://flag:2/v1"), ("b", "http://own:1/v1"),
                                           ("c", "http://flag:2/v1")]
    # a monitor judge with its own base URL flag, through the same rule
    monitor = RecipeArguments(monitor_judge={"model": "m"}, monitor_judge_base_url="http://mon:3/v1")
    config = reward_config(monitor, judge=monitor.monitor_judge, base_url=monitor.monitor_judge_base_url)
    assert [j.base_url for j in config.judge_configs()] == ["http://mon:3/v1"]


# ------------------------------------------------------------------------------------------ a monitor counts 0


def test_the_score_its_logged_terms_and_the_trl_weights_read_one_weight() -> None:
    from rubric_reward.arithmetic import score_terms, score_verdicts
    from rubric_reward.results import Verdict
    from rubric_reward.rl.criteria import criterion_weights
    from rubric_reward.rubric import load_rubric

    rubric = load_rubric({"criteria": [{"name": "a", "requirement": "A?", "weight": 2},
                                       {"name": "m", "requirement": "M?", "weight": -3, "monitor": True},
                                       {"name": "z", "requirement": "Z?", "weight": 0}]})
    assert criterion_weights([rubric]) == {c.name: c.reward_weight for c in rubric.criteria} == {"a": 2, "m": 0, "z": 0}
    verdicts = [Verdict(c.name, "MET", 1.0) for c in rubric.criteria]
    terms = score_terms(rubric, verdicts)
    assert [terms[c.name] for c in rubric.criteria] == [1.0, 0.0, 0.0]
    assert score_verdicts(rubric, verdicts).score == sum(terms.values()) == 1.0
