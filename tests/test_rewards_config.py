"""RewardConfig, rubric resolution and the pure metrics: no judge, no server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rubric_reward.rewards.rubrics import RubricResolver as RubricSource
from rubric_reward.rl import LengthPenalty, RewardConfig
from rubric_reward.rl.step_metrics import RunningTotals, batch_metrics

ROOT = Path(__file__).resolve().parents[1]


def test_importing_the_reward_stays_light():
    code = ("import sys, rubric_reward.rl as rl; rl.RubricReward(judge='m', base_url='http://127.0.0.1:9/v1'); "
            "heavy = [m for m in ('torch', 'trl', 'transformers', 'litellm', 'scipy') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_config_yaml_errors_name_the_file_and_field(tmp_path):
    bad = tmp_path / "r.yaml"
    bad.write_text("judge: m\nguards: {degenerat: false}\n")
    with pytest.raises(ValueError, match=r"r\.yaml: RewardConfig\.guards: unknown field\(s\) \['degenerat'\]"):
        RewardConfig.from_yaml(bad)
    bad.write_text("judge: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        RewardConfig.from_yaml(bad)
    with pytest.raises(ValueError, match="no such reward config"):
        RewardConfig.from_yaml(tmp_path / "missing.yaml")
    with pytest.raises(ValueError, match="max_unscorable_fraction"):
        RewardConfig(max_unscorable_fraction=0)


def test_config_round_trips_and_maps_guards_onto_grading():
    cfg = RewardConfig.coerce({"judge": "m", "guards": {"degenerate": False}}, deadline_s=None)
    assert cfg.deadline_s is None and cfg.grading_dict() == {"screen_degenerate": False}
    again = RewardConfig.from_dict(cfg.to_dict())
    assert again == cfg
    assert RewardConfig.coerce(cfg) is cfg


def test_length_penalty_shape():
    lp = LengthPenalty(enabled=True, free=10, cap=20, penalty=1.0, exponent=2.0)
    assert [lp(n) for n in (5, 10, 15, 20, 40)] == [0.0, 0.0, 0.25, 1.0, 1.0]
    assert LengthPenalty()(10_000) == 0.0  # off by default
    with pytest.raises(ValueError, match="free < cap"):
        LengthPenalty(free=10, cap=10)


def test_rubric_ids_stay_inside_the_rubric_dir(tmp_path):
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "secret.yaml").write_text("criteria:\n  - Leaked?\n")
    (tmp_path / "rubrics" / "ok.yml").write_text("criteria:\n  - Fine?\n")
    source = RubricSource(rubric_dir=tmp_path / "rubrics")
    rows = source.rows(3, {"rubric": ["ok", "../secret", "ok"]})
    assert rows[0] is rows[2] and rows[0].criteria[0].requirement == "Fine?"  # parsed once
    assert isinstance(rows[1], ValueError) and "row 1" in str(rows[1])
    assert "no column 'rubric'" in str(source.rows(1, {"other": [1]})[0])


def test_metrics_are_finite_and_group_aware():
    from rubric_reward.rl.reward import RewardRecord

    records = [RewardRecord(r, score=r, length=n) for r, n in ((1.0, 10), (1.0, 12), (0.0, 3), (0.5, 7))]
    records.append(RewardRecord(None, error="x", error_kinds=("timeout",)))
    m = batch_metrics(records, lengths=[r.length for r in records], prompt_keys=["a", "a", "b", "b", "c"],
                      fixed_rubric=None, totals=RunningTotals(), batch_s=0.1)
    assert m["rubric/unscored_frac"] == 0.2
    assert m["rubric/zero_spread_groups"] == 0.5  # group a: 1.0, 1.0 -> no spread; b: 0.0, 0.5
    assert m["rubric/reward_length_spearman"] == pytest.approx(0.9486832980505138)
    constant = batch_metrics([RewardRecord(1.0, length=5)] * 4, lengths=[5] * 4, prompt_keys=["a"] * 4,
                             fixed_rubric=None, totals=RunningTotals(), batch_s=0.0)
    assert "rubric/reward_length_spearman" not in constant  # undefined: left out, never NaN


def test_bind_reads_the_trainer_args():
    from rubric_reward.rl import RubricReward

    r = RubricReward(judge="m", base_url="http://127.0.0.1:9/v1", guards={"truncated": True})
    assert r.bind(SimpleNamespace(args=SimpleNamespace(max_completion_length=256))).max_completion_length == 256
    assert RubricReward(judge="m", guards={"max_completion_length": 64}).max_completion_length == 64


def test_slot_waits_with_a_deadline_never_leak_a_slot():
    """Every RL batch waits on the endpoint's slots with a deadline: expiry racing a hand-over stays exact."""
    import asyncio
    import random

    from rubric_reward.judges.limits import Slots

    slots = Slots(3)
    rng = random.Random(0)
    got = []

    async def one():
        if await slots.acquire(timeout=rng.choice([0.0005, 0.001, 0.002, 0.005, None])):
            got.append(1)
            await asyncio.sleep(rng.choice([0, 0.001]))
            slots.release()

    async def main():
        await asyncio.gather(*(one() for _ in range(400)))

    asyncio.run(main())
    assert slots.in_use == 0 and slots._value == slots.capacity and not slots._waiters
    assert 3 <= len(got) < 400  # some timed out, some got through


def test_bad_judge_or_rubric_fails_at_construction(tmp_path):
    from rubric_reward.rl import RubricReward

    with pytest.raises(ValueError, match="temperature"):
        RubricReward(judge={"model": "m", "temperature": 9}, rubric={"criteria": ["Ok?"]})
    with pytest.raises(ValueError, match="a judge is needed"):
        RubricReward(rubric={"criteria": ["Ok?"]})
    with pytest.raises(ValueError, match="no such file"):
        RubricReward(judge="m", rubric=str(tmp_path / "missing.yaml"))
    RubricReward(rubric={"criteria": [{"name": "c", "check": "ifeval:punctuation:no_comma"}]})  # checks need none
