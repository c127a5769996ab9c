"""Without vLLM installed, importing the package and every other path works; vLLM paths say what to do."""

import importlib.util
import subprocess
import sys

import pytest

from rubric_reward import JudgeConfig, Rubric, Scorer

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")


def test_vllm_backend_names_the_extra():
    with pytest.raises(ImportError, match=r"rubric-reward\[vllm\]"):
        Scorer(Rubric.from_questions(["Q?"]), JudgeConfig(model="m", backend="vllm"))


def test_import_does_not_touch_heavy_libraries():
    code = ("import sys, rubric_reward; from rubric_reward import Scorer, Rubric, JudgeConfig; "
            "import rubric_reward.cli; "
            "print(sorted(m for m in ('vllm', 'torch', 'transformers', 'litellm', 'trl') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
