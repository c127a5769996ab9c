"""The reward over HTTP: ``rubric-reward serve --config reward.yaml`` and a small client.

``ServeConfig`` (reward.yaml: the core's ``RewardConfig`` plus ``serve:``), ``ServiceEngine`` (the reward
core plus the request shapes), ``build_app`` / ``serve`` /
``ServiceThread`` (the aiohttp service) and ``RewardClient`` (from the core). Imports are lazy so that
``import rubric_reward.serve`` stays light.
"""

from __future__ import annotations

from ..util.lazy import lazy_exports

_EXPORTS = {
    "ServeConfig": "config", "ServerSettings": "config", "ServiceEngine": "service",
    "RequestError": "errors",
    "build_app": "app", "serve": "app", "ServiceThread": "app",
    "RewardClient": "..rewards.client", "RewardServiceError": "..rewards.client",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
