"""What a call cost: prices per token from the judge config, else from litellm's bundled cost map.

The cost map is read as JSON from litellm's package folder without importing litellm (the import
takes seconds). Models behind a loopback base URL are self-hosted and cost nothing unless priced.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from typing import Any
from urllib.parse import urlsplit

from ..results import Usage

__all__ = ["Pricing", "cost_map_price"]

_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


@functools.cache
def _cost_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = os.path.join(spec.submodule_search_locations[0], "model_prices_and_context_window_backup.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def cost_map_price(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token from litellm's map, trying the name with and without a prefix."""
    table = _cost_map()
    for name in (model, model.split("/", 1)[-1]):
        entry = table.get(name)
        if entry and "input_cost_per_token" in entry:
            return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)
    return None


class Pricing:
    """Turns usage into cost for one judge; explicit config prices win over the cost map."""

    def __init__(self, config: Any, use_cost_map: bool = True):
        self._price: tuple[float, float] | None = None
        self._config = config
        if config.input_cost_per_token is not None or config.output_cost_per_token is not None:
            self._price = (config.input_cost_per_token or 0.0, config.output_cost_per_token or 0.0)
        self._lookup = self._price is None and use_cost_map and not all(
            (urlsplit(u).hostname or "") in _LOCAL_HOSTS for u in config.base_urls or ("x://remote",)
        )

    @property
    def explicit(self) -> bool:
        return self._price is not None

    def cost(self, usage: Usage) -> float:
        if self._lookup:  # first priced call: consult the map once
            self._lookup = False
            self._price = cost_map_price(self._config.model)
        if self._price is None:
            return 0.0
        return usage.prompt_tokens * self._price[0] + usage.completion_tokens * self._price[1]
