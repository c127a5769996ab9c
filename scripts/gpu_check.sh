#!/usr/bin/env bash
# The prepared GPU check of the main job, for the day a GPU machine is lent (offline; torch with CUDA,
# transformers, peft and accelerate installed; trl, datasets and vllm not). It installs trl and datasets from
# the wheels carried in .whl/gpu-check/, builds randomly initialised models of Qwen3-0.6B's and Qwen3-4B's shapes
# (no weights travel) and the tiny test model, then runs GRPO steps of the recipe on CUDA in bf16 with the local
# judge on the GPU, and prints step time, generation tokens/s, judge calls/s and peak GPU memory; then one shortened
# iteration of the dpo-loop on the 0.6B-shaped model (scripted judges; within 8 min in all).
# Each stage prints one line saying why when it cannot run. Stages: scripts/gpu_check.py.
#
#   bash scripts/gpu_check.sh --download    # once, where the package registry is reachable (2.6 MiB of wheels)
#   bash scripts/gpu_check.sh               # on the GPU machine (carry .whl/gpu-check with the working tree)
#   bash scripts/gpu_check.sh --dry-run     # the same stages on the CPU at the tiny size (CI runs this)
# Options after these go to scripts/gpu_check.py (--work DIR, --budget-s S). $OUT/gpu_check.json gets the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && [ "${1:-}" = "--dry-run" ] && PY=.venv/bin/python

if [ "${1:-}" = "--download" ]; then
  mkdir -p .whl/gpu-check
  dl() { "$PY" -m pip download --disable-pip-version-check -q --no-deps -d .whl/gpu-check "$@"; }
  dl trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 fsspec==2026.9.0
  for v in 3.11 3.12; do  # the GPU machine's Python is 3.12; the dry run's may be 3.11
    dl --only-binary=:all: --python-version "$v" --implementation cp --platform manylinux2014_x86_64 \
      xxhash==4.1.0 multiprocess==0.70.19
  done
  du -sh .whl/gpu-check
  exit 0
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" scripts/gpu_check.py "$@"
