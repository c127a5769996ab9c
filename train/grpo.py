"""LoRA GRPO with rubric rewards, checkpoint monitoring and a final report.

    accelerate launch train/grpo.py                                   # offline default (CPU, no keys)
    accelerate launch train/grpo.py --config configs/grpo/qwen3_4b_advancedif.yaml
    accelerate launch train/grpo.py --config X.yaml --max_steps 20 --judge_base_url http://127.0.0.1:8000/v1

Arguments are TRL's: ``TrlParser((RecipeArguments, GRPOConfig, ModelConfig))``, so every ``GRPOConfig`` and
``ModelConfig`` field (and the recipe's data / judge / monitor / report fields) works in the YAML file and on
the command line (the command line wins). Without ``--config``, ``configs/grpo/offline_default.yaml`` is used.
See docs/training.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import rubric_reward  # noqa: F401  (installed, or on PYTHONPATH)
except ImportError:  # run from a checkout without installation
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubric_reward.recipes.grpo.launch import main

if __name__ == "__main__":
    sys.exit(main())  # no --config: the recipe's DEFAULT_CONFIG (rubric_reward.recipes.grpo.arguments)
