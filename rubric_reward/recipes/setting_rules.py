"""The rules of the training settings a recipe hands to TRL, transformers and PEFT, checked before any of them loads.

TRL's argument dataclasses (``TrainingArguments``, ``GRPOConfig``, ``DPOConfig``, ``ModelConfig``) convert the
command line's strings but take a YAML value as it is, and check few ranges: ``beta: -1`` trains with a negated KL
term, ``learning_rate: .nan``, ``temperature: -1`` or ``lora_r: 0`` end in a traceback when the trainer or PEFT
first uses them, hours into a run. Each recipe keeps one table, field -> :class:`Rule`, made of the shared parts
here (:data:`TRAINING`, :data:`MODEL`) and its own trainer's and recipe's fields, and checks every setting against
it with :func:`check_settings` before a model, a tokenizer, a dataset or a judge is touched. A broken rule is one
:class:`SettingError` naming the field: ``beta must be a finite number >= 0, got -1``.

A value is read as argparse reads it (a string such as ``"1e-5"`` is converted for a number field; YAML reads
``1e-5`` without a dot as a string); an integer field takes no fraction (``1.5``, ``2.0``) and no bool; a float
field takes no NaN or infinity; null only where the field's default is null.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["FOLDER", "MODEL", "TRAINING", "URL", "Rule", "SettingError", "check_settings", "check_urls",
           "is_http_url", "number", "numbers", "one_of", "steps"]

_KINDS = {int: "an integer", float: "a finite number", str: "a string", bool: "true or false"}


class SettingError(ValueError):
    """A setting breaks its rule; ``field`` names it and the message is one line that starts with it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Rule:
    """What one field takes: a value of ``kind`` (int, float, str or bool) that passes ``test``; ``says`` is the
    whole rule in words (``"a finite number > 0"``); ``optional``: null too; ``many``: a non-empty list of such
    values; ``single``: with ``many``, one value too (TRL makes it a list)."""

    kind: type
    says: str
    test: Callable[[Any], bool] | None = None
    optional: bool = False
    many: bool = False
    single: bool = False

    def breaks(self, value: Any) -> bool:
        """Whether ``value`` breaks the rule."""
        if value is None:
            return not self.optional
        if self.many and isinstance(value, list | tuple):
            values = list(value)
        elif self.many and not self.single:
            return True
        else:
            values = [value]
        if not values:
            return True
        for one in values:
            read = _read(self.kind, one)
            if read is _BAD or (self.test is not None and not self.test(read)):
                return True
        return False


_BAD = object()


def _read(kind: type, value: Any) -> Any:
    """``value`` as a ``kind`` the way argparse converts a string (``_BAD`` when it is not one)."""
    if isinstance(value, str) and kind in (int, float):
        try:
            value = kind(value.strip())
        except ValueError:
            return _BAD
    if isinstance(value, str) and kind is bool:
        value = {"true": True, "false": False}.get(value.strip().lower(), value)
    if kind is bool:
        return value if isinstance(value, bool) else _BAD
    if isinstance(value, bool):
        return _BAD
    if kind is int:
        return value if isinstance(value, int) else _BAD
    if kind is float:
        try:
            return float(value) if isinstance(value, int | float) and math.isfinite(value) else _BAD
        except OverflowError:  # an integer past float's range
            return _BAD
    return value if isinstance(value, kind) else _BAD


def number(kind: type = float, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
           lt: float | None = None, optional: bool = False, also: tuple[Any, ...] = ()) -> Rule:
    """A number of ``kind`` in the range ``ge``/``gt``/``le``/``lt`` (or one of the values ``also``)."""
    bounds = [(">=", ge), (">", gt), ("<=", le), ("<", lt)]
    tests = {">=": lambda v, b: v >= b, ">": lambda v, b: v > b, "<=": lambda v, b: v <= b, "<": lambda v, b: v < b}
    kept = [(op, b) for op, b in bounds if b is not None]
    lo = next(((op, b) for op, b in kept if op in (">=", ">")), None)
    hi = next(((op, b) for op, b in kept if op in ("<=", "<")), None)
    if lo and hi:
        text = f"in {'[' if lo[0] == '>=' else '('}{lo[1]}, {hi[1]}{']' if hi[0] == '<=' else ')'}"
    else:
        text = " ".join(f"{op} {b}" for op, b in kept)
    says = f"{_KINDS[kind]} {text}".strip()
    if also:
        says += " or " + " or ".join(map(str, also))
    return Rule(kind, says + (" (or null)" if optional else ""),
                lambda v: v in also or all(tests[op](v, b) for op, b in kept), optional)


def one_of(*choices: str, optional: bool = False, many: bool = False) -> Rule:
    """One of ``choices`` (``many``: one or a list of them)."""
    says = "one of " + ", ".join(choices) + (" (or a list of them)" if many else "")
    return Rule(str, says + (" (or null)" if optional else ""), lambda v: v in choices, optional, many, single=many)


def numbers(*, ge: float | None = None, optional: bool = False) -> Rule:
    """A non-empty list of finite numbers (each ``>= ge`` when given)."""
    says = "a non-empty list of finite numbers" + (f" >= {ge}" if ge is not None else "") + \
        (" (or null)" if optional else "")
    return Rule(float, says, None if ge is None else (lambda v: v >= ge), optional, many=True)


def steps(*, optional: bool = False, zero: bool = False) -> Rule:
    """transformers' step counts that may be a ratio: a number in (0, 1) (a share of the training steps) or a
    whole number >= 1 (``zero``: 0 too)."""
    low = "[0, 1)" if zero else "(0, 1)"
    return Rule(float, f"a ratio in {low} or a whole number >= 1" + (" (or null)" if optional else ""),
                lambda v: (0 <= v if zero else 0 < v) and (v < 1 or float(v).is_integer()), optional)


def is_http_url(text: Any) -> bool:
    """Whether ``text`` is an ``http://`` or ``https://`` URL with a host (and, if given, a valid port)."""
    if not isinstance(text, str) or not text or any(c.isspace() for c in text):
        return False
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (raises ValueError for a port out of range or not a number)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


URL = Rule(str, "an http:// or https:// URL with a host (or null)", is_http_url, optional=True)
FOLDER = Rule(str, "a folder path, not empty (or null)", lambda v: bool(v.strip()), optional=True)
_SEED = number(int, ge=0, le=2**32 - 1)

#: ``transformers.TrainingArguments`` fields (shared by GRPOConfig and DPOConfig) that it takes without a range check.
TRAINING: dict[str, Rule] = {
    "output_dir": FOLDER,
    "learning_rate": number(gt=0),
    "weight_decay": number(ge=0),
    "adam_beta1": number(ge=0, lt=1),
    "adam_beta2": number(ge=0, lt=1),
    "adam_epsilon": number(gt=0),
    "max_grad_norm": number(ge=0),
    "num_train_epochs": number(gt=0),
    "max_steps": number(int, ge=1, also=(-1,)),
    "warmup_steps": steps(zero=True),
    "label_smoothing_factor": number(ge=0, lt=1),
    "neftune_noise_alpha": number(gt=0, optional=True),
    "per_device_train_batch_size": number(int, ge=1),
    "per_device_eval_batch_size": number(int, ge=1),
    "gradient_accumulation_steps": number(int, ge=1),
    "eval_accumulation_steps": number(int, ge=1, optional=True),
    "torch_empty_cache_steps": number(int, ge=1, optional=True),
    "logging_steps": steps(),
    "save_steps": steps(),
    "eval_steps": steps(optional=True),
    "eval_delay": number(ge=0),
    "save_total_limit": number(int, ge=1, optional=True),
    "seed": _SEED,
    "data_seed": number(int, ge=0, le=2**32 - 1, optional=True),
    "dataloader_num_workers": number(int, ge=0),
    "dataloader_prefetch_factor": number(int, ge=1, optional=True),
    "ddp_timeout": number(int, ge=1),
}

#: ``trl.ModelConfig`` fields: how the policy loads and the peft ``LoraConfig`` TRL builds from them.
MODEL: dict[str, Rule] = {
    "model_revision": Rule(str, "a revision name, not empty", lambda v: bool(v.strip())),
    "dtype": one_of("auto", "bfloat16", "float16", "float32", optional=True),
    "lora_r": number(int, ge=1),
    "lora_alpha": number(int, ge=1),
    "lora_dropout": number(ge=0, lt=1),
    "bnb_4bit_quant_type": one_of("fp4", "nf4"),
}


def check_settings(settings: Mapping[str, Any], rules: Mapping[str, Rule]) -> None:
    """Raise :class:`SettingError` for the first setting (in ``settings``' order) that breaks its rule in ``rules``;
    settings without a rule pass."""
    for name, value in settings.items():
        rule = rules.get(name)
        if rule is not None and rule.breaks(value):
            raise SettingError(name, f"{name} must be {rule.says}, got {value!r:.80}")


def check_urls(urls: Iterable[Any], name: str) -> None:
    """Raise :class:`SettingError` naming ``name`` for the first of ``urls`` that is not an http(s) URL."""
    for url in urls:
        if not is_http_url(url):
            raise SettingError(name, f"{name} must be an http:// or https:// URL with a host, got {url!r:.80}")
