"""The GRPO job behind ``accelerate launch train/grpo.py`` (see docs/training.md).

* :mod:`.arguments`: :class:`RecipeArguments` and the one default config path;
* :mod:`.check`: the pre-flight check (every mistake one line, before anything heavy loads);
* :mod:`.launch`: parse once (``TrlParser``) and run; :mod:`.builders`: splits, dataset, reward, monitor;
* :mod:`.run`: train with TRL's ``GRPOTrainer``; :mod:`.report_stage`: generate and score base vs best on the
  held-out report split, IFEval transfer; :mod:`.side_process`: generation on the CPU training leaves idle;
* :mod:`.monitor`, :mod:`.watch`, :mod:`.hacks`: checkpoint scoring and the reward-hacking watch;
* :mod:`.summary`, :mod:`.seeds`, :mod:`.comparison`, :mod:`.plots`, :mod:`.console`: one run's summary, the
  tables over seeds, statistics, pictures, step lines;
* :mod:`.data`: AdvancedIF and prompt-set loaders and the seeded three-way split; :mod:`.vllm_sync`.
"""

from __future__ import annotations

from ...util.lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_CONFIG": "arguments", "RecipeArguments": "arguments", "with_config": "arguments",
    "ConfigError": "check", "check_arguments": "check",
    "main": "launch", "parse_args": "launch",
    "build_dataset": "builders", "build_monitor": "builders", "build_reward": "builders",
    "build_splits": "builders", "data_format": "builders", "generation_kwargs": "builders",
    "load_splits": "builders", "reward_config": "builders",
    "run": "run", "run_report_stage": "report_stage", "ifeval_transfer": "report_stage",
    "CheckpointMonitor": "monitor", "WatchConfig": "watch", "write_summary": "summary",
    "rebuild_summary": "summary",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
