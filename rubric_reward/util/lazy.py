"""Lazy package exports: public names resolved from their submodules on first use (PEP 562)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str],
                 extra: tuple[str, ...] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose name ``N`` lives in submodule ``exports[N]``;
    a resolved name is stored on the package, so the lookup runs once. ``extra``: names defined in
    the package itself, listed by ``dir()``.

    A name spelled like its own submodule (``bradley_terry`` in ``bradley_terry``) is bound at once:
    importing the submodule sets the package attribute to the module, and ``__getattr__`` is then
    never asked. Keep such submodules light. A module written with leading dots (``"..rewards.config"``) is
    relative to ``package`` as in an import statement: a name re-exported from elsewhere, with one home."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module if module.startswith(".") else f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*exports, *extra})

    for name, module in exports.items():
        if module.rsplit(".", 1)[-1] == name:
            __getattr__(name)
    return __getattr__, __dir__
