"""Every code block of README.md is checked (issue 14, item 14).

* ``python`` blocks are executed, from the repository root, against the scripted loopback judge:
  ``http://127.0.0.1:8000/v1`` in a block is replaced by the loopback server's URL, whose verdicts come
  from ``examples/judge_script.yaml``.
* ``yaml`` blocks are parsed, and loaded as what they are: a rubric (``criteria`` or a list), an eval
  config (``data`` + ``judges``), or judge configs (``model`` / ``judges``).
* ``bash`` blocks are not run. Each command (continuations joined, ``&&``/``;``/``|`` split) is checked:
  ``rubric-reward SUB ...`` options must exist on that subcommand's parser; ``python SCRIPT ...`` must
  name an existing script whose parser (its ``build_parser()``, else its source) knows every option;
  ``python -m rubric_reward...`` must name an existing module; ``bash SCRIPT`` an existing script. Any
  other command is checked only for the repository paths it names (a path under one of the source
  folders must exist; a glob must match). ``[...]`` marks optional parts; they are checked too.
* A block with ``<!-- no-test -->`` on the line just above it is skipped; blocks in other languages
  (diagrams, text) are not checked.
"""

from __future__ import annotations

import argparse
import functools
import glob
import importlib.util
import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SOURCE_DIRS = {"benchmarks", "configs", "docs", "eval", "examples", "rubric_reward", "scripts", "tests", "train"}
LOOPBACK_PLACEHOLDER = "http://127.0.0.1:8000/v1"
_FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
_OPERATORS = {"&&", "||", ";", "|", "&"}


def readme_blocks(text: str) -> list[tuple[int, str, str]]:
    """``(line, language, code)`` of each fenced block not marked ``<!-- no-test -->``."""
    out = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        if before == "<!-- no-test -->":
            continue
        out.append((text.count("\n", 0, m.start()) + 1, m.group(1).lower(), m.group(2)))
    return out


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


@pytest.fixture(scope="module")
def loopback_judge():
    from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge, load_script

    verdicts, default = load_script(str(ROOT / "examples" / "judge_script.yaml"))
    with JudgeServer(ScriptedJudge(verdicts, default=default or "MET")) as server:
        yield server


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))


def _ids(lang: str) -> list:
    # blank lines first, so a traceback's line numbers are README.md's
    return [pytest.param("\n" * line + code, id=f"README.md:{line}") for line, lg, code in BLOCKS if lg == lang]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("code", _ids("python"))
def test_python_blocks_run(code, loopback_judge, monkeypatch):
    monkeypatch.chdir(ROOT)
    source = code.replace(LOOPBACK_PLACEHOLDER, loopback_judge.base_url)
    before = loopback_judge.requests
    exec(compile(source, "README.md", "exec"), {"__name__": "__readme__"})  # noqa: S102
    if loopback_judge.base_url in source:
        assert loopback_judge.requests > before  # it really asked the judge


@pytest.mark.parametrize("code", _ids("yaml"))
def test_yaml_blocks_load(code):
    check_yaml(code)


@pytest.mark.parametrize("code", _ids("bash"))
def test_bash_blocks_name_existing_files_and_options(code):
    problems = [f"{' '.join(cmd)}: {p}" for cmd in shell_commands(code) for p in check_command(cmd)]
    assert problems == []


def test_the_readme_says_what_the_project_is_before_any_command():
    text = README.read_text(encoding="utf-8")
    intro = text[: text.index("```")]
    paragraphs = [p.strip() for p in intro.split("\n\n") if p.strip() and not p.lstrip().startswith("#")]
    assert paragraphs and "rubric" in paragraphs[0].lower() and paragraphs[0].endswith(".")  # a sentence first
    assert any(lang == "python" for _, lang, _ in BLOCKS) and any(lang == "bash" for _, lang, _ in BLOCKS)


def test_a_fresh_shell_is_told_to_activate_the_environment_before_the_first_bare_command():
    """Issue 21.10: later blocks write ``rubric-reward ...`` and ``python ...`` bare."""
    text = README.read_text(encoding="utf-8")
    bash = [(line, code) for line, lang, code in BLOCKS if lang == "bash"]
    first_bare = next(line for line, code in bash[1:] if any(
        cmd[0] in ("rubric-reward", "python", "accelerate") for cmd in shell_commands(code)))
    note = text.index("source .venv/bin/activate")
    assert text.count("\n", 0, note) + 1 < first_bare and "scripts/install.sh" in text[note - 200:note]


def test_examples_say_what_to_start_and_show_failures():
    """Issue 21.11 / 21.12: the API example prints why a score is None; the eval example starts its judge."""
    text = README.read_text(encoding="utf-8")
    api = next(code for _, lang, code in BLOCKS if lang == "python")
    assert "result.error" in api
    start = next(code for _, lang, code in BLOCKS if lang == "bash" and "testing.judge_server" in code)
    assert text.index(start) < text.index(api) and "--port 8000" in start
    config = yaml.safe_load((ROOT / "configs" / "eval" / "example.yaml").read_text(encoding="utf-8"))
    port = config["judges"][0]["base_url"].split(":")[-1].split("/")[0]
    evals = next(code for _, lang, code in BLOCKS if lang == "bash" and "configs/eval/example.yaml" in code)
    judge, run = evals.index(f"scripted_judge.py --port {port}"), evals.index("rubric-reward eval")
    assert judge < run


def test_the_checker_catches_what_it_should():
    readme = ("```bash\nrubric-reward score --rubric R.yaml --no-such-flag\n```\n\n"
              "<!-- no-test -->\n```python\nboom\n```\n")
    [(line, lang, code)] = readme_blocks(readme)
    assert (line, lang) == (1, "bash")
    assert check_command(shell_commands(code)[0]) == ["unknown option --no-such-flag"]
    assert check_command(["python", "train/no_such_script.py"]) == ["no such script 'train/no_such_script.py'"]
    assert check_command(["python", "eval/ifeval.py", "--responses", "x", "--nope"]) == ["unknown option --nope"]
    assert check_command(["bash", "scripts/install.sh"]) == []
    assert check_command(["vllm", "serve", "examples/none.yaml"]) == ["no such path 'examples/none.yaml'"]
    assert shell_commands("a x \\\n  --y && b # c\n") == [["a", "x", "--y"], ["b"]]
    with pytest.raises(Exception):
        check_yaml("criteria:\n  - name: x\n")
