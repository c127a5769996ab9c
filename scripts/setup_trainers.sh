#!/usr/bin/env bash
# Create side venvs with the real trainers, each with our package installed beside it the way a user would
# (`pip install rubric-reward`: the core, no `train` extra), for tests/test_real_trainers.py.
#
# Usage:   scripts/setup_trainers.sh [--verl DIR] [--openrlhf DIR] [--only verl|openrlhf]
#   --verl DIR       default: $RUBRIC_REWARD_VERL_VENV, else .venv-verl in the repository root
#   --openrlhf DIR   default: $RUBRIC_REWARD_OPENRLHF_VENV, else .venv-openrlhf in the repository root
#   --only NAME      build just one of them
# Environment:
#   PYTHON           base interpreter (default: python3.11, else python3)
#   TORCH_INDEX_URL  extra index serving torch==2.13.0+cpu (a CI runner: https://download.pytorch.org/whl/cpu);
#                    empty where pip already finds the CPU wheel (this machine: a find-links folder)
#   FORCE=1          rebuild even when a venv carries its stamp
#
# Idempotent like scripts/setup_vllm_cpu.sh: a venv is stamped with its recipe once complete; a stamped, importable
# venv only gets our editable install refreshed (both: ~50 s here, mostly the import check); a venv without the stamp
# (an interrupted or failed build) is completed by running every step again in place (pip skips what is installed:
# ~1 min each here); FORCE=1 deletes and rebuilds. Cache the venv directories in CI: a cold build took ~25 min per
# venv on this 2-core machine under load (2.3 GB verl, 1.9 GB OpenRLHF), and pip kept no HTTP cache of the
# downloads here, so a deleted venv is a cold build again.
#
# verl (.venv-verl): torch==2.13.0 (CPU build) first, then verl==0.9.1 with all its declared dependencies
#   (ray[default], tensordict, hydra-core, transformers<5.11, ...) under the constraint torch==2.13.0 (verl's core
#   requirements name no torch version; only its GPU extras pin torch 2.11 CUDA), then `pip install -e .` (core).
# OpenRLHF (.venv-openrlhf): `pip install openrlhf==0.11.2` cannot work on CPU (flash-attn 2.8.3 builds against
#   CUDA), so openrlhf --no-deps, then the dependencies its reward paths import (torch CPU, transformers==5.15.0 as
#   openrlhf pins, ray==2.55.0 as it pins, deepspeed==0.19.6 (imports on CPU), peft, einops, aiohttp, tqdm, sympy,
#   pylatexenc, packaging, torchdata), then our core.
#   vllm (CUDA) and flash-attn are not installed: the test stubs them (see tests/test_real_trainers.py).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERL_DIR="${RUBRIC_REWARD_VERL_VENV:-$REPO_ROOT/.venv-verl}"
ORL_DIR="${RUBRIC_REWARD_OPENRLHF_VENV:-$REPO_ROOT/.venv-openrlhf}"
ONLY=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --verl) VERL_DIR="$2"; shift 2 ;;
        --openrlhf) ORL_DIR="$2"; shift 2 ;;
        --only) ONLY="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
VERL_DIR="$(abs "$VERL_DIR")"; ORL_DIR="$(abs "$ORL_DIR")"

if [[ -z "${PYTHON:-}" ]]; then
    if command -v python3.11 >/dev/null 2>&1; then PYTHON=python3.11; else PYTHON=python3; fi
fi
extra_index=()
if [[ -n "${TORCH_INDEX_URL:-}" ]]; then extra_index=(--extra-index-url "$TORCH_INDEX_URL"); fi

log() { printf '[setup_trainers %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# build NAME DIR RECIPE CHECK INSTALL_FN ALLOWED_PIP_CHECK_REGEX
build() {
    local name="$1" dir="$2" recipe="$3" check="$4" install_fn="$5" allowed="$6"
    local py="$dir/bin/python" stamp="$dir/.rubric_reward_trainer_ok"
    pip_() { "$py" -m pip --disable-pip-version-check -q "$@"; }
    if [[ "${FORCE:-0}" != "1" && -x "$py" && -f "$stamp" && "$(cat "$stamp")" == "$recipe" ]] \
        && "$py" -c "$check" >/dev/null 2>&1; then
        log "$name: $dir already set up ($recipe); installing this checkout's core (and any new core dependency)"
        pip_ install "${extra_index[@]}" -c "$dir/constraints.txt" -e "$REPO_ROOT"
        return 0
    fi
    local t0=$SECONDS
    if [[ "${FORCE:-0}" == "1" || ! -x "$py" ]]; then
        rm -rf "$dir"
        log "$name: creating $dir with $PYTHON"
        "$PYTHON" -m venv "$dir"
    else
        # Incomplete (no stamp: an interrupted or failed build) or another recipe: every step runs again in
        # place; pip keeps what is already right (no download), so finishing a build costs little. FORCE=1 wipes.
        log "$name: $dir is not stamped with this recipe: running every step again"
    fi
    rm -f "$stamp"
    pip_ install -U pip
    echo "torch==2.13.0" >"$dir/constraints.txt"
    log "$name: torch==2.13.0 (CPU build)"
    pip_ install "${extra_index[@]}" "torch==2.13.0"
    "$py" -c "import torch, sys; sys.exit(f'torch {torch.__version__} is a CUDA build' if torch.version.cuda else 0)" \
        || { log "$name: got a CUDA torch; set TORCH_INDEX_URL to a CPU index"; exit 1; }
    "$install_fn" "$dir"
    # Our package the way a user installs it beside the trainer: the core, no extras. It must leave every
    # installed package's requirements satisfied (`pip check`), apart from what the trainer's recipe leaves
    # out on purpose (ALLOWED_PIP_CHECK_REGEX). Packages it moved are listed: the resolver may move incidental
    # ones (with verl 0.9.1, litellm takes importlib_metadata 10.2.0 -> 8.9.0 and python-dateutil
    # 4.0.0 -> 2.9.0.post0, which verl does not pin).
    "$py" -m pip freeze --exclude-editable >"$dir/before.txt"
    log "$name: rubric-reward core (pip install -e $REPO_ROOT)"
    pip_ install "${extra_index[@]}" -e "$REPO_ROOT"
    "$py" - "$dir/before.txt" <<'EOF'
import importlib.metadata as md, sys
before = dict(line.strip().split("==", 1) for line in open(sys.argv[1]) if "==" in line)
moved = {k: f"{v} -> {md.version(k)}" for k, v in before.items() if md.version(k) != v}
print(f"installing rubric-reward moved: {moved or 'nothing'}", file=sys.stderr)
EOF
    local problems
    problems="$("$py" -m pip check 2>&1 | grep -v -E "^No broken requirements found|$allowed" || true)"
    if [[ -n "$problems" ]]; then
        log "$name: pip check after installing rubric-reward:"; echo "$problems" >&2; exit 1
    fi
    "$py" -c "$check"
    echo "$recipe" >"$stamp"
    log "$name: done in $((SECONDS - t0)) s; size $(du -sh "$dir" | cut -f1); python: $py"
}

install_verl() {
    local dir="$1" py="$1/bin/python"
    log "verl: verl==0.9.1 with its dependencies (constraint torch==2.13.0)"
    "$py" -m pip --disable-pip-version-check -q install "${extra_index[@]}" -c "$dir/constraints.txt" "verl==0.9.1"
}

install_openrlhf() {
    local dir="$1" py="$1/bin/python"
    log "openrlhf: openrlhf==0.11.2 --no-deps, then what its reward paths import"
    "$py" -m pip --disable-pip-version-check -q install --no-deps "openrlhf==0.11.2"
    "$py" -m pip --disable-pip-version-check -q install "${extra_index[@]}" -c "$dir/constraints.txt" \
        "transformers==5.15.0" "ray==2.55.0" aiohttp tqdm sympy pylatexenc packaging peft einops torchdata
    # deepspeed ships as an sdist whose setup.py imports torch: build it against the torch already here.
    "$py" -m pip --disable-pip-version-check -q install "${extra_index[@]}" -c "$dir/constraints.txt" \
        --no-build-isolation "deepspeed==0.19.6"
}

VERL_CHECK="import verl, ray, tensordict, hydra, transformers, rubric_reward.integrations.verl"
ORL_CHECK="import openrlhf, ray, transformers, aiohttp, deepspeed, peft, rubric_reward.integrations.openrlhf, openrlhf.utils.agent"

if [[ -z "$ONLY" || "$ONLY" == verl ]]; then
    build verl "$VERL_DIR" "verl==0.9.1 torch==2.13.0 recipe-v1" "$VERL_CHECK" install_verl "^$"
    log "use it with: export RUBRIC_REWARD_VERL_PYTHON=$VERL_DIR/bin/python"
fi
if [[ -z "$ONLY" || "$ONLY" == openrlhf ]]; then
    # --no-deps leaves out OpenRLHF's CUDA-only and unused requirements: pip check lists them as not installed
    build openrlhf "$ORL_DIR" "openrlhf==0.11.2 torch==2.13.0 recipe-v2" "$ORL_CHECK" install_openrlhf \
        "^openrlhf 0\.11\.2 requires [^ ]+, which is not installed\.$"
    log "use it with: export RUBRIC_REWARD_OPENRLHF_PYTHON=$ORL_DIR/bin/python"
fi
