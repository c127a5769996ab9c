"""The GRPO recipe's arguments checked before anything heavy loads: every mistake is one line.

:func:`check_arguments` reads what TRL's ``TrlParser`` will read (the ``--config`` YAML file, then
``--key value`` / ``--key=value`` / ``--flag`` on the command line, which wins) without importing torch,
transformers or TRL's trainer config, and finds

* a config file that is missing, not UTF-8, not YAML or not a mapping;
* keys no dataclass of the parser has (with the closest one), and values of the wrong simple type;
* values out of range: every field of :func:`setting_rules` (TRL's and transformers' training fields, the LoRA
  fields, the recipe's own: ``beta`` >= 0, ``learning_rate`` > 0 and finite, ``confidence`` in (0, 1), URLs, ...),
  which TrlParser would take and the trainer, PEFT or the monitor would fail on (or, for ``beta``, train with);
* what the recipe's own parts reject when built: ``RecipeArguments``, the reward (``RewardConfig``, its judges
  and their URLs, a fixed rubric file), the judge gate's ``qualify:`` section, the data (loader options, the file,
  its rows and columns, the split sizes) and a
  local policy path that does not exist, and a ``resume_from_checkpoint`` path cut off mid-save.

Each raises :class:`ConfigError`, whose message names where the value came from (the file, or the command
line), the key and the field. TrlParser parses afterwards as before (it owns the types and cross-field rules
of ``GRPOConfig``); :func:`parser_errors` turns its errors into ConfigErrors too.

The names and annotations of ``GRPOConfig``'s fields are read from TRL's and transformers' source files with
:mod:`ast` (importing ``transformers.TrainingArguments`` costs seconds to a minute on a busy machine); when
those files cannot be read, unknown keys are left to TrlParser.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import functools
import importlib.util
import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CheckedConfig", "ConfigError", "check_arguments", "one_line_parser", "parser_errors", "parser_fields",
           "setting_rules"]

COMMAND_LINE = "command line"
# GRPOConfig and the classes it extends, as (package, file in the package, class); subclasses first.
_GRPO_CONFIG_SOURCES = (("trl", "trainer/grpo_config.py", "GRPOConfig"),
                        ("trl", "trainer/base_config.py", "_BaseConfig"),
                        ("transformers", "training_args.py", "TrainingArguments"))
_TRL_KEYS = frozenset({"env"})  # TrlParser's own: environment variables set from the config file
_SIMPLE = {"int": int, "float": float, "bool": bool, "str": str}


class ConfigError(ValueError):
    """A recipe argument is wrong; the message is one line naming the file or command line, key and field."""


@dataclass(frozen=True)
class CheckedConfig:
    """What the check read: the merged settings, where each came from, and the data splits it loaded
    (None when the data comes from the hub, which the check does not download)."""

    config: Path
    settings: Mapping[str, Any]
    where: Mapping[str, str]
    splits: Any = None


# ------------------------------------------------------------------------------------------ reading


def config_path(argv: Sequence[str]) -> Path:
    """The path after ``--config`` (the recipe always passes one: the default when the user gives none)."""
    i = list(argv).index("--config")
    if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
        raise ConfigError(f"{COMMAND_LINE}: --config needs the path of a YAML file")
    return Path(argv[i + 1])


def read_config(path: Path) -> dict[str, Any]:
    """The config file's settings; a missing, unreadable, malformed or non-mapping file is a ConfigError."""
    from ...io.files import FileError, read_structured

    try:
        obj = read_structured(path, "config file")
    except FileError as exc:
        raise ConfigError(str(exc)) from None
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise ConfigError(f"{path}: expected a mapping of settings (key: value), got a {type(obj).__name__}")
    bad = [k for k in obj if not isinstance(k, str)]
    if bad:
        raise ConfigError(f"{path}: key {bad[0]!r} is not a name")
    return dict(obj)


def command_line(argv: Sequence[str]) -> dict[str, list[str]]:
    """``--key value...`` / ``--key=value`` / ``--flag`` groups of the command line (``--config`` left out)."""
    out: dict[str, list[str]] = {}
    key: str | None = None
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--config":
            i += 2
            key = None
            continue
        if token.startswith("--") and len(token) > 2:
            name, eq, value = token[2:].partition("=")
            key = name
            out[key] = [value] if eq else []
        elif key is None:
            raise ConfigError(f"{COMMAND_LINE}: unexpected argument {token!r} (settings are --key value)")
        else:
            out[key].append(token)
        i += 1
    return out


# ------------------------------------------------------------------------------------------ the parser's fields


@functools.cache
def parser_fields() -> dict[str, str] | None:
    """Field name -> annotation text of ``RecipeArguments``, ``GRPOConfig`` and ``ModelConfig`` (what
    ``TrlParser((RecipeArguments, GRPOConfig, ModelConfig))`` accepts); None when GRPOConfig's source is
    not readable."""
    from trl.trainer.model_config import ModelConfig  # a plain dataclass module: cheap

    from .arguments import RecipeArguments

    found: dict[str, str] = {}
    for package, relative, name in reversed(_GRPO_CONFIG_SOURCES):  # base classes first, subclasses override
        fields = _source_fields(package, relative, name)
        if fields is None:
            return None
        found.update(fields)
    for cls in (ModelConfig, RecipeArguments):
        hints = typing.get_type_hints(cls)
        found.update({f.name: _type_text(hints[f.name]) for f in dataclasses.fields(cls) if f.init})
    return found


def _source_fields(package: str, relative: str, class_name: str) -> dict[str, str] | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {item.target.id: ast.unparse(item.annotation) for item in node.body
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                    and not _init_false(item.value)}
    return None


def _init_false(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Call) and any(
        k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False for k in value.keywords)


def _type_text(tp: Any) -> str:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):  # a union's members; list[str] stays whole
        return " | ".join(_type_text(a) for a in typing.get_args(tp))
    if typing.get_args(tp):
        return str(tp)
    return "None" if tp is type(None) else getattr(tp, "__name__", str(tp))


def simple_type(annotation: str) -> tuple[type, bool] | None:
    """``(int | float | bool | str, optional)`` for annotations such as ``int``, ``float | None`` or
    ``Optional[bool]``; None for anything else (lists, unions with str, literals: left to TrlParser)."""
    text = re.sub(r"^(?:typing\.)?Optional\[(.*)\]$", r"\1 | None", annotation.strip())
    text = re.sub(r"^(?:typing\.)?Union\[(.*)\]$", lambda m: m.group(1).replace(",", " |"), text)
    parts = [p.strip().strip("'\"") for p in text.split("|")]
    optional = "None" in parts
    rest = [p for p in parts if p != "None"]
    if len(rest) != 1 or rest[0] not in _SIMPLE:
        return None
    return _SIMPLE[rest[0]], optional


def _string_to_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("yes", "true", "t", "y", "1"):
        return True
    if lowered in ("no", "false", "f", "n", "0"):
        return False
    raise ValueError(text)


def coerce(value: Any, annotation: str | None) -> Any:
    """``value`` as TrlParser would pass it on for a field with this annotation (strings are converted for
    simple types, as argparse does); ValueError naming the expected type when it does not fit."""
    kind = simple_type(annotation) if annotation else None
    if kind is None:
        return value
    base, optional = kind
    if value is None or (isinstance(value, str) and optional and value in ("None", "null")):
        if optional:
            return None
        raise ValueError(f"expected {base.__name__}, got null")
    if isinstance(value, str) and base is not str:
        try:
            return _string_to_bool(value) if base is bool else base(value)
        except ValueError:
            raise ValueError(f"expected {base.__name__}, got {value!r}") from None
    fits = {int: isinstance(value, int) and not isinstance(value, bool),
            float: isinstance(value, int | float) and not isinstance(value, bool),
            bool: isinstance(value, bool),
            str: isinstance(value, str | int | float)}[base]
    if not fits:
        raise ValueError(f"expected {base.__name__}, got {type(value).__name__} {value!r:.60}")
    return value


def _resolve_name(key: str, known: Mapping[str, str], cli: bool) -> str:
    """The field a key names: exactly, with dashes for underscores, as ``no_<bool>`` or (command line,
    as argparse allows) a unique prefix; ConfigError with the closest names otherwise."""
    name = key.replace("-", "_")
    if name in known or name in _TRL_KEYS:
        return name
    if cli and name.startswith("no_") and name[3:] in known:
        return name[3:]
    if cli:
        matches = [k for k in known if k.startswith(name)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise ConfigError(f"{COMMAND_LINE}: --{key}: ambiguous, could be --{', --'.join(sorted(matches)[:6])}")
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.7)
    hint = f" (did you mean {', '.join(('--' if cli else '') + c for c in close)}?)" if close else ""
    if not close and name in _reward_fields():
        hint = " (a reward setting: put it under reward_config)"
    what = f"--{key}: unknown argument" if cli else f"{key}: unknown key"
    raise _Unknown(what + hint)


class _Unknown(ConfigError):
    pass


def _reward_fields() -> set[str]:
    from ...rewards.config import RewardConfig

    return {f.name for f in dataclasses.fields(RewardConfig)}


# ------------------------------------------------------------------------------------------ the rules


@functools.cache
def setting_rules() -> dict[str, Any]:
    """Field -> :class:`~rubric_reward.recipes.setting_rules.Rule` for every setting of the recipe that has a range,
    choices or a form: transformers' training fields, the LoRA fields, ``GRPOConfig``'s own and the recipe's."""
    from ..setting_rules import MODEL, TRAINING, URL, number, numbers, one_of
    from .arguments import recipe_rules

    grpo = {  # GRPOConfig fields (TRL 1.16) that TRL takes without a range check
        "beta": number(ge=0),  # the KL coefficient: negative rewards drifting from the reference model
        "temperature": number(gt=0),
        "top_p": number(gt=0, le=1),
        "top_k": number(int, ge=0),
        "min_p": number(ge=0, le=1, optional=True),
        "repetition_penalty": number(gt=0),
        "num_generations": number(int, ge=2, optional=True),
        "num_generations_eval": number(int, ge=1, optional=True),
        "max_completion_length": number(int, ge=1, optional=True),
        "generation_batch_size": number(int, ge=1, optional=True),
        "steps_per_generation": number(int, ge=1, optional=True),
        "num_iterations": number(int, ge=1),
        "epsilon": number(gt=0),
        "epsilon_high": number(gt=0, optional=True),
        "delta": number(gt=0, optional=True),
        "loss_type": one_of("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
        "importance_sampling_level": one_of("token", "sequence"),
        "scale_rewards": one_of("group", "batch", "none"),
        "multi_objective_aggregation": one_of("sum_then_normalize", "normalize_then_sum"),
        "reward_weights": numbers(optional=True),
        "top_entropy_quantile": number(ge=0, le=1),
        "ref_model_mixup_alpha": number(ge=0, le=1),
        "ref_model_sync_steps": number(int, ge=1),
        "vllm_mode": one_of("server", "colocate"),
        "vllm_importance_sampling_mode": one_of("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"),
        "vllm_gpu_memory_utilization": number(gt=0, le=1),
        "vllm_tensor_parallel_size": number(int, ge=1),
        "vllm_max_model_length": number(int, ge=1, optional=True),
        "vllm_server_base_url": URL,
        "vllm_server_port": number(int, ge=1, le=65535),
        "vllm_group_port": number(int, ge=1, le=65535),
        "vllm_server_timeout": number(gt=0),
        "num_completions_to_print": number(int, ge=0, optional=True),
    }
    return {**TRAINING, **MODEL, **grpo, **recipe_rules()}


# ------------------------------------------------------------------------------------------ the check


def check_arguments(argv: Sequence[str]) -> CheckedConfig | None:
    """Check the recipe's arguments (``argv`` holds ``--config PATH``); None when ``--help`` is asked for."""
    argv = list(argv)
    if "-h" in argv or "--help" in argv:
        return None
    path = config_path(argv)
    raw = read_config(path)
    cli = command_line(argv)
    known = parser_fields()
    settings: dict[str, Any] = {}
    where: dict[str, str] = {}
    for key, value in raw.items():
        name = key if known is None else _blame_unknown(str(path), lambda k=key: _resolve_name(k, known, False))
        settings[name], where[name] = value, str(path)
    for key, values in cli.items():
        name = key if known is None else _blame_unknown(COMMAND_LINE, lambda k=key: _resolve_name(k, known, True))
        negated = key.replace("-", "_") == f"no_{name}"
        value: Any = ("false" if negated else "true") if not values else values[0] if len(values) == 1 else values
        settings[name], where[name] = value, f"{COMMAND_LINE} (--{key})"
    if known is not None:
        for name, value in list(settings.items()):
            if name in _TRL_KEYS:
                continue
            try:
                settings[name] = coerce(value, known.get(name))
            except ValueError as exc:
                raise ConfigError(f"{where[name]}: {name}: {exc}") from None
    if "env" in settings and not isinstance(settings["env"], Mapping):
        raise ConfigError(f"{where['env']}: env: expected a mapping of environment variables")
    checked = CheckedConfig(config=path, settings=settings, where=where)
    _check_rules(checked)
    recipe = _recipe(checked)
    _check_reward(recipe, checked)
    _check_qualify(recipe, checked)
    _check_shaping(recipe, checked)
    _check_model(checked)
    _check_resume(checked)
    return dataclasses.replace(checked, splits=_check_data(recipe, checked))


def _blame_unknown(where: str, resolve: Any) -> str:
    try:
        return resolve()
    except _Unknown as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _fail(checked: CheckedConfig, keys: Sequence[str], exc: BaseException) -> ConfigError:
    """A ConfigError for ``exc``, blamed on the first of ``keys`` that was set (else the config file)."""
    key = next((k for k in keys if k in checked.where), keys[0])
    where = checked.where.get(key, str(checked.config))
    message = " ".join(str(exc).split()) or type(exc).__name__
    said = message.startswith((f"{key} must", f"{key} is", f"{key}:", f"{key}."))  # the message names the key
    return ConfigError(f"{where}: {message}" if said else f"{where}: {key}: {message}")


def _check_rules(checked: CheckedConfig) -> None:
    """Every setting against :func:`setting_rules` (ranges, NaN, signs, choices, URLs, folders)."""
    from ..setting_rules import SettingError, check_settings

    try:
        check_settings(checked.settings, setting_rules())
    except SettingError as exc:
        raise ConfigError(f"{checked.where.get(exc.field, checked.config)}: {exc}") from None


def _recipe(checked: CheckedConfig) -> Any:
    from .arguments import RecipeArguments

    names = [f.name for f in dataclasses.fields(RecipeArguments)]
    values = {k: v for k, v in checked.settings.items() if k in names}
    try:
        return RecipeArguments(**values)
    except (TypeError, ValueError) as exc:
        named = [n for n in sorted(names, key=len, reverse=True) if n in str(exc)]
        raise _fail(checked, named or list(values) or ["config"], exc) from None


def _check_reward(recipe: Any, checked: CheckedConfig) -> None:
    """Build each reward the run builds (training judge, monitor judge, second judge), check its judges' URLs and
    close it."""
    from ..setting_rules import check_urls
    from .builders import build_monitor_reward, build_reward, build_second_reward, has_monitor_judge, has_second_judge

    judges = [(build_reward, ("reward_config", "judge", "judge_base_url", "rubric"))]
    if has_monitor_judge(recipe):
        judges.append((build_monitor_reward, ("monitor_judge", "monitor_judge_base_url")))
    if has_second_judge(recipe):
        judges.append((build_second_reward, ("second_judge", "second_judge_base_url")))
    for build, keys in judges:
        try:
            reward = build(recipe)
        except (TypeError, ValueError, OSError) as exc:
            raise _fail(checked, _reward_keys(str(exc), keys), exc) from None
        try:
            for judge in reward.config.judge_configs():
                check_urls(judge.base_urls or (), "base_url")
        except ValueError as exc:  # a judge mapping or file with a base_url that is no http(s) URL
            raise _fail(checked, [k for k in keys if "judge" in k and "base_url" not in k] + ["reward_config"],
                        exc) from None
        finally:
            reward.close()


def _check_qualify(recipe: Any, checked: CheckedConfig) -> None:
    """The judge gate's ``qualify:`` section: its fields, and a judge to qualify."""
    from .builders import reward_config
    from .gate import GateConfig

    try:
        gate = GateConfig.coerce(recipe.qualify)
    except (TypeError, ValueError) as exc:
        raise _fail(checked, ["qualify"], exc) from None
    if gate is not None and reward_config(recipe).judge is None:
        raise _fail(checked, ["qualify"], ValueError(
            "the reward has no judge to qualify (its rubrics are programmatic checks); remove the qualify section"))


def _check_shaping(recipe: Any, checked: CheckedConfig) -> None:
    """The shaping rewards against GRPOConfig's completion cap and reward weights where the config sets them
    (TRL's own defaults are checked when the run builds the terms)."""
    from .shaping import check_shaping

    try:
        check_shaping(recipe.shaping_rewards, reward_weights=checked.settings.get("reward_weights"),
                      max_completion_length=checked.settings.get("max_completion_length"),
                      per_criterion=recipe.per_criterion_rewards)
    except (TypeError, ValueError) as exc:
        keys = ["reward_weights"] if str(exc).startswith("reward_weights") else ["shaping_rewards"]
        raise _fail(checked, keys, exc) from None


def _reward_keys(message: str, keys: Sequence[str]) -> list[str]:
    """The keys to blame for a reward error, most likely first (a judge error on the judge, and so on)."""
    if message.startswith("RewardConfig"):
        return ["reward_config"]
    head = message.split("; known:")[0].lower()
    for word in ("judge", "rubric", "base_url"):
        if word in head:
            return [k for k in keys if word in k] + ["reward_config"]
    return list(keys)


def _check_model(checked: CheckedConfig) -> None:
    from ...io.models import DEFAULT_LOCAL_MODEL, ModelResolutionError, find_default_gguf

    ref = checked.settings.get("model_name_or_path")
    if not ref:
        raise ConfigError(f"{checked.config}: model_name_or_path: required (in the config or as "
                          "--model_name_or_path)")
    text = str(ref)
    if text.strip().lower() == DEFAULT_LOCAL_MODEL:
        try:
            find_default_gguf()
        except ModelResolutionError as exc:
            raise _fail(checked, ["model_name_or_path"], exc) from None
    elif _looks_like_path(text) and not Path(text).expanduser().exists():
        raise _fail(checked, ["model_name_or_path"], ValueError(
            f"{text}: no such folder (a local model folder, or a hub id such as Qwen/Qwen3-4B-Instruct-2507)"))


def _check_resume(checked: CheckedConfig) -> None:
    """A ``resume_from_checkpoint`` path must be a complete checkpoint (``true`` skips incomplete ones)."""
    from .checkpoints import resume_checkpoint

    output_dir = Path(str(checked.settings.get("output_dir") or "trainer_output")).expanduser()
    try:
        resume_checkpoint(checked.settings.get("resume_from_checkpoint"), output_dir)
    except ValueError as exc:
        raise _fail(checked, ["resume_from_checkpoint"], exc) from None


def _looks_like_path(text: str) -> bool:
    """A local path rather than a hub id (``name`` or ``org/name``)."""
    return text.startswith((".", "/", "~")) or text.count("/") > 1 or "\\" in text


def _check_data(recipe: Any, checked: CheckedConfig) -> Any:
    """Check ``data``'s options and, for a local source, load and split it (the run reuses the result)."""
    from ...data import PROMPT_SETS
    from . import data
    from .builders import data_format, load_splits

    options = recipe.data
    if options is not None and not isinstance(options, Mapping):
        raise _fail(checked, ["data"], ValueError(f"expected a mapping of rubric_reward.recipes.grpo.data options, got "
                                                  f"a {type(options).__name__}"))
    fmt = data_format(recipe)
    known = _data_options(fmt)
    if known is None:
        raise _fail(checked, ["data"], ValueError(f"format must be 'advancedif' or 'prompts', got {fmt!r}"))
    for key in options or {}:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=2, cutoff=0.6)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise _fail(checked, ["data"], ValueError(f"unknown option {key!r} for format {fmt!r}{hint}; known: "
                                                      f"{', '.join(sorted(known))}"))
    source = recipe.dataset_name
    local = source in PROMPT_SETS or Path(str(source)).expanduser().exists() or _looks_like_path(str(source)) \
        or str(source).endswith((".csv", ".jsonl", ".json"))
    if not local:
        return None  # a hub dataset: loaded (and its errors reported) by the run
    with _quiet():
        try:
            return load_splits(recipe)
        except (data.DataError, ValueError, TypeError, OSError) as exc:
            message = str(exc)
            keys = ["data"] if message.startswith(("split_rows", "on_bad_row", "benchmarks")) else ["dataset_name"]
            raise _fail(checked, keys, exc) from None


def _data_options(fmt: str) -> set[str] | None:
    """The ``data`` options of a format: the loader's and the splitter's keyword arguments."""
    import inspect

    from . import data

    loader = {"advancedif": data.load_advancedif, "prompts": data.load_prompt_rows}.get(fmt)
    if loader is None:
        return None
    names = {"format"}
    for fn in (loader, data.split_rows):
        params = list(inspect.signature(fn).parameters.values())[1:]  # the source / the rows come first
        names.update(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
    return names


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The run prints what it loaded; the check stays silent."""
    import io
    import sys

    saved = sys.stdout
    sys.stdout = io.StringIO()
    try:
        yield
    finally:
        sys.stdout = saved


# ------------------------------------------------------------------------------------------ TrlParser's errors


def one_line_parser(parser: Any) -> Any:
    """``parser`` (an ``argparse`` parser such as TrlParser) raising a ConfigError instead of printing its
    usage and exiting."""

    def error(message: str) -> typing.NoReturn:
        raise ConfigError(f"{COMMAND_LINE}: {message}")

    parser.error = error
    return parser


@contextlib.contextmanager
def parser_errors(config: str | Path) -> Iterator[None]:
    """Inside, TrlParser's errors (its ValueErrors, argparse's exit, dataclass checks) become ConfigErrors."""
    try:
        yield
    except ConfigError:
        raise
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
        raise ConfigError(f"{config}: the command line or config was rejected (exit {exc.code})") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{config}: {' '.join(str(exc).split())}") from None
