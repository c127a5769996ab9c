#!/usr/bin/env bash
# OpenRLHF with the rubric reward service. Start the service on the judge machine:
#   rubric-reward serve --config examples/serve/reward.yaml --host 0.0.0.0 --port 8000
# then point OpenRLHF at its OpenRLHF endpoint (the dataset's `rubric` column is the label:
# an inline rubric, a question list, or a rubric id from rubric_dir).
set -euo pipefail
REWARD_URL=${REWARD_URL:-http://127.0.0.1:8000/openrlhf}
python -m openrlhf.cli.train_ppo_ray \
  --reward.remote_url "$REWARD_URL" \
  --data.label_key rubric \
  "$@"
# OpenRLHF <= 0.10.1: --remote_rm_url "$REWARD_URL" --label_key rubric
# No service: --reward.remote_url examples/serve/openrlhf_reward_func.py with
#   RUBRIC_REWARD_CONFIG=examples/serve/reward.yaml in the environment.
