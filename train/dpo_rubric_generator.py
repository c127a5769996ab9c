"""DPO with LoRA for a rubric generator, on preference pairs built by the meta-judge.

    accelerate launch train/dpo_rubric_generator.py --config configs/dpo/qwen3_14b_paper.yaml \
        --model_name_or_path Qwen/Qwen3-14B --dataset_path runs/x/iter_1/pairs --output_dir runs/x/iter_1/adapter

TRL's conventions: ``--config`` YAML sets the defaults of (RubricDPOArguments, DPOConfig, ModelConfig),
command-line flags override it; the YAML's ``loop:`` section belongs to ``rubric-reward dpo-loop``.
Everything is built in ``rubric_reward.recipes.generator_dpo.dpo``.
"""

import sys

from rubric_reward.recipes.generator_dpo.dpo import main

if __name__ == "__main__":
    sys.exit(main())
