"""Base completions generated beside training (``rubric_reward.recipes.grpo.base_outputs``).

The child generates what the report would (same call, dtype, threads): its texts equal an in-process
generation with the tiny model; a job whose prompts or settings differ, or whose child failed, is None (the
report then generates it), and a finished job is not generated again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_reward.recipes.grpo import base_outputs

PROMPTS = [[{"role": "user", "content": f"Say something about the number {i}."}] for i in range(5)]
KWARGS = {"backend": "transformers", "base_url": None, "max_new_tokens": 6, "batch_size": 2, "merge_adapter": True,
          "dtype": "auto"}


def test_the_child_writes_what_the_report_would_generate(tmp_path: Path, tiny_model: Path) -> None:
    import torch

    from rubric_reward.rollouts import generate_responses

    jobs = {"report": (PROMPTS, KWARGS), "ifeval": (PROMPTS[:2], {**KWARGS, "max_new_tokens": 4})}
    prefetch = base_outputs.start(tmp_path, str(tiny_model), jobs, threads=1)
    assert prefetch.process is not None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        here = generate_responses(PROMPTS, model=str(tiny_model), progress=False, **KWARGS)
    finally:
        torch.set_num_threads(threads)
    assert prefetch.take("report", str(tiny_model), PROMPTS, KWARGS, 1) == here
    assert prefetch.process.returncode == 0
    # another job's settings, prompts or thread count: not this file's texts
    assert prefetch.take("report", str(tiny_model), PROMPTS, {**KWARGS, "max_new_tokens": 7}, 1) is None
    assert prefetch.take("report", str(tiny_model), PROMPTS[:4], KWARGS, 1) is None
    assert prefetch.take("report", str(tiny_model), PROMPTS, KWARGS, 2) is None
    assert len(prefetch.take("ifeval", str(tiny_model), PROMPTS[:2], jobs["ifeval"][1], 1)) == 2
    # a resumed run finds the jobs done: no child
    assert base_outputs.start(tmp_path, str(tiny_model), jobs, threads=1).process is None


def test_a_failed_child_leaves_the_report_to_generate(tmp_path: Path) -> None:
    prefetch = base_outputs.start(tmp_path, str(tmp_path / "no-such-model"), {"report": (PROMPTS, KWARGS)}, 1)
    assert prefetch.take("report", str(tmp_path / "no-such-model"), PROMPTS, KWARGS, 1) is None
    assert prefetch.process.returncode != 0
    assert (tmp_path / base_outputs.DIR / "log.txt").read_text()  # the child's error is kept


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
def test_auto_prefetches_on_an_idle_cpu_only(setting: str, kwargs: dict, want: bool) -> None:
    args = {"backend": "transformers", "on_cpu": True, "world_size": 1, "threads": 1, "cpus": 2, **kwargs}
    assert base_outputs.wanted(setting, **args) is want


def test_the_setting_is_checked_and_takes_yaml_booleans() -> None:
    from rubric_reward.recipes.grpo.arguments import RecipeArguments

    assert RecipeArguments(prefetch_base=False).prefetch_base == "false"
    with pytest.raises(ValueError, match="prefetch_base must be auto, true or false"):
        RecipeArguments(prefetch_base="sometimes")


def test_the_jobs_are_the_reports_own_prompts() -> None:
    from types import SimpleNamespace

    from rubric_reward.recipes.grpo.arguments import RecipeArguments
    from rubric_reward.recipes.grpo.builders import generation_kwargs
    from rubric_reward.recipes.grpo.final_report import base_jobs, ifeval_rows

    recipe = RecipeArguments(ifeval_limit=7, ifeval_max_new_tokens=33)
    splits = SimpleNamespace(report=[{"prompt": p} for p in PROMPTS])
    jobs = base_jobs(recipe, "m", splits)
    assert jobs["report"] == (PROMPTS, generation_kwargs(recipe))
    assert jobs["ifeval"][0] == [r.prompt for r in ifeval_rows(recipe, recipe.ifeval_seed)]
    assert len(jobs["ifeval"][0]) == 7 and jobs["ifeval"][1]["max_new_tokens"] == 33
    assert set(base_jobs(RecipeArguments(ifeval=False), "m", splits)) == {"report"}
    json.dumps(jobs)  # the spec the child reads
