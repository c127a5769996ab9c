"""The one config-section reader (rubric_reward.io.sections) and the configs read through it (issues 28.3, 32.6):
unknown keys, types (booleans are booleans, integers integers, numbers finite), declared ranges, nested sections
typed once, every error naming the file, the section and the field; every field documented where declared, and
the docs' field tables checked against the declarations."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from rubric_reward.evaluation.config import EvalConfig
from rubric_reward.generation.config import GenerationConfig
from rubric_reward.generation.metajudge import MetaJudgeConfig
from rubric_reward.generation.preferences import PreferenceConfig
from rubric_reward.judges.config import JudgeConfig
from rubric_reward.recipes.generator_dpo.evaluate_config import (EvalGeneratorConfig, GeneratorSpec, HelpSteer2Source,
                                                                 MTBenchSource, SplitConfig)
from rubric_reward.recipes.generator_dpo.loop_config import HeldoutConfig, LoopConfig
from rubric_reward.recipes.grpo.watch import WatchConfig
from rubric_reward.rewards.config import GuardConfig, LengthPenalty, RewardConfig
from rubric_reward.io.sections import field_help, from_section
from rubric_reward.serve.config import ServeConfig, ServerSettings

REPO = Path(__file__).resolve().parents[1]
CONFIGS = (RewardConfig, GuardConfig, LengthPenalty, ServeConfig, ServerSettings, JudgeConfig, EvalConfig,
           GenerationConfig, MetaJudgeConfig, PreferenceConfig, HeldoutConfig, LoopConfig, EvalGeneratorConfig,
           GeneratorSpec, SplitConfig, MTBenchSource, HelpSteer2Source, WatchConfig)


# ------------------------------------------------------------------------------------------ the reader itself
@dataclass(frozen=True)
class _Inner:
    share: float = field(default=0.5, metadata={"help": "a share", "ge": 0, "le": 1})


@dataclass(frozen=True)
class _Outer:
    flag: bool = False
    count: int = field(default=1, metadata={"ge": 1})
    rate: float | None = None
    kind: Literal["a", "b"] = "a"
    names: tuple[str, ...] = ()
    inner: _Inner | None = None
    loose: float = field(default=1.0, metadata={"finite": False})


@pytest.mark.parametrize(("data", "message"), [
    ({"flag": "no"}, "sec: field 'flag' must be true or false, got 'no'"),
    ({"flag": 0}, "sec: field 'flag' must be true or false, got 0"),
    ({"count": True}, "sec: field 'count' must be an integer, got True"),
    ({"count": 1.5}, "sec: field 'count' must be an integer, got 1.5"),
    ({"count": 0}, "sec: field 'count' must be >= 1, got 0"),
    ({"rate": float("nan")}, "sec: field 'rate' must be a finite number, got nan"),
    ({"rate": float("inf")}, "sec: field 'rate' must be a finite number, got inf"),
    ({"rate": "1"}, "sec: field 'rate' must be a number or null, got '1'"),
    ({"kind": "c"}, "sec: field 'kind' must be one of 'a', 'b', got 'c'"),
    ({"names": "x"}, "sec: field 'names' must be a list, got 'x'"),
    ({"names": ["x", 2]}, "sec: field 'names' must be a list, got ['x', 2]"),
    ({"inner": {"share": 5}}, "sec.inner: field 'share' must be in [0, 1], got 5"),
    ({"inner": {"shares": 5}}, "sec.inner: unknown field(s) ['shares']; known: ['share']"),
    ({"inner": 3}, "sec: field 'inner' must be a mapping of _Inner fields or null, got 3"),
    ({"colour": 1}, "sec: unknown field(s) ['colour']"),
])
def test_the_reader_rejects_in_one_line_naming_section_and_field(data, message):
    with pytest.raises(ValueError) as exc:
        from_section(_Outer, data, "sec")
    assert message in str(exc.value)


def test_the_reader_converts_what_it_reads():
    got = from_section(_Outer, {"rate": 1, "names": ["x"], "inner": {"share": 1}, "loose": float("inf")}, "sec")
    assert got.rate == 1.0 and isinstance(got.rate, float) and got.names == ("x",)
    assert got.inner == _Inner(1.0) and got.loose == float("inf")  # "finite": False lets infinity through


# ------------------------------------------------------------------------------------------ the evidence (32.6)
def _reward_yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "reward.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "message"), [
    ("length_penalty: {enabled: true, penalty: .nan}\n",
     "RewardConfig.length_penalty: field 'penalty' must be a finite number, got nan"),
    ("length_penalty: {enabled: 'no'}\n", "RewardConfig.length_penalty: field 'enabled' must be true or false, got 'no'"),
    ("length_penalty: {free: '10'}\n", "RewardConfig.length_penalty: field 'free' must be an integer, got '10'"),
    ("unscored_reward: .nan\n", "RewardConfig: field 'unscored_reward' must be a finite number, got nan"),
    ("deadline_s: .inf\n", "RewardConfig: field 'deadline_s' must be a finite number, got inf"),
    ("strip_think: 'no'\n", "RewardConfig: field 'strip_think' must be true or false, got 'no'"),
    ("max_unscorable_fraction: high\n", "RewardConfig: field 'max_unscorable_fraction' must be a number, got 'high'"),
    ("max_unscorable_steps: 2.5\n", "RewardConfig: field 'max_unscorable_steps' must be an integer, got 2.5"),
    ("guards: {min_reward: .nan}\n", "RewardConfig.guards: field 'min_reward' must be a finite number, got nan"),
    ("scoring: {partial_credit: .nan}\n", "RewardConfig.scoring: field 'partial_credit' must be a finite number"),
    ("scoring: {all_or_nothing: 'yes'}\n", "RewardConfig.scoring: field 'all_or_nothing' must be true or false"),
    ("grading: {shuffle: 'no'}\n", "RewardConfig.grading: field 'shuffle' must be true or false, got 'no'"),
])
def test_reward_config_errors_name_the_file_section_and_field(tmp_path, text, message):
    path = _reward_yaml(tmp_path, text)
    for cls in (RewardConfig, ServeConfig):  # one file drives both, with the same rules
        with pytest.raises(ValueError) as exc:
            cls.from_yaml(path)
        said = message.replace("RewardConfig", cls.__name__)
        assert str(exc.value).startswith(f"{path}: ") and said in str(exc.value), str(exc.value)


def test_serve_section_errors_name_the_file_section_and_field(tmp_path):
    path = _reward_yaml(tmp_path, "serve: {port: '80'}\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}: ServeConfig.serve: field 'port' must be an integer")):
        ServeConfig.from_yaml(path)


def test_a_penalty_of_nan_never_reaches_a_reward():
    with pytest.raises(ValueError, match="must be a finite number"):
        LengthPenalty(enabled=True, penalty=float("nan"))  # built in Python: the same rules
    with pytest.raises(ValueError, match="field 'enabled' must be true or false"):
        RewardConfig(length_penalty={"enabled": "no"})


@pytest.mark.parametrize(("data", "message"), [
    ({"min_rise": float("nan")}, "watch: field 'min_rise' must be a finite number, got nan"),
    ({"stop_after": 1.5}, "watch: field 'stop_after' must be an integer, got 1.5"),
    ({"copied_share": 5}, "watch: field 'copied_share' must be in [0, 1], got 5"),
    ({"stall": True}, "watch: field 'stall' must be a number, got True"),
])
def test_watch_thresholds_are_typed_and_ranged(data, message):
    with pytest.raises(ValueError) as exc:
        WatchConfig.coerce(data)
    assert message in str(exc.value)
    with pytest.raises(ValueError):
        WatchConfig(**data)


def test_local_judge_engine_args_are_checked_when_the_config_is_read():
    with pytest.raises(ValueError, match=r"engine_args\.dtype must be one of auto, float32, bfloat16, float16, "
                                         r"got 'fp8'"):
        JudgeConfig(model="m", backend="transformers", engine_args={"dtype": "fp8"})
    with pytest.raises(ValueError, match=r"engine_args \['dtyp'\] are not understood"):
        JudgeConfig.from_dict({"model": "m", "backend": "transformers", "engine_args": {"dtyp": "auto"}})
    with pytest.raises(ValueError, match=r"RewardConfig: field 'judge'.*engine_args\.dtype|engine_args\.dtype"):
        RewardConfig(judge={"model": "m", "backend": "transformers", "engine_args": {"dtype": "fp8"}}).judge_configs()
    assert JudgeConfig(model="m", backend="vllm", engine_args={"dtype": "fp8"}).engine_args  # vLLM's own to judge


@pytest.mark.parametrize(("data", "message"), [
    ({"model": "m", "temperature": float("nan")}, "judge config: field 'temperature' must be a finite number"),
    ({"model": "m", "structured_output": "no"}, "judge config: field 'structured_output' must be true or false"),
    ({"model": "m", "max_retries": 1.5}, "judge config: field 'max_retries' must be an integer, got 1.5"),
    ({"model": "m", "timeout_s": float("inf")}, "judge config: field 'timeout_s' must be a finite number"),
    ({"model": "m", "top_p": 2}, "judge config: field 'top_p' must be in (0, 1], got 2"),
    ({"model": "m", "temprature": 0}, "judge config: unknown field(s) ['temprature']"),
])
def test_judge_config_fields_are_typed(data, message):
    with pytest.raises(ValueError) as exc:
        JudgeConfig.from_dict(data)
    assert message in str(exc.value)


def test_nested_sections_are_typed_once():
    cfg = RewardConfig(scoring={"all_or_nothing": True}, grading={"shuffle": False})
    assert cfg.scoring_config() is cfg.scoring_config()  # built with the config, not rebuilt per use
    assert cfg.scoring_config().abstention.value == "zero" and cfg.grading_config().shuffle is False
    assert isinstance(ServeConfig.from_dict({"serve": {"port": 9}}).serve, ServerSettings)
    gen = EvalGeneratorConfig(judge="j", generators=[{"name": "x", "model": "m"}], split={"test_fraction": 0.25},
                              generation={"max_tokens": 64})
    assert gen.split == SplitConfig(0, 0.25) and gen.generation.max_tokens == 64
    with pytest.raises(ValueError, match=r"eval-generator config\.mt_bench: unknown field\(s\) \['sorce'\]"):
        EvalGeneratorConfig(judge="j", generators=[{"name": "x", "model": "m"}], mt_bench={"sorce": "hub"})
    with pytest.raises(ValueError, match=r"eval-generator config\.split: field 'test_fraction' must be in \[0, 1\]"):
        EvalGeneratorConfig(judge="j", generators=[{"name": "x", "model": "m"}], split={"test_fraction": 2})


def test_eval_config_sections(tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text("data: items.jsonl\njudges: m\nfields: {respons: r}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{path}: eval config.fields: unknown field(s) ['respons']")):
        EvalConfig.from_yaml(path)
    path.write_text("data: items.jsonl\njudges: m\nreport: 'no'\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{path}: eval config: field 'report' must be true or false")):
        EvalConfig.from_yaml(path)


# ------------------------------------------------------------------------------------------ documented where declared
@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_config_field_is_documented_where_declared(cls):
    missing = [name for name, text in field_help(cls).items() if not text]
    assert not missing, f"{cls.__name__}: fields without metadata['help']: {missing}"


def test_no_hand_written_unknown_key_checks_in_the_configs():
    """The unknown-key check lives in the section reader; the config modules call it. One hand-written check
    remains: the transformers backend's ``engine_args`` keys (a mapping handed to the backend, not a dataclass)."""
    modules = ["rewards/config.py", "serve/config.py", "judges/config.py", "evaluation/config.py",
               "generation/config.py", "generation/metajudge.py", "generation/preferences.py",
               "recipes/generator_dpo/evaluate_config.py", "recipes/generator_dpo/loop_config.py",
               "recipes/grpo/watch.py"]
    pattern = re.compile(r"unknown field|unknown = set\(|set\(\w+\) - \{f\.name")
    found = [(m, line.strip()) for m in modules
             for line in (REPO / "rubric_reward" / m).read_text(encoding="utf-8").splitlines() if pattern.search(line)]
    assert found == [("judges/config.py", "unknown = set(args) - set(TRANSFORMERS_ENGINE_KEYS)")], found


def _table_names(doc: str, header: str) -> list[str]:
    """The backticked names in the first column of the docs table whose header starts with ``| header |``."""
    names, inside = [], False
    for line in (REPO / "docs" / doc).read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| {header} |"):
            inside = True
            continue
        if inside and not line.startswith("|"):
            inside = False
        if inside and not line.startswith("|-") and not line.startswith("| -"):
            names += re.findall(r"`([\w.]+)`", line.split("|")[1])
    return names


# (doc, table header, {prefix: class}): every name in the table is a declared field of its class
TABLES = [
    ("judges.md", "field", {"": JudgeConfig}),
    ("rewards.md", "field", {"": RewardConfig}),
    ("rewards.md", "guard", {"guards.": GuardConfig, "": RewardConfig}),
    ("serve.md", "field", {"serve.": ServerSettings, "": ServeConfig}),
]


@pytest.mark.parametrize(("doc", "header", "classes"), TABLES, ids=[f"{t[0]}:{t[1]}" for t in TABLES])
def test_docs_field_tables_name_declared_fields(doc, header, classes):
    names = _table_names(doc, header)
    assert names, f"docs/{doc}: no '| {header} |' table"
    for name in names:
        prefix = next(p for p in classes if name.startswith(p))
        cls = classes[prefix]
        assert name[len(prefix):] in field_help(cls), f"docs/{doc}: `{name}` is not a {cls.__name__} field"


@pytest.mark.parametrize(("doc", "cls"), [("judges.md", JudgeConfig), ("rewards.md", RewardConfig)])
def test_docs_field_tables_list_every_field(doc, cls):
    listed = set(_table_names(doc, "field"))
    missing = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in listed]
    assert not missing, f"docs/{doc}: fields of {cls.__name__} missing from its table: {missing}"
