"""The reward over HTTP: ``rubric-reward serve --config reward.yaml`` and a small client.

``ServeConfig`` (reward.yaml), ``RewardEngine`` (the shared scoring core), ``build_app`` /
``serve`` / ``ServiceThread`` (the aiohttp service) and ``RewardClient``. Imports are lazy so that
``import rubric_reward.serve`` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ServeConfig": "config", "ServerSettings": "config", "RewardEngine": "engine", "RequestError": "errors",
    "build_app": "app", "serve": "app", "ServiceThread": "app",
    "RewardClient": "client", "RewardServiceError": "client",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rubric_reward.serve' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
