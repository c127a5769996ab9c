#!/usr/bin/env bash
# One prepared check of the GPU paths: start `vllm serve` with a small model, score a batch through the
# fast path and through the in-process vLLM judge (both verdict modes), and print calls/s, tokens/s and
# the prefix-cache hit rate.
#
# Usage: bash scripts/gpu_check.sh [MODEL] [ITEMS]
#   MODEL  hub id or local folder (default Qwen/Qwen2.5-0.5B-Instruct; must be reachable or cached)
#   ITEMS  responses to score, each against a 10-criterion rubric (default 64)
# Needs: an NVIDIA GPU, and vLLM in the Python on PATH (pip install 'rubric-reward[vllm]').
# Writes gpu_check.json next to where it runs (or into $OUT when set).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-Qwen/Qwen2.5-0.5B-Instruct}"
ITEMS="${2:-64}"
PY="${PYTHON:-python3}"
OUT_DIR="${OUT:-.}"

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || { echo "no NVIDIA GPU visible" >&2; exit 1; }
"$PY" -c "import vllm, sys; print('vllm', vllm.__version__, 'python', sys.version.split()[0])" || {
  echo "vLLM is not importable by $PY: pip install 'rubric-reward[vllm]'" >&2; exit 1; }
"$PY" -c "import rubric_reward" 2>/dev/null || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

export VLLM_NO_USAGE_STATS=1
"$PY" benchmarks/vllm_judges.py --model "$MODEL" --items "$ITEMS" --criteria 10 --device gpu \
  --json "$OUT_DIR/gpu_check.json"
