"""The ``train/grpo.py`` entry point: check the arguments, parse them with TrlParser, run the recipe.

Kept apart from :mod:`~rubric_reward.recipes.grpo` (which builds and runs) so that the check, which builds
the recipe's parts to validate them, and the recipe never import each other.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...io.rows import DataError
from .arguments import RecipeArguments, with_config
from .ranks import is_main_process
from .run import run
from .check import ConfigError, check_arguments, config_path, one_line_parser, parser_errors

__all__ = ["main", "parse_args"]


def parse_args(argv: Sequence[str] | None = None, *, default_config: str | Path | None = None
               ) -> tuple[RecipeArguments, Any, Any]:
    """``(recipe, GRPOConfig, ModelConfig)`` from ``--config YAML`` and flags; ``default_config`` (else the
    offline default) when no ``--config`` is given. Errors are :class:`~rubric_reward.recipes.grpo.check.ConfigError`."""
    return _parse(with_config(argv, default_config))


def _parse(argv: list[str]) -> tuple[RecipeArguments, Any, Any]:
    """TrlParser, once, on ``argv`` that already names its ``--config`` (:func:`with_config` ran)."""
    with parser_errors(config_path(argv)):
        from trl import GRPOConfig, ModelConfig, TrlParser

        parser = one_line_parser(TrlParser((RecipeArguments, GRPOConfig, ModelConfig)))
        recipe, training, model = parser.parse_args_and_config(argv)
    if not model.model_name_or_path:
        raise ConfigError("model_name_or_path is required (in the config or as --model_name_or_path)")
    return recipe, training, model


def main(argv: Sequence[str] | None = None, *, default_config: str | Path | None = None) -> int:
    """Entry point of ``train/grpo.py``: name the config once (``--config``, else ``default_config``, else the
    recipe's :data:`~.arguments.DEFAULT_CONFIG`), check the arguments (one line and exit 2 on a mistake, before
    anything heavy loads), parse them with TrlParser once, run."""
    from ...util.threads import prepare_environment

    prepare_environment()  # before torch loads
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    argv = with_config(argv, default_config)
    try:
        checked = check_arguments(argv)
        from .console import quiet_libraries  # transformers loads from here on

        quiet_libraries()
        recipe, training, model = _parse(argv)
        run(recipe, training, model, splits=checked.splits if checked else None)
    except (ConfigError, DataError) as exc:
        if is_main_process():
            print(f"{Path(sys.argv[0]).name or 'grpo'}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0
