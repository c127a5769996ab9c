"""DPO for the rubric generator: parse a TRL-style config, build a ``DPOTrainer`` with a LoRA adapter,
train on a preference folder, and merge the adapter into its base for the next iteration's generator.

The config conventions are TRL's own scripts' (``TrlParser``): a YAML given with ``--config`` sets the
defaults of three dataclasses (:class:`RubricDPOArguments`, ``trl.DPOConfig``, ``trl.ModelConfig``) and
command-line flags override it. The same YAML may hold a ``loop:`` mapping, read by
``rubric-reward dpo-loop`` and ignored here; any other unknown key is an error, not silently dropped.

Hardware adaptation (so one config serves a GPU and these CPUs; every change is logged):
4-bit / 8-bit loading (bitsandbytes) and paged/8-bit optimizers only with CUDA; bf16/fp16 weights and
mixed precision fall back to float32 on CPU.

``train/dpo_rubric_generator.py`` is the ``accelerate launch``-able wrapper of :func:`main`; this module
runs on its own too (``python -m rubric_reward.recipes.generator_dpo.dpo --config X.yaml``).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ADAPTER_FILES",
    "PreferenceDataError",
    "RubricDPOArguments",
    "adapt_to_hardware",
    "build_trainer",
    "check_settings",
    "load_preferences",
    "main",
    "make_parser",
    "merge_adapter",
    "parse_args",
    "train",
]

log = logging.getLogger(__name__)

#: Keys of the YAML that belong to other readers of the same file (``loop:`` is the dpo-loop's).
FOREIGN_KEYS = ("loop",)
#: Files a finished LoRA adapter folder holds.
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
_COLUMNS = ("prompt", "chosen", "rejected")
_PASS_THROUGH = ("chat_template_kwargs",)
#: DPOTrainer's loss types (TRL 1.16), and those an f-divergence other than reverse KL works with.
LOSS_TYPES = ("sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot",
              "aot_unpaired", "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm")
_F_DIVERGENCE_LOSSES = ("sigmoid", "sigmoid_norm", "hinge", "ipo", "exo_pair", "robust", "discopop", "sft")
# settings whose TRL default breaks a rule: checked even when the file leaves them out
_REQUIRED = {"use_peft": False}


class PreferenceDataError(ValueError):
    """The preference folder is missing, empty, or has rows DPO cannot use. The message names the row."""


@dataclass
class RubricDPOArguments:
    """What the DPO script needs beyond ``DPOConfig`` and ``ModelConfig``."""

    dataset_path: str | None = field(
        default=None,
        metadata={"help": "Preference folder written with datasets' save_to_disk (rows prompt/chosen/rejected)."},
    )
    dataset_split: str = field(default="train",
                               metadata={"help": "Split to train on when the folder is a DatasetDict."})
    merged_output_dir: str | None = field(
        default=None,
        metadata={"help": "If set, merge the trained adapter into the base model and save the result here."},
    )
    auto_resume: bool = field(
        default=True,
        metadata={"help": "Resume from the last checkpoint in output_dir when resume_from_checkpoint is unset."},
    )


@functools.cache
def setting_rules() -> dict[str, Any]:
    """Field -> :class:`~rubric_reward.recipes.setting_rules.Rule` for the DPO stage's settings: transformers' training
    fields, the LoRA fields and ``DPOConfig``'s own (TRL takes a YAML value without these checks; DPOTrainer or PEFT
    would fail on it when the stage starts, after the preference stage)."""
    from ..setting_rules import MODEL, TRAINING, Rule, number, numbers, one_of

    dpo = {  # DPOConfig fields (TRL 1.16) and what the recipe needs of ModelConfig
        "beta": number(gt=0),  # 0 leaves the sigmoid loss flat and divides IPO's by zero
        "label_smoothing": number(ge=0, lt=0.5),
        "max_length": number(int, ge=1, optional=True),
        "loss_type": one_of(*LOSS_TYPES, many=True),
        "loss_weights": numbers(ge=0, optional=True),
        "f_divergence_type": one_of("reverse_kl", "forward_kl", "js_divergence", "alpha_divergence"),
        "f_alpha_divergence_coef": number(gt=0),
        "truncation_mode": one_of("keep_start", "keep_end"),
        "precompute_ref_batch_size": number(int, ge=1, optional=True),
        "dataset_num_proc": number(int, ge=1, optional=True),
        "discopop_tau": number(gt=0),
        "ld_alpha": number(ge=0, le=1, optional=True),
        "ref_model_mixup_alpha": number(ge=0, le=1),
        "ref_model_sync_steps": number(int, ge=1),
        "use_peft": Rule(bool, "true (the rubric generator is trained as a LoRA adapter)", lambda v: v),
    }
    return {**TRAINING, **MODEL, **dpo}


def check_settings(settings: dict[str, Any]) -> None:
    """The DPO stage's settings (the config file's keys, or the parsed arguments' fields) against
    :func:`setting_rules` and the loss types' cross-field rules; a ``SettingError`` naming the field otherwise."""
    from .. import setting_rules as rules

    settings = {**_REQUIRED, **settings}
    rules.check_settings(settings, setting_rules())
    losses = settings.get("loss_type") or ["sigmoid"]
    losses = [losses] if isinstance(losses, str) else list(losses)
    divergence = settings.get("f_divergence_type", "reverse_kl")
    if divergence != "reverse_kl" and not set(losses) <= set(_F_DIVERGENCE_LOSSES):
        raise rules.SettingError("f_divergence_type", f"f_divergence_type {divergence!r} works only with the loss "
                                                      f"types {', '.join(_F_DIVERGENCE_LOSSES)}; loss_type is {losses}")
    if "exo_pair" in losses and not settings.get("label_smoothing"):
        raise rules.SettingError("label_smoothing", "label_smoothing must be > 0 with the exo_pair loss, got 0")


def make_parser() -> Any:
    """``TrlParser((RubricDPOArguments, DPOConfig, ModelConfig))``."""
    from trl import DPOConfig, ModelConfig, TrlParser

    return TrlParser((RubricDPOArguments, DPOConfig, ModelConfig))


def parse_args(argv: Sequence[str] | None = None) -> tuple[RubricDPOArguments, Any, Any]:
    """Parse ``--config X.yaml`` plus command-line overrides into (script, training, model) arguments.

    Unknown keys (in the YAML or on the command line) are errors, except the ``loop:`` section.
    """
    import torch

    parser = make_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not torch.cuda.is_available():
        # DPOConfig rejects bf16 without a GPU while it is being built, before adapt_to_hardware can run;
        # flags given later on the command line still win.
        log.warning("no CUDA: training on CPU in float32 (use_cpu, no bf16/fp16)")
        argv = ["--use_cpu", "True", "--bf16", "False", "--fp16", "False", *argv]
    def error(message: str) -> None:  # argparse would print usage and exit; one line naming the key instead
        m = re.match(r"argument --(\w+)(?:/--[\w-]+)*: (.*)", message)
        raise ValueError(f"field {m.group(1)!r}: {m.group(2)}" if m else message)

    parser.error = error  # type: ignore[method-assign]
    try:
        script, training, model, from_config, from_cli = parser.parse_args_and_config(
            argv, return_remaining_strings=True, separate_remaining_strings=True
        )
    except (TypeError, KeyError) as exc:  # a value TRL's dataclasses reject while they are built
        raise ValueError(f"DPO settings: {exc}") from None
    unknown = [s[2:] for s in from_config[::2] if s[2:] not in FOREIGN_KEYS]
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} (not fields of RubricDPOArguments, DPOConfig or ModelConfig)")
    if from_cli:
        raise ValueError(f"unknown command-line argument(s): {' '.join(from_cli)}")
    check_settings({n: getattr(a, n) for n in setting_rules() for a in (training, model) if hasattr(a, n)})
    return script, training, model


# ------------------------------------------------------------------------------------------ data


def load_preferences(path: str | Path, split: str = "train") -> Any:
    """The preference rows of a ``save_to_disk`` folder as a ``datasets.Dataset`` ready for DPO.

    Rows need ``prompt``, ``chosen`` and ``rejected`` (strings, or chat messages for the prompt); other
    columns (``metadata``) are dropped. When the prompt is a list of messages and the answers are strings,
    the answers become assistant turns, as TRL's conversational format wants.
    """
    from datasets import Dataset, DatasetDict, load_from_disk

    folder = Path(path)
    if not folder.is_dir():
        raise PreferenceDataError(f"{folder}: no such preference folder (expected a datasets save_to_disk folder)")
    try:
        data = load_from_disk(str(folder))
    except IndexError:  # datasets 5 cannot reload a saved dataset with no rows
        raise PreferenceDataError(f"{folder}: no preference pairs (an empty dataset)") from None
    except (FileNotFoundError, ValueError) as exc:
        raise PreferenceDataError(f"{folder}: not a datasets folder: {exc}") from None
    if isinstance(data, DatasetDict):
        if split not in data:
            raise PreferenceDataError(f"{folder}: no split {split!r} (splits: {sorted(data)})")
        data = data[split]
    if not isinstance(data, Dataset):
        raise PreferenceDataError(f"{folder}: expected a Dataset, got {type(data).__name__}")
    missing = [c for c in _COLUMNS if c not in data.column_names]
    if missing:
        raise PreferenceDataError(f"{folder}: missing column(s) {missing}; columns are {data.column_names}")
    if len(data) == 0:
        raise PreferenceDataError(f"{folder}: no preference pairs (every prompt was skipped?)")
    keep = [c for c in (*_COLUMNS, *_PASS_THROUGH) if c in data.column_names]
    rows = [_dpo_row(row, n, folder, keep) for n, row in enumerate(data.select_columns(keep))]
    return Dataset.from_list(rows)


def _dpo_row(row: dict[str, Any], n: int, folder: Path, keep: list[str]) -> dict[str, Any]:
    where = f"{folder}: row {n}"
    prompt = row["prompt"]
    conversational = isinstance(prompt, list)
    if conversational:
        if not prompt or not all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt):
            raise PreferenceDataError(f"{where}: field 'prompt' must be a string or a list of {{role, content}}")
    elif not isinstance(prompt, str) or not prompt.strip():
        raise PreferenceDataError(f"{where}: field 'prompt' is empty")
    out: dict[str, Any] = {"prompt": prompt}
    for name in ("chosen", "rejected"):
        value = row[name]
        if isinstance(value, str):
            if not value.strip():
                raise PreferenceDataError(f"{where}: field {name!r} is empty")
            value = [{"role": "assistant", "content": value}] if conversational else value
        elif isinstance(value, list):
            if not conversational:
                raise PreferenceDataError(f"{where}: field {name!r} is a message list but 'prompt' is a string")
        else:
            raise PreferenceDataError(f"{where}: field {name!r} must be text or messages, got {type(value).__name__}")
        out[name] = value
    if out["chosen"] == out["rejected"]:
        raise PreferenceDataError(f"{where}: 'chosen' and 'rejected' are identical")
    for name in keep:
        if name in _PASS_THROUGH:
            out[name] = row[name]
    return out


# ------------------------------------------------------------------------------------------ building


def adapt_to_hardware(training: Any, model: Any, *, cuda: bool | None = None) -> list[str]:
    """Make a GPU config runnable where there is no CUDA (and vice versa checks); returns what changed."""
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    changes: list[str] = []
    if cuda:
        if model.load_in_4bit or model.load_in_8bit:
            import importlib.util

            if importlib.util.find_spec("bitsandbytes") is None:
                raise ImportError("4-bit/8-bit loading needs bitsandbytes on the GPU machine: pip install bitsandbytes")
        return changes
    if model.load_in_4bit or model.load_in_8bit:
        model.load_in_4bit = model.load_in_8bit = False
        changes.append("no CUDA: loading the base model unquantised (bitsandbytes 4/8-bit needs a GPU)")
    optim = str(getattr(training.optim, "value", training.optim))
    if "8bit" in optim or "paged" in optim or "bnb" in optim:
        from transformers.training_args import OptimizerNames

        changes.append(f"no CUDA: optimizer {optim} -> adamw_torch")
        training.optim = OptimizerNames.ADAMW_TORCH
    if training.bf16 or training.fp16:
        changes.append("no CUDA: mixed precision off")
        training.bf16 = training.fp16 = False
    if model.dtype in ("bfloat16", "float16"):
        changes.append(f"no CUDA: dtype {model.dtype} -> float32")
        model.dtype = "float32"
    if not training.use_cpu:
        training.use_cpu = True
    return changes


def build_trainer(script: RubricDPOArguments, training: Any, model: Any, *, train_dataset: Any = None,
                  callbacks: list[Any] | None = None) -> Any:
    """A ``DPOTrainer`` with a LoRA adapter (``get_peft_config``) on the base named by ``model``.

    The base may be the bundled offline model's alias (``smollm2-135m-instruct``), a local folder or a hub id.
    """
    from transformers import AutoTokenizer
    from trl import DPOTrainer, get_peft_config, get_quantization_config

    from ...io.models import resolve_model

    if not model.model_name_or_path:
        raise ValueError("model_name_or_path is not set (the generator to train)")
    if not model.use_peft:
        raise ValueError("the rubric generator is trained with a LoRA adapter: set use_peft: true")
    for change in adapt_to_hardware(training, model):
        log.warning(change)
    if train_dataset is None:
        if not script.dataset_path:
            raise ValueError("dataset_path is not set (the preference folder to train on)")
        train_dataset = load_preferences(script.dataset_path, script.dataset_split)
    base = resolve_model(model.model_name_or_path)
    init = dict(revision=model.model_revision, attn_implementation=model.attn_implementation, dtype=model.dtype)
    init.update(training.model_init_kwargs or {})
    training.model_init_kwargs = init
    tokenizer = AutoTokenizer.from_pretrained(base, revision=model.model_revision)
    return DPOTrainer(
        model=base,
        args=training,
        train_dataset=train_dataset,
        processing_class=tokenizer,
        quantization_config=get_quantization_config(model),
        peft_config=get_peft_config(model),
        callbacks=callbacks,
    )


# ------------------------------------------------------------------------------------------ running


def train(script: RubricDPOArguments, training: Any, model: Any, *, callbacks: list[Any] | None = None) -> Path:
    """Train, save the adapter (and tokenizer) in ``output_dir``, optionally merge; returns the adapter folder.

    Writes ``dpo_summary.json`` beside the adapter: pairs, steps, final loss, reward accuracy, seconds.
    """
    from transformers.trainer_utils import get_last_checkpoint

    start = time.perf_counter()
    trainer = build_trainer(script, training, model, callbacks=callbacks)
    if len(trainer.train_dataset) == 0:
        raise PreferenceDataError(f"{script.dataset_path}: every pair's prompt fills max_length={training.max_length} "
                                  "tokens, so nothing is left to train on; raise max_length")
    out = Path(training.output_dir)
    resume = training.resume_from_checkpoint
    if resume is None and script.auto_resume and out.is_dir():
        resume = get_last_checkpoint(str(out))
        if resume:
            log.warning("resuming DPO from %s", resume)
    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(str(out))
    if trainer.accelerator.is_main_process:
        history = [h for h in trainer.state.log_history if "loss" in h]
        summary = {
            "base_model": model.model_name_or_path,
            "dataset_path": script.dataset_path,
            "pairs": len(trainer.train_dataset),
            "global_step": trainer.state.global_step,
            "train_loss": result.training_loss,
            "last_logged": history[-1] if history else None,
            "seconds": round(time.perf_counter() - start, 2),
            "resumed_from": resume or None,
        }
        (out / "dpo_summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    if hasattr(trainer, "end"):
        trainer.end()
    trainer.accelerator.wait_for_everyone()
    main_process = trainer.accelerator.is_main_process
    # the accelerator keeps the prepared model and optimizer: let them go, or an in-process loop holds every
    # iteration's trainer in memory
    trainer.accelerator.free_memory()
    del trainer
    if script.merged_output_dir and main_process:
        merge_adapter(model.model_name_or_path, out, script.merged_output_dir, revision=model.model_revision)
    return out


def merge_adapter(base: str, adapter: str | Path, out_dir: str | Path, *, dtype: str | None = None,
                  revision: str | None = None) -> Path:
    """Merge a LoRA adapter into its (unquantised) base model and save a full model folder at ``out_dir``.

    The folder appears atomically: it is written beside ``out_dir`` and renamed into place, so a crash leaves
    either no folder or a complete one. ``dtype`` defaults to bfloat16 with CUDA and float32 without.
    """
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ...io.models import resolve_model

    adapter = Path(adapter)
    missing = [f for f in ADAPTER_FILES if not (adapter / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{adapter}: not a finished LoRA adapter (missing {', '.join(missing)})")
    out = Path(out_dir)
    if dtype is None:
        dtype = "bfloat16" if torch.cuda.is_available() else "float32"
    path = resolve_model(base)
    lm = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype), revision=revision)
    merged = PeftModel.from_pretrained(lm, str(adapter)).merge_and_unload()
    tokenizer_source = adapter if (adapter / "tokenizer_config.json").is_file() else path
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    merged.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "merged_from.json").write_text(json.dumps({"base": str(base), "adapter": str(adapter)}, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``train/dpo_rubric_generator.py`` and ``python -m rubric_reward.recipes.generator_dpo.dpo``."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        script, training, model = parse_args(argv)
        adapter = train(script, training, model)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"adapter saved to {adapter}" + (f"; merged model in {script.merged_output_dir}"
                                          if script.merged_output_dir else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
