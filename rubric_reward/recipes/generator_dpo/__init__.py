"""The rubric-generator job: ``rubric-reward dpo-loop`` and ``rubric-reward eval-generator`` (docs/dpo-loop.md).

* :mod:`.loop_config`, :mod:`.loop`: the loop's config and its stages (preferences -> DPO -> held-out, repeated);
* :mod:`.dpo`: the DPO stage (``train/dpo_rubric_generator.py``), LoRA with TRL's ``DPOTrainer``;
* :mod:`.labelled_pairs`, :mod:`.labelled_pool`, :mod:`.heldout`, :mod:`.gaming`: labelled response pairs (and a
  larger seeded pool), the held-out evaluation (per instruction type too) and its rubric-gaming guard;
* :mod:`.spread`: the outcome meta-judge's spread on a probe, and check-only outcome scoring when it has none;
* :mod:`.evaluate_config`, :mod:`.evaluate`, :mod:`.evaluate_report`: ``eval-generator`` on human labels.

Built on the generator library, :mod:`rubric_reward.generation`.
"""

from __future__ import annotations

from ...util.lazy import lazy_exports

_EXPORTS = {
    "LoopConfig": "loop_config", "load_loop_config": "loop_config",
    "run_loop": "loop", "LoopSummary": "loop", "LoopError": "loop", "iteration_generators": "loop",
    "RubricDPOArguments": "dpo", "train": "dpo",
    "EvalGeneratorConfig": "evaluate_config", "GeneratorSpec": "evaluate_config",
    "evaluate_generators": "evaluate",
    "compare_on_heldout": "heldout", "build_labelled_pairs": "labelled_pairs", "load_labelled": "labelled_pairs",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
