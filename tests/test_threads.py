"""CPU threads chosen deliberately (rubric_reward.threads) and used by the GRPO recipe."""

from __future__ import annotations

import os

import pytest


def test_environment_defaults_do_not_override(monkeypatch: pytest.MonkeyPatch) -> None:
    from rubric_reward.threads import prepare_environment

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    prepare_environment()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE" and os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_torch_threads_share_the_cpus_among_local_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from rubric_reward.threads import available_cpus, set_torch_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        assert set_torch_threads() == max(1, available_cpus() // 2) == torch.get_num_threads()
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert set_torch_threads() == 3
        assert set_torch_threads(1) == 1 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_monitor_and_report_generate_with_merged_adapters() -> None:
    """A LoRA adapter merged into the weights costs nothing per generated token (docs/performance.md)."""
    from rubric_reward.recipes.grpo import RecipeArguments, generation_kwargs

    assert generation_kwargs(RecipeArguments())["merge_adapter"] is True


def test_torch_threads_is_a_checked_recipe_field() -> None:
    from rubric_reward.recipes.grpo import RecipeArguments

    with pytest.raises(ValueError, match="torch_threads"):
        RecipeArguments(torch_threads=0)
