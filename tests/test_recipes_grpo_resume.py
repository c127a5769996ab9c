"""GRPO resume that survives a kill at any moment of a save (rubric_reward.recipes.grpo.checkpoints, run, monitor).

Tiny fake checkpoint folders and a fake ``monitor.jsonl``; the trainer is a stand-in that records what the recipe
asks of it (no model, no training): a half-written checkpoint is detected and skipped, a resume at ``max_steps``
does not train a step past it, and a resumed run counts steps and checkpoints looked at as an uninterrupted one.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest


def _safetensors(path: Path, *, cut: int = 0) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    blob = struct.pack("<Q", len(header)) + header + b"\0" * 8
    path.write_bytes(blob[: len(blob) - cut] if cut else blob)


def _checkpoint(out: Path, step: int, *, state: str | None = "ok", weights: str | None = "ok") -> Path:
    """``checkpoint-<step>``: complete by default; ``state``/``weights`` None (missing) or ``"torn"``."""
    folder = out / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")
    if weights is not None:
        _safetensors(folder / "adapter_model.safetensors", cut=5 if weights == "torn" else 0)
    if state is not None:
        text = json.dumps({"global_step": step, "max_steps": 4, "log_history": []})
        (folder / "trainer_state.json").write_text(text[:20] if state == "torn" else text)
    return folder


# ------------------------------------------------------------------------------------------ which checkpoint


@pytest.mark.parametrize("cut", [{"state": None}, {"state": "torn"}, {"weights": None}, {"weights": "torn"}],
                         ids=["no trainer_state", "torn trainer_state", "no weights", "torn weights"])
def test_resume_true_skips_a_half_written_checkpoint(tmp_path: Path, cut: dict) -> None:
    from rubric_reward.recipes.grpo.checkpoints import incomplete_reason, resume_checkpoint

    _checkpoint(tmp_path, 2)
    torn = _checkpoint(tmp_path, 4, **cut)
    assert incomplete_reason(tmp_path / "checkpoint-2") is None and incomplete_reason(torn) is not None
    for value in ("true", "last", "True", True):
        chosen, notes = resume_checkpoint(value, tmp_path)
        assert chosen == str(tmp_path / "checkpoint-2")
        assert any("skipped incomplete" in n and "checkpoint-4" in n for n in notes), notes
    with pytest.raises(ValueError, match="checkpoint-4 cannot be resumed.*newest complete one is .*checkpoint-2"):
        resume_checkpoint(str(torn), tmp_path)
    assert resume_checkpoint(None, tmp_path) == (None, []) and resume_checkpoint("false", tmp_path) == (None, [])


def test_resume_true_with_nothing_complete_starts_over(tmp_path: Path) -> None:
    from rubric_reward.recipes.grpo.checkpoints import resume_checkpoint

    assert resume_checkpoint("true", tmp_path / "missing") == (None, [])
    _checkpoint(tmp_path, 2, state=None)
    chosen, notes = resume_checkpoint("true", tmp_path)
    assert chosen is None and "skipped incomplete" in notes[0] and "starts from step 0" in notes[-1]


def test_check_names_an_incomplete_resume_path_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from rubric_reward.recipes.grpo import launch

    monkeypatch.setattr(launch, "run", lambda *a, **k: pytest.fail("an incomplete checkpoint reached training"))
    torn = _checkpoint(tmp_path / "run", 4, state="torn")
    assert launch.main(["--output_dir", str(tmp_path / "run"), "--resume_from_checkpoint", str(torn)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "resume_from_checkpoint" in lines[0] and "trainer_state.json" in lines[0], lines


# ------------------------------------------------------------------------------------------ the run


class _FakeTrainer:
    """Records what run() asks: train(resume_from_checkpoint=...) or a load of the checkpoint's weights."""

    made: list[_FakeTrainer] = []

    def __init__(self, **kwargs):
        self.trained, self.loaded, self.saved = [], [], []
        self.callbacks = kwargs["callbacks"]
        self.control = SimpleNamespace(should_training_stop=False)
        self.accelerator = SimpleNamespace(is_main_process=True)
        _FakeTrainer.made.append(self)

    def train(self, resume_from_checkpoint=None):
        self.trained.append(resume_from_checkpoint)

    def _load_from_checkpoint(self, checkpoint, model=None):
        self.loaded.append(checkpoint)

    def is_world_process_zero(self):
        return True

    def save_model(self, output_dir):
        self.saved.append(output_dir)


class _FakeMonitor:
    def __init__(self):
        self.began: list[int] = []
        self.ended: list[int] = []
        self.log = self.side = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.began.append(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        self.ended.append(state.global_step)


@pytest.fixture
def fake_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """run() with every heavy part stood in for; returns ``go(max_steps, resume) -> (trainer, monitor, printed)``."""
    import importlib

    import trl

    from rubric_reward.io import models
    from rubric_reward.recipes.grpo import console

    run_module = importlib.import_module("rubric_reward.recipes.grpo.run")

    monitor = _FakeMonitor()
    splits = SimpleNamespace(train=[{"prompt": "p"}], selection=[{"prompt": "s"}], report=[],
                             write_manifest=lambda path: path)
    reward = SimpleNamespace(config=SimpleNamespace(metric_prefix="rubric"), close=lambda: None)
    reward.bind = lambda training: reward
    monkeypatch.setattr(run_module, "build_splits", lambda recipe, loaded=None: splits)
    monkeypatch.setattr(run_module, "build_reward", lambda recipe: reward)
    monkeypatch.setattr(run_module, "build_monitor", lambda *a: monitor)
    monkeypatch.setattr(run_module, "build_dataset", lambda rows: rows)
    monkeypatch.setattr(trl, "GRPOTrainer", _FakeTrainer)
    monkeypatch.setattr(trl, "get_peft_config", lambda model: None)
    monkeypatch.setattr(models, "resolve_model", lambda ref: ref)
    monkeypatch.setattr(console, "use_step_log", lambda *a, **k: None)
    out = tmp_path / "run"
    out.mkdir()

    def go(max_steps: int, resume: str | None):
        _FakeTrainer.made.clear()
        recipe = SimpleNamespace(torch_threads=1, monitor=True, final_report=False, train_order="shuffle",
                                 shaping_rewards=None, per_criterion_rewards=False, side_generation="false",
                                 generation_backend="transformers", qualify=None)
        training = SimpleNamespace(output_dir=str(out), save_strategy="steps", dataloader_pin_memory=False,
                                   use_cpu=True,
                                   model_init_kwargs=None, use_vllm=False, resume_from_checkpoint=resume,
                                   max_steps=max_steps, max_completion_length=96, reward_weights=None)
        model = SimpleNamespace(dtype=None, model_name_or_path="m")
        run_module.run(recipe, training, model)
        return _FakeTrainer.made[-1], monitor, capsys.readouterr().out

    go.out = out
    return go


def test_resume_after_a_kill_mid_save_trains_from_the_last_complete_checkpoint(fake_run) -> None:
    _checkpoint(fake_run.out, 2)
    _checkpoint(fake_run.out, 4, state=None)  # killed while checkpoint-4 was being written
    trainer, monitor, printed = fake_run(4, "true")
    assert trainer.trained == [str(fake_run.out / "checkpoint-2")] and not trainer.loaded
    assert "skipped incomplete" in printed and "checkpoint-4" in printed


def test_resume_at_max_steps_trains_nothing_more(fake_run) -> None:
    """'step 5/4': resuming from the last save of a finished run must not train (or save, or monitor) step 5."""
    _checkpoint(fake_run.out, 2)
    last = _checkpoint(fake_run.out, 4)
    trainer, monitor, printed = fake_run(4, "true")
    assert trainer.trained == [] and trainer.loaded == [str(last)]  # the final weights are checkpoint-4's
    assert monitor.began == monitor.ended == [4]  # the monitor catches up (a checkpoint saved, not scored, is now)
    assert "nothing left to train" in printed and trainer.saved == [str(fake_run.out)]
    trainer, _, _ = fake_run(6, "true")  # a longer run continues from it as before
    assert trainer.trained == [str(last)] and not trainer.loaded
    trainer, _, _ = fake_run(4, None)  # no resume: trains from the start
    assert trainer.trained == [None]


# ------------------------------------------------------------------------------------------ the monitor


def _monitor(out: Path, rows=({"prompt": "p", "rubric": "r"},)):
    from rubric_reward.recipes.grpo.monitor import CheckpointMonitor

    reward = SimpleNamespace(config=SimpleNamespace(reward="score"))
    return CheckpointMonitor(list(rows), reward=reward, model="m", output_dir=out, n_resamples=10)


def test_monitor_never_scores_a_half_written_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monitor = _monitor(tmp_path)
    scored = []
    monkeypatch.setattr(monitor, "evaluate", lambda step, folder, state=None: scored.append(step))
    (tmp_path / "monitor.jsonl").write_text(json.dumps({"step": 0, "mean": 0.5}) + "\n")
    _checkpoint(tmp_path, 2)
    _checkpoint(tmp_path, 3, weights="torn")  # a leftover cut off mid-save
    _checkpoint(tmp_path, 4)
    state = SimpleNamespace(is_world_process_zero=True, global_step=4)
    monitor.on_train_begin(SimpleNamespace(output_dir=str(tmp_path)), state, None)
    assert scored == [2, 4]


def test_a_torn_monitor_line_does_not_swallow_the_next_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill while monitor.jsonl was written leaves a torn last line; the next record must still count."""
    from rubric_reward.evaluation import rollouts
    from rubric_reward.recipes.grpo.monitor import checkpoints_looked_at, read_records

    monitor = _monitor(tmp_path)
    monkeypatch.setattr(rollouts, "generate_responses", lambda prompts, **kw: ["an answer" for _ in prompts])
    monkeypatch.setattr(monitor, "_token_lengths", lambda texts: [len(t.split()) for t in texts])
    result = SimpleNamespace(score=1.0, cost=0.0, judge_calls=1, verdicts=(), error=None)
    monitor.reward.score_batch = lambda prompts, completions, **columns: [
        SimpleNamespace(result=result, guard=None, reward=1.0, error=None) for _ in completions]
    lines = [{"step": 0, "mean": 0.5}, {"step": 2, "mean": 0.6}]
    (tmp_path / "monitor.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"step": 4, "me')
    _checkpoint(tmp_path, 4)
    monitor.evaluate(4, tmp_path / "checkpoint-4")
    records = read_records(tmp_path / "monitor.jsonl")
    assert [r["step"] for r in records] == [0, 2, 4] and checkpoints_looked_at(records) == 2


def test_checkpoints_looked_at_counts_distinct_steps() -> None:
    """Rows a resumed run wrote again for a step count once; the base model (step 0) is not a checkpoint."""
    from rubric_reward.recipes.grpo.monitor import checkpoints_looked_at

    rows = [{"step": 0}, {"step": 2}, {"step": 4}, {"step": 0}, {"step": 4}]
    assert checkpoints_looked_at(rows) == 2 and checkpoints_looked_at([]) == 0


def test_best_passes_over_a_flagged_checkpoint_and_says_so(tmp_path: Path) -> None:
    """best/ keeps the unflagged checkpoint when a later, higher one is flagged, and best.json names the latter."""
    monitor = _monitor(tmp_path)
    for step in (10, 20):
        (_checkpoint(tmp_path, step) / "adapter_config.json").write_text(json.dumps({"step": step}))
    flagged = ["repetition: 12% of completions repeat themselves (base 5%)"]
    records = [{"step": 0, "mean": 0.59}, {"step": 10, "mean": 0.64, "checkpoint": str(tmp_path / "checkpoint-10"),
                                           "watch": []}]
    monitor._refresh_best(records)
    assert json.loads((tmp_path / "best" / "best.json").read_text())["passed_over"] == []
    records.append({"step": 20, "mean": 0.69, "checkpoint": str(tmp_path / "checkpoint-20"), "watch": flagged})
    monitor._refresh_best(records)
    best = json.loads((tmp_path / "best" / "best.json").read_text())
    assert best["step"] == 10 and best["passed_over"] == [20]
    assert (tmp_path / "best" / "adapter_config.json").read_bytes() == \
        (tmp_path / "checkpoint-10" / "adapter_config.json").read_bytes()
