"""Every code block of README.md and docs/*.md either runs as written or says why not (issue 33.3).

* ``bash`` blocks are **run** (slow test): each in a fresh ``bash`` (``set -euo pipefail``) from a scratch copy
  of the repository, with this environment's ``bin/`` first on ``PATH`` (what ``source .venv/bin/activate``
  gives) and this checkout first on ``PYTHONPATH``. Whatever a block leaves running (a server whose ``kill`` a
  failure skipped) is stopped with its process group. Every block uses ports no other block uses, and they must
  be free before it starts.
* Without running anything, each command of a runnable bash block is also checked: ``rubric-reward SUB ...``
  options must exist on that subcommand's parser; ``python SCRIPT ...`` must name an existing script whose parser
  (its ``build_parser()``, else its source) knows every option; ``python -m rubric_reward...`` an existing
  module; ``bash SCRIPT`` an existing script; any other command only for the repository paths it names.
  Optional-argument synopses (``[--flag ...]``) belong in ``text`` blocks, never in runnable ones.
* ``python`` blocks of README.md are executed (they start the scripted judge themselves); ``yaml`` blocks of
  README.md and docs/*.md are loaded as what they are (a rubric, an eval config, judge configs).
* A block with ``<!-- no-test: REASON -->`` on the line just above it is skipped, and the reason is required.
"""

from __future__ import annotations

import argparse
import functools
import glob
import importlib.util
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
SOURCE_DIRS = {"benchmarks", "configs", "docs", "eval", "examples", "rubric_reward", "scripts", "tests", "train"}
_FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
_NO_TEST = re.compile(r"^<!-- no-test(?::\s*(.*?))?\s*-->$")
_OPERATORS = {"&&", "||", ";", "|", "&"}


def doc_blocks(text: str, *, skipped: bool = False) -> list[tuple[int, str, str]]:
    """``(line, language, code)`` of each fenced block not marked no-test (``skipped``: only the marked ones,
    with the reason in place of the language)."""
    out = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = _NO_TEST.match(before)
        line = text.count("\n", 0, m.start()) + 1
        if skipped and marker:
            out.append((line, (marker.group(1) or "").strip(), m.group(2)))
        elif not skipped and not marker:
            out.append((line, m.group(1).lower(), m.group(2)))
    return out


def _blocks(lang: str, docs=DOCS) -> list:
    return [pytest.param(code, id=f"{path.relative_to(ROOT)}:{line}") for path in docs
            for line, lg, code in doc_blocks(path.read_text(encoding="utf-8")) if lg == lang]


# ---------------------------------------------------------------------------- bash
def shell_commands(code: str) -> list[list[str]]:
    """The simple commands of a shell block, as token lists (comments dropped, brackets kept)."""
    joined = re.sub(r"\\\n", " ", code)
    commands: list[list[str]] = []
    for line in joined.splitlines():
        tokens = shlex.split(line, comments=True)
        current: list[str] = []
        for tok in tokens:
            if tok in _OPERATORS:
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(tok)
        if current:
            commands.append(current)
    return commands


def _unbracket(tokens: list[str]) -> list[str]:
    return [t.strip("[]") for t in tokens if t.strip("[]")]


def _check_paths(tokens: list[str]) -> list[str]:
    problems = []
    for tok in tokens:
        if tok.startswith("-") or "/" not in tok or "://" in tok:
            continue
        value = tok.split("=", 1)[-1]
        if value.split("/", 1)[0] not in SOURCE_DIRS:
            continue
        if not glob.glob(str(ROOT / value)):
            problems.append(f"no such path {value!r}")
    return problems


def _check_options(tokens: list[str], known: set[str] | None, source: str | None = None) -> list[str]:
    problems = []
    for tok in tokens:
        if not tok.startswith("--"):
            continue
        name = tok.split("=", 1)[0]
        if known is not None and name not in known:
            problems.append(f"unknown option {name}")
        elif known is None and source is not None and f'"{name}"' not in source and f"'{name}'" not in source:
            problems.append(f"option {name} does not occur in the script")
    return problems


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return set(parser._option_string_actions)


@functools.cache
def _script_parser(path: Path) -> argparse.ArgumentParser | None:
    """The script's ``build_parser()``, when it has one (loading the script runs only its top level)."""
    if "def build_parser(" not in path.read_text(encoding="utf-8"):
        return None
    spec = importlib.util.spec_from_file_location(f"_readme_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        return module.build_parser()
    except Exception:  # noqa: BLE001 - a script that cannot load here (a missing extra): check its source
        return None


def check_rubric_reward(args: list[str]) -> list[str]:
    from rubric_reward.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return _check_options(args, _options(parser))
    if words[0] not in sub.choices:
        return [f"unknown subcommand {words[0]!r}"]
    return _check_options(args, _options(sub.choices[words[0]]) | _options(parser)) + _check_paths(args)


def check_command(tokens: list[str]) -> list[str]:
    """Problems with one shell command (an empty list when it is fine)."""
    tokens = _unbracket(tokens)
    while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tokens[0]):
        tokens = tokens[1:]  # environment assignments
    if not tokens:
        return []
    prog, args = tokens[0], tokens[1:]
    name = Path(prog).name
    if name == "rubric-reward":
        return check_rubric_reward(args)
    if re.fullmatch(r"python[\d.]*", name):
        if args[:1] == ["-m"]:
            module = args[1] if len(args) > 1 else ""
            if module == "rubric_reward.cli":
                return check_rubric_reward(args[2:])
            if module.split(".")[0] == "rubric_reward" and importlib.util.find_spec(module) is None:
                return [f"no module {module!r}"]
            return _check_paths(args[2:])
        if not args or args[0] == "-c":
            return []
        script = ROOT / args[0]
        if not script.is_file():
            return [f"no such script {args[0]!r}"]
        parser = _script_parser(script)
        known = None if parser is None else _options(parser)
        return _check_options(args[1:], known, script.read_text(encoding="utf-8")) + _check_paths(args[1:])
    if name in ("bash", "sh") and args:
        if not (ROOT / args[0]).is_file():
            return [f"no such script {args[0]!r}"]
        return _check_paths(args[1:])
    if "/" in prog and prog.endswith((".sh", ".py")) and prog.split("/", 1)[0] in SOURCE_DIRS:
        return [] if (ROOT / prog).is_file() else [f"no such script {prog!r}"]
    return _check_paths(args)  # an unknown command: only the repository paths it names


# ---------------------------------------------------------------------------- yaml and python
def check_yaml(code: str) -> None:
    obj = yaml.safe_load(code)
    if isinstance(obj, list) or (isinstance(obj, dict) and "criteria" in obj):
        from rubric_reward.rubric import load_rubric

        load_rubric(obj)
    elif isinstance(obj, dict) and "data" in obj and "judges" in obj:
        from rubric_reward.evaluation import EvalConfig

        EvalConfig.from_dict(obj)
    elif isinstance(obj, dict) and ("model" in obj or "judges" in obj):
        from rubric_reward.judges.config import load_judges

        load_judges(obj)


# ---------------------------------------------------------------------------- the checks
@pytest.mark.parametrize("code", _blocks("bash"))
def test_bash_blocks_name_existing_files_and_options(code):
    assert "[--" not in code, "an optional-argument synopsis: make it a text block"
    problems = [f"{' '.join(cmd)}: {p}" for cmd in shell_commands(code) for p in check_command(cmd)]
    assert problems == []


@pytest.mark.parametrize("code", _blocks("yaml"))
def test_yaml_blocks_load(code):
    check_yaml(code)


def test_every_skipped_block_says_why():
    for path in DOCS:
        for line, reason, _ in doc_blocks(path.read_text(encoding="utf-8"), skipped=True):
            assert len(reason) > 10, f"{path.relative_to(ROOT)}:{line}: <!-- no-test: REASON --> needs a reason"


def _ports(code: str) -> set[int]:
    return {int(p) for p in re.findall(r"(?:--port[ =]|127\.0\.0\.1:|localhost:)(\d{2,5})", code)}


def test_runnable_blocks_use_ports_no_other_block_uses():
    seen: dict[int, str] = {}
    for param in _blocks("bash"):
        for port in _ports(param.values[0]):
            owner = seen.setdefault(port, param.id)
            assert owner == param.id, f"port {port} is used by {owner} and {param.id}"
    # the example service config's judge port is the one the README block starts the scripted judge on
    config = yaml.safe_load((ROOT / "examples" / "serve" / "reward.yaml").read_text(encoding="utf-8"))
    judge_port = int(config["judge"]["base_url"].split(":")[-1].split("/")[0])
    serve_block = next(p.values[0] for p in _blocks("bash", [README]) if "rubric-reward serve" in p.values[0])
    assert f"--port {judge_port} " in serve_block


def test_the_readme_opens_with_what_it_is_and_the_two_commands():
    text = README.read_text(encoding="utf-8")
    intro = text[: text.index("```")]
    paragraphs = [p.strip() for p in intro.split("\n\n") if p.strip() and not p.lstrip().startswith(("#", "<!--"))]
    assert paragraphs and "rubric" in paragraphs[0].lower() and paragraphs[0].endswith(".")
    first = _FENCE.search(text).group(2).splitlines()
    assert first[:2] == ["bash scripts/install.sh && .venv/bin/accelerate launch train/grpo.py", "bash scripts/test.sh"]
    assert len(text.splitlines()) <= 120  # a README read in five minutes; reference material lives in docs/
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).is_file() or link in ("docs/scaling.md", "docs/security.md"), link


def test_a_fresh_shell_is_told_to_activate_the_environment_before_the_first_bare_command():
    text = README.read_text(encoding="utf-8")
    first_bare = min(line for line, lang, code in doc_blocks(text) if lang == "bash" and any(
        cmd[0] in ("rubric-reward", "python", "accelerate") for cmd in shell_commands(code)))
    note = text.index("source .venv/bin/activate")
    assert text.count("\n", 0, note) + 1 < first_bare


def test_the_checker_catches_what_it_should():
    readme = ("```bash\nrubric-reward score --rubric R.yaml --no-such-flag\n```\n\n"
              "<!-- no-test: needs a GPU -->\n```python\nboom\n```\n")
    [(line, lang, code)] = doc_blocks(readme)
    assert (line, lang) == (1, "bash")
    assert doc_blocks(readme, skipped=True)[0][1] == "needs a GPU"
    assert check_command(shell_commands(code)[0]) == ["unknown option --no-such-flag"]
    assert check_command(["python", "train/no_such_script.py"]) == ["no such script 'train/no_such_script.py'"]
    assert check_command(["python", "eval/ifeval.py", "--responses", "x", "--nope"]) == ["unknown option --nope"]
    assert check_command(["bash", "scripts/install.sh"]) == []
    assert check_command(["vllm", "serve", "examples/none.yaml"]) == ["no such path 'examples/none.yaml'"]
    assert shell_commands("a x \\\n  --y && b # c\n") == [["a", "x", "--y"], ["b"]]
    assert _ports("x --port 8011 & curl http://127.0.0.1:8002/health") == {8011, 8002}
    with pytest.raises(Exception):
        check_yaml("criteria:\n  - name: x\n")


# ---------------------------------------------------------------------------- running them
@pytest.mark.timeout(120)
@pytest.mark.parametrize("code", _blocks("python", [README]))
def test_readme_python_blocks_run(code, monkeypatch):
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})  # noqa: S102


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A copy of the repository's files (no .git, virtual environments or runs) to run the blocks in."""
    dest = tmp_path_factory.mktemp("docs-blocks") / "repo"
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".git", ".venv*", "runs", "__pycache__", "*.egg-info",
                                                              ".pytest_cache"))
    return dest


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("code", _blocks("bash"))
def test_bash_blocks_run_as_written(code, scratch):
    busy = [p for p in _ports(code) if not _port_free(p)]
    assert not busy, f"ports in use before the block starts: {busy}"
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(ROOT)
    proc = subprocess.Popen(["bash", "-c", "set -euo pipefail\n" + code], cwd=scratch, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=840)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything the block left running
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, out[-4000:]
