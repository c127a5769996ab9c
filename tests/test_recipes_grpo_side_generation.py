"""Completions generated beside training (``rubric_reward.recipes.grpo.side_process``).

The side process generates what the run would (same call, adapter, dtype, threads): its texts equal an
in-process generation with the tiny model and a LoRA adapter; a job whose prompts, settings, adapter weights or
threads differ, or whose generation failed, is None (the caller then generates it); a finished job is not
generated again. The monitor scores checkpoints generated there in step order and gives the records an
in-process monitor gives; generating inside a training process leaves torch's random stream untouched.
"""

from __future__ import annotations

import json
import shutil
from io import BytesIO
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from rubric_reward.recipes.grpo import side_process
from rubric_reward.recipes.grpo.side_process import SideGenerator

PROMPTS = [[{"role": "user", "content": f"Say something about the number {i}."}] for i in range(5)]
KWARGS = {"backend": "transformers", "base_url": None, "max_new_tokens": 6, "batch_size": 2, "merge_adapter": True,
          "dtype": "auto"}


@pytest.fixture(scope="module")
def adapter(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter of the tiny model with random B matrices (it changes the outputs)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    lm = AutoModelForCausalLM.from_pretrained(tiny_model)
    out = tmp_path_factory.mktemp("adapters") / "checkpoint-1"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        get_peft_model(lm, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                      init_lora_weights=False)).save_pretrained(out)
    return out


def _here(model: Path, prompts=PROMPTS, adapter: Path | None = None, **kwargs) -> list[str]:
    import torch

    from rubric_reward.evaluation.rollouts import generate_responses

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return generate_responses(prompts, model=str(model), adapter=None if adapter is None else str(adapter),
                                  progress=False, **{**KWARGS, **kwargs})
    finally:
        torch.set_num_threads(threads)


def _finished(side: SideGenerator, *names: str) -> None:
    """Wait until the child has written ``names`` (``take`` takes over a job the child has not started)."""
    import time

    while not all(side.ready(n) for n in names):
        time.sleep(0.05)


def test_the_side_process_writes_what_the_caller_would_generate(tmp_path: Path, tiny_model: Path,
                                                                 adapter: Path) -> None:
    side = SideGenerator.start(tmp_path, threads=1)
    model = str(tiny_model)
    try:
        assert side.submit("base", model, PROMPTS, KWARGS)
        assert side.submit("trained", model, PROMPTS, KWARGS, adapter)
        assert side.submit("short", model, PROMPTS[:2], {**KWARGS, "max_new_tokens": 4})
        here, trained = _here(tiny_model), _here(tiny_model, adapter=adapter)
        assert here != trained  # the adapter matters
        _finished(side, "base", "trained", "short")
        assert side.take("base", model, PROMPTS, KWARGS, threads=1)[0] == here
        texts, seconds = side.take("trained", model, PROMPTS, KWARGS, adapter, threads=1)
        assert texts == trained and seconds > 0
        # another job's settings, prompts, adapter or thread count: not this file's texts
        assert side.take("base", model, PROMPTS, {**KWARGS, "max_new_tokens": 7}, threads=1) is None
        assert side.take("base", model, PROMPTS[:4], KWARGS, threads=1) is None
        assert side.take("base", model, PROMPTS, KWARGS, adapter, threads=1) is None
        assert side.take("base", model, PROMPTS, KWARGS, threads=2) is None
        assert side.take("never-submitted", model, PROMPTS, KWARGS, threads=1) is None
        assert len(side.take("short", model, PROMPTS[:2], {**KWARGS, "max_new_tokens": 4}, threads=1)[0]) == 2
    finally:
        side.close()
    assert side.process.returncode == 0
    # new adapter weights under the same path: another job
    moved = tmp_path / "moved"
    shutil.copytree(adapter, moved)
    again = SideGenerator(tmp_path / side_process.DIR, threads=1)  # a resumed run: files, no child
    assert again.submit("trained", model, PROMPTS, KWARGS, adapter)
    assert again.take("trained", model, PROMPTS, KWARGS, adapter, threads=1)[0] == trained
    (moved / "adapter_model.safetensors").write_bytes(b"other weights")
    assert not again.submit("moved", model, PROMPTS, KWARGS, moved)  # not done, and no child to do it


def test_a_failed_job_leaves_the_caller_to_generate_and_the_queue_goes_on(tmp_path: Path, tiny_model: Path) -> None:
    side = SideGenerator.start(tmp_path, threads=1)
    missing = str(tmp_path / "no-such-model")
    try:
        side.submit("bad", missing, PROMPTS, KWARGS)
        side.submit("good", str(tiny_model), PROMPTS[:1], KWARGS)
        _finished(side, "bad", "good")
        assert side.take("bad", missing, PROMPTS, KWARGS, threads=1) is None
        assert side.take("good", str(tiny_model), PROMPTS[:1], KWARGS, threads=1)[0] == _here(tiny_model, PROMPTS[:1])
    finally:
        side.close()
    assert "bad" in (tmp_path / side_process.DIR / "log.txt").read_text()  # the error is kept
    dead = SideGenerator.start(tmp_path, threads=1)
    dead.process.kill()
    dead.process.wait()
    assert not dead.submit("late", str(tiny_model), PROMPTS, KWARGS)


def test_generating_in_a_training_process_leaves_its_random_stream(tiny_model: Path, adapter: Path) -> None:
    import torch

    torch.manual_seed(123)
    before = torch.get_rng_state()
    _here(tiny_model, adapter=adapter)  # loads a LoRA model: its initialisation draws from the generator
    assert torch.equal(torch.get_rng_state(), before)


def test_an_adapter_is_generated_with_unfrozen_weights_on_a_cpu(tiny_model: Path, adapter: Path) -> None:
    """A PEFT load freezes the weights; frozen bfloat16 weights took a CPU path that peaked 1.7 GB higher at 40
    prompts per batch (docs/performance.md), so generation unfreezes them (it runs under inference_mode)."""
    from rubric_reward.evaluation.rollouts import _load_transformers

    for merge in (True, False):
        lm, _ = _load_transformers(str(tiny_model), str(adapter), merge, "auto")
        assert all(p.requires_grad for p in lm.parameters())


class _Reward:
    """Scores a completion by its length (checks only: no judge), as ``RubricReward.score_batch`` returns."""

    config = SimpleNamespace(reward="score")

    def score_batch(self, prompts, completions, **columns):
        from rubric_reward.results import ScoreResult

        return [SimpleNamespace(result=ScoreResult(score=min(1.0, len(c) / 40), verdicts=()),
                                guard=None, reward=None, error=None) for c in completions]


def _monitor(out: Path, model: Path, side=None, watch=None):
    from rubric_reward.recipes.grpo.monitor import CheckpointMonitor

    rows = [{"prompt": p} for p in PROMPTS]
    return CheckpointMonitor(rows, reward=_Reward(), model=str(model), output_dir=out, n_resamples=20,
                             generation=KWARGS, side=side, watch=watch)


def _checkpoints(out: Path, adapter: Path, steps=(2, 4)) -> None:
    for step in steps:
        shutil.copytree(adapter, out / f"checkpoint-{step}")
        state = {"global_step": step, "max_steps": 4, "log_history": []}
        (out / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps(state))


def _same(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("seconds", "checkpoint")} for r in records]


def test_the_monitor_scores_checkpoints_generated_beside_training(tmp_path: Path, tiny_model: Path,
                                                                  adapter: Path) -> None:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        records = {}
        for name in ("here", "beside"):
            out = tmp_path / name
            out.mkdir()
            _checkpoints(out, adapter)
            side = SideGenerator.start(out, threads=1) if name == "beside" else None
            monitor = _monitor(out, tiny_model, side)
            args = SimpleNamespace(output_dir=str(out), save_total_limit=None)
            state = SimpleNamespace(is_world_process_zero=True, global_step=2)
            monitor.on_train_begin(args, state, None)  # the base model and the unscored checkpoint-2
            if side is not None:
                assert sorted(monitor._pending) == [0, 2] and monitor.records() == []
            state.global_step = 4
            monitor.on_save(args, state, SimpleNamespace(should_training_stop=False))
            monitor.on_step_end(args, state, None)
            monitor.on_train_end(args, state, None)
            assert not monitor._pending
            records[name] = monitor.records()
            if side is not None:
                side.close()
    finally:
        torch.set_num_threads(threads)
    assert [r["step"] for r in records["beside"]] == [0, 2, 4]
    assert _same(records["beside"]) == _same(records["here"])
    for step in (0, 2, 4):
        name = f"monitor/step-{step:05d}.jsonl"
        assert (tmp_path / "beside" / name).read_text() == (tmp_path / "here" / name).read_text()
    assert json.loads((tmp_path / "beside" / "best" / "best.json").read_text())["step"] in (2, 4)


def test_a_new_best_while_training_goes_on_is_announced_and_its_report_taken_ahead(tmp_path: Path, tiny_model: Path,
                                                                                   adapter: Path) -> None:
    """The monitor calls ``on_best`` for a best found while training goes on (not after it); the report takes
    that checkpoint's report completions from the side process only for the very job, else generates them."""
    import torch

    from rubric_reward.recipes.grpo.arguments import RecipeArguments
    from rubric_reward.recipes.grpo.report_stage import _generated_ahead, best_report_job

    _checkpoints(tmp_path, adapter, steps=(2,))
    checkpoint = tmp_path / "checkpoint-2"
    args = SimpleNamespace(output_dir=str(tmp_path), save_total_limit=None)
    state = SimpleNamespace(is_world_process_zero=True, global_step=2)
    announced = []
    monitor = _monitor(tmp_path, tiny_model)
    monitor.on_best = lambda step, folder: announced.append((step, folder))
    monitor.on_train_begin(args, state, None)  # scores the base model and checkpoint-2 here
    assert announced == [(2, checkpoint)]
    (tmp_path / "after").mkdir()
    after = _monitor(tmp_path / "after", tiny_model)
    after.on_best = lambda step, folder: announced.append((step, folder))
    after.on_train_end(args, state, None)
    after.evaluate(2, checkpoint, state)  # a best found once training is over: the report makes it at once
    assert announced == [(2, checkpoint)]

    recipe = RecipeArguments(eval_max_new_tokens=6, eval_batch_size=2, eval_dtype="auto")
    model, info = str(tiny_model), {"step": 2, "checkpoint": str(checkpoint)}
    side = SideGenerator.start(tmp_path / "side", threads=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert _generated_ahead(recipe, model, PROMPTS, info, side) is None  # never queued
        side.submit(best_report_job(2), model, PROMPTS, KWARGS, checkpoint)
        _finished(side, best_report_job(2))
        assert _generated_ahead(recipe, model, PROMPTS, info, side) == _here(tiny_model, adapter=adapter)
        assert _generated_ahead(recipe, model, PROMPTS[:2], info, side) is None  # other prompts
        assert _generated_ahead(recipe, model, PROMPTS, {"step": None, "checkpoint": str(tmp_path)}, side) is None
        (checkpoint / "adapter_model.safetensors").write_bytes(b"other weights")
        assert _generated_ahead(recipe, model, PROMPTS, info, side) is None  # not these weights
    finally:
        torch.set_num_threads(threads)
        side.close()


def test_the_monitor_scores_at_the_save_when_it_may_stop_training_or_rotation_may_delete(tmp_path: Path) -> None:
    from rubric_reward.recipes.grpo.monitor import CheckpointMonitor

    side = SimpleNamespace()
    reward = SimpleNamespace(config=SimpleNamespace(reward="score"))
    args = SimpleNamespace(output_dir=str(tmp_path), save_total_limit=None)
    assert CheckpointMonitor([{"prompt": "p"}], reward=reward, model="m", output_dir=tmp_path, side=side)._beside(args)
    assert not CheckpointMonitor([{"prompt": "p"}], reward=reward, model="m", output_dir=tmp_path)._beside(args)
    assert not CheckpointMonitor([{"prompt": "p"}], reward=reward, model="m", output_dir=tmp_path, side=side,
                                 watch={"stop_after": 1})._beside(args)
    rotating = SimpleNamespace(output_dir=str(tmp_path), save_total_limit=2)
    assert not CheckpointMonitor([{"prompt": "p"}], reward=reward, model="m", output_dir=tmp_path,
                                 side=side)._beside(rotating)


@pytest.mark.parametrize(("setting", "kwargs", "want"), [
    ("auto", {}, True),
    ("auto", {"cpus": 1}, False),                      # no idle CPU
    ("auto", {"threads": 2}, False),
    ("auto", {"world_size": 2}, False),                # distributed ranks
    ("auto", {"on_cpu": False}, False),                # a GPU generates fast enough
    ("auto", {"backend": "vllm"}, False),
    ("true", {"cpus": 1}, True),
    ("false", {}, False),
])
def test_auto_generates_beside_training_on_an_idle_cpu_only(setting: str, kwargs: dict, want: bool) -> None:
    args = {"backend": "transformers", "on_cpu": True, "world_size": 1, "threads": 1, "cpus": 2, **kwargs}
    assert side_process.wanted(setting, **args) is want


def test_the_setting_is_checked_and_takes_yaml_booleans() -> None:
    from rubric_reward.recipes.grpo.arguments import RecipeArguments

    assert RecipeArguments(side_generation=False).side_generation == "false"
    with pytest.raises(ValueError, match="side_generation must be one of auto, true, false"):
        RecipeArguments(side_generation="sometimes")


def test_the_jobs_are_the_reports_own_prompts() -> None:
    from rubric_reward.recipes.grpo.arguments import RecipeArguments
    from rubric_reward.recipes.grpo.builders import generation_kwargs
    from rubric_reward.recipes.grpo.report_stage import base_jobs, ifeval_rows

    recipe = RecipeArguments(ifeval_limit=7, ifeval_max_new_tokens=33)
    splits = SimpleNamespace(report=[{"prompt": p} for p in PROMPTS])
    jobs = base_jobs(recipe, "m", splits)
    assert jobs["report"] == (PROMPTS, generation_kwargs(recipe))
    assert jobs["ifeval"][0] == [r.prompt for r in ifeval_rows(recipe, recipe.ifeval_seed)]
    assert len(jobs["ifeval"][0]) == 7 and jobs["ifeval"][1]["max_new_tokens"] == 33
    assert set(base_jobs(RecipeArguments(ifeval=False), "m", splits)) == {"report"}
    json.dumps(jobs)  # the line the child reads


def test_a_monitor_record_logged_at_a_step_end_keeps_that_steps_own_log() -> None:
    from transformers.trainer_callback import CallbackHandler, TrainerCallback, TrainerControl, TrainerState

    from rubric_reward.recipes.grpo.run import _TrainerLog

    seen = []

    class Seen(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append(dict(logs))

    control = TrainerControl(should_log=True)  # the step end asked for the step's log
    trainer = SimpleNamespace(state=TrainerState(global_step=4), control=control,
                              args=SimpleNamespace(include_num_input_tokens_seen="no"),
                              callback_handler=CallbackHandler([Seen()], None, None, None, None))
    log = _TrainerLog()
    log.trainer = trainer
    log({"monitor/mean": 0.5, "monitor/step": 0.0})
    assert [{k: v for k, v in s.items() if k != "epoch"} for s in seen] == [
        {"monitor/mean": 0.5, "monitor/step": 0.0}]
    assert trainer.control.should_log  # the trainer still logs step 4's own metrics


def test_the_side_process_shares_the_best_report_in_the_batches_of_one_call(tmp_path: Path, tiny_model: Path,
                                                                            adapter: Path) -> None:
    """The report's best-checkpoint completions: the last batches beside, the rest here, the same texts."""
    import torch

    from rubric_reward.recipes.grpo.arguments import RecipeArguments
    from rubric_reward.recipes.grpo.builders import generation_kwargs
    from rubric_reward.recipes.grpo.report_stage import _generate_shared, side_batches

    assert [side_batches(240, 40, 60), side_batches(140, 40, 60), side_batches(40, 40), side_batches(8, 2)] == \
        [2, 1, 0, 2]
    # prompts of different lengths in no order, so the batching order is not the input order
    prompts = [[{"role": "user", "content": "Say" + " something about it" * (i * 3 % 7) + f" {i}."}]
               for i in range(8)]
    recipe = RecipeArguments(eval_max_new_tokens=6, eval_batch_size=2, eval_dtype="auto")
    assert generation_kwargs(recipe) == KWARGS
    model = str(tiny_model)
    one_call = _here(tiny_model, prompts, adapter)
    side = SideGenerator.start(tmp_path, threads=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        side.submit("warm", model, PROMPTS[:1], KWARGS)
        _finished(side, "warm")  # the child is up: it starts the tail before this process is through its part
        then = ("after", PROMPTS[:3], KWARGS)
        assert _generate_shared(recipe, model, prompts, str(adapter), side, "best-tail", then) == one_call
        tail = json.loads((tmp_path / side_process.DIR / "best-tail.json").read_text())["texts"]
        assert len(tail) == 2 and set(tail) <= set(one_call)  # one batch of four (three prompts queued after it)
        assert side.take("after", model, PROMPTS[:3], KWARGS, str(adapter), threads=1)[0] == \
            _here(tiny_model, PROMPTS[:3], adapter)
        # the IFEval completions, shared the same way when the report was ready ahead (their own token budget)
        assert _generate_shared(recipe, model, prompts, str(adapter), side, "ifeval-tail", max_new_tokens=4) == \
            _here(tiny_model, prompts, adapter, max_new_tokens=4)
        side.process.kill()
        side.process.wait()
        assert _generate_shared(recipe, model, prompts, str(adapter), side, "best-tail-2", then) == one_call
    finally:
        torch.set_num_threads(threads)
        side.close()


def _lines(*messages: dict) -> BytesIO:
    return BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in messages))


def test_a_job_that_yields_runs_after_the_others_and_a_cancelled_one_never_runs() -> None:
    queue = side_process._Queue()
    ahead, monitor, stale = ({"name": n, "yields": y} for n, y in (("ahead", True), ("monitor", False),
                                                                      ("stale", True)))
    queue.read(_lines(ahead, monitor, stale, {"cancel": "stale"}))
    assert queue.give_way(ahead)  # another job waits
    assert [queue.next()["name"], queue.next()["name"], queue.next()] == ["monitor", "ahead", None]
    assert not queue.give_way(ahead)
    queue.cancelled.add("ahead")
    assert queue.give_way(ahead)


def test_a_job_that_gives_way_resumes_to_the_texts_of_one_call(tmp_path: Path, tiny_model: Path,
                                                               adapter: Path) -> None:
    """Stopped after its first batch and resumed in a second call: the texts one call gives."""
    import torch

    prompts = [[{"role": "user", "content": "Say" + " something about it" * (i * 3 % 7) + f" {i}."}]
               for i in range(7)]
    one_call = _here(tiny_model, prompts, adapter)
    queue = side_process._Queue()
    answers = iter([False, True])  # the first batch, then another job arrives
    queue.give_way = lambda job: next(answers, False)
    job = {"name": "ahead", "key": "k", "dir": str(tmp_path), "model": str(tiny_model), "prompts": prompts,
           "kwargs": KWARGS, "adapter": str(adapter), "yields": True}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert not side_process._run_job(job, queue)
        assert len(job["done"]) == KWARGS["batch_size"] and not (tmp_path / "ahead.json").exists()
        assert side_process._run_job(job, queue)
    finally:
        torch.set_num_threads(threads)
    assert json.loads((tmp_path / "ahead.json").read_text())["texts"] == one_call


def test_the_side_process_runs_a_job_that_yields_and_a_finished_job_cancelled_is_not_taken(
        tmp_path: Path, tiny_model: Path, adapter: Path) -> None:
    side = SideGenerator.start(tmp_path, threads=1)
    model = str(tiny_model)
    try:
        assert side.submit("ahead", model, PROMPTS, KWARGS, adapter, yields=True)
        assert side.submit("monitor", model, PROMPTS[:2], KWARGS)
        _finished(side, "ahead", "monitor")
        assert side.take("monitor", model, PROMPTS[:2], KWARGS, threads=1)[0] == _here(tiny_model, PROMPTS[:2])
        assert side.take("ahead", model, PROMPTS, KWARGS, adapter, threads=1)[0] == \
            _here(tiny_model, adapter=adapter)
        assert side.submitted("ahe") == ["ahead"]
        side.cancel("ahead")  # done already: nothing is sent, and its texts are no longer taken
        assert side.submitted("ahe") == [] and side.take("ahead", model, PROMPTS, KWARGS, adapter, threads=1) is None
    finally:
        side.close()
    assert side.process.returncode == 0


class _Side:
    """What the report and ``on_best`` ask of a side process, recorded."""

    def __init__(self, names=()):
        self.keys, self.calls = dict.fromkeys(names, "key"), []

    def submitted(self, prefix=""):
        return [n for n in self.keys if n.startswith(prefix)]

    def cancel(self, name):
        self.keys.pop(name, None)
        self.calls.append(("cancel", name))

    def submit(self, name, *args, yields=False, **kwargs):
        self.keys[name] = "key"
        self.calls.append(("submit", name, yields))

    def take(self, name, *args, **kwargs):
        self.calls.append(("take", name))
        return None


def test_a_new_best_replaces_the_previous_bests_report_and_the_report_cancels_the_others(tmp_path: Path) -> None:
    from rubric_reward.recipes.grpo.arguments import RecipeArguments
    from rubric_reward.recipes.grpo.report_stage import _generated_ahead
    from rubric_reward.recipes.grpo.run import _report_ahead

    recipe = RecipeArguments(eval_max_new_tokens=6, eval_batch_size=2)
    splits = SimpleNamespace(report=[{"prompt": p} for p in PROMPTS])
    side = _Side(["monitor-step-00005"])
    queue = _report_ahead(recipe, SimpleNamespace(model_name_or_path="smollm2-135m-instruct"), splits, side)
    queue(5, tmp_path / "checkpoint-5")
    queue(10, tmp_path / "checkpoint-10")
    assert side.calls == [("submit", "report-step-00005", True), ("cancel", "report-step-00005"),
                          ("submit", "report-step-00010", True)]
    side.calls.clear()
    _generated_ahead(recipe, "m", PROMPTS, {"step": 15, "checkpoint": str(tmp_path)}, side)  # the best came later
    assert side.calls == [("cancel", "report-step-00010"), ("take", "report-step-00015")]
    assert side.submitted() == ["monitor-step-00005"]  # the monitor's jobs are not the report's to cancel


def test_a_job_the_child_has_not_started_is_taken_over_by_the_caller(tmp_path: Path, tiny_model: Path) -> None:
    side = SideGenerator.start(tmp_path, threads=1)
    model = str(tiny_model)
    try:
        side.submit("late", model, PROMPTS, KWARGS)
        assert side.take("late", model, PROMPTS, KWARGS, threads=1) is None  # the child is still starting up
        side.submit("after", model, PROMPTS[:1], KWARGS)
        _finished(side, "after")
    finally:
        side.close()
    folder = tmp_path / side_process.DIR
    assert "late: the caller generates it" in (folder / "log.txt").read_text()
    assert not (folder / "late.json").exists() and (folder / "after.json").exists()
    assert sorted(p.name for p in folder.glob("*.started")) == ["after.started", "late.started"]
    again = SideGenerator.start(tmp_path, threads=1)  # a resumed run's child: the earlier claims are gone
    again.close()
    assert not list(folder.glob("*.started"))
