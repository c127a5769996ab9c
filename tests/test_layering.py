"""The house: rooms, one-way imports, no circles, short functions, and a docstring on every room's door.

Read from the source (``ast``), so every import counts, also the ones inside functions.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "rubric_reward"
# the rooms that consume the core; the core (vocabulary, grading, guards, judges, checks, stats, util, io,
# testing) never imports them
CONSUMERS = ("rewards", "rl", "serve", "integrations", "recipes", "cli", "evaluation", "generation")
MAX_TOP_LEVEL = 8
MAX_FUNCTION_LINES = 100


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in ROOT.rglob("*.py")}
TREES = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}


def _imports(name: str) -> set[str]:
    """The package's modules ``name`` imports, anywhere in its source."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                out.add(candidate if candidate in MODULES else target)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in MODULES and m != name}


EDGES = {name: _imports(name) for name in MODULES}


def _room(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_at_most_eight_modules_at_the_top() -> None:
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_the_core_never_imports_its_consumers() -> None:
    upward = sorted((a, b) for a, targets in EDGES.items() for b in targets
                    if _room(a) not in CONSUMERS and _room(b) in CONSUMERS)
    assert upward == []


def test_no_import_circles() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in EDGES[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in EDGES:
        if v not in index:
            visit(v)
    assert circles == []


def test_no_function_over_a_hundred_lines() -> None:
    long = sorted((node.end_lineno - node.lineno + 1, name, node.name)
                  for name, tree in TREES.items() for node in ast.walk(tree)
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES)
    assert long == []


@pytest.mark.parametrize("package", sorted(n for n, p in MODULES.items() if p.name == "__init__.py"))
def test_every_room_says_what_it_is_for(package: str) -> None:
    doc = ast.get_docstring(TREES[package])
    assert doc and len(doc) > 40, f"{package}/__init__.py needs a docstring: what the room is for"


@pytest.mark.parametrize("room", ["grading", "guards", "util", "io"])
def test_the_new_rooms_say_what_they_may_import(room: str) -> None:
    doc = ast.get_docstring(TREES[f"rubric_reward.{room}"]) or ""
    assert "import" in doc.lower(), f"rubric_reward/{room}/__init__.py: say what the room may import"


def test_plumbing_imports_nothing_above_it() -> None:
    for name, targets in EDGES.items():
        if _room(name) in ("util", "io"):
            above = sorted(t for t in targets if _room(t) not in ("util", "io"))
            assert above == [], name
    for name, targets in EDGES.items():
        if _room(name) == "util":
            assert all(_room(t) == "util" for t in targets), name


def test_the_public_doors_import() -> None:
    import rubric_reward

    for name in rubric_reward.__all__:
        assert getattr(rubric_reward, name) is not None
    from rubric_reward.rl import RubricReward

    assert RubricReward is not None
    for module in ("rubric_reward.integrations.openrlhf", "rubric_reward.integrations.verl", "rubric_reward.cli"):
        importlib.import_module(module)
