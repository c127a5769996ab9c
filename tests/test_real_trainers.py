"""The released trainers' own code against our adapters: verl 0.9.1 and OpenRLHF 0.11.2, each in its own venv
(``scripts/setup_trainers.sh``, which also installs our core package there the way a user would: no extras).

Each test runs a script under ``tests/helpers/`` with the trainer venv's Python, against a scripted judge on
127.0.0.1 and ``rubric-reward serve`` started here, and checks every reward against the service's ``/score`` for
the same sample. Skipped unless ``RUBRIC_REWARD_VERL_PYTHON`` / ``RUBRIC_REWARD_OPENRLHF_PYTHON`` name those
venvs' Pythons; with ``RUBRIC_REWARD_REQUIRE_TRAINERS=1`` (set by scripts/test.sh after building them) a missing
venv fails instead.

verl (tests/helpers/real_verl.py): nothing stubbed. Hydra composes verl's ppo_trainer config with the shipped
``examples/serve/verl_0.9_config.yaml``; verl's ``get_custom_reward_fn`` finds our function; its
``RewardLoopWorker`` builds the ``naive`` / ``rate_limited`` / ``dapo`` manager with ``load_reward_manager`` and
scores a real ``DataProto`` (tokenized by a tiny locally trained HF tokenizer: the only thing made up is the
model, which the reward path only uses to decode); ``RewardLoopManager`` runs 2 Ray reward workers on a local Ray
bound to 127.0.0.1, asking the service (``reward_kwargs.url``).

OpenRLHF (tests/helpers/real_openrlhf.py), real: ``SingleTurnAgentExecutor`` (both reward paths: the HTTP
request to ``/openrlhf`` and the imported ``examples/serve/openrlhf_reward_func.py``),
``SamplesGenerator._process_response_into_experience``, ``make_experience_batch``,
``RemoteExperienceMaker.compute_advantages_and_returns``. Stubbed, because they need CUDA and cannot install
here: ``vllm`` (the three names OpenRLHF imports at module level, and the engine that generates: it returns the
scripted response's token ids) and ``flash_attn`` (imported at module level by ``openrlhf.models``, never
called on this path). The Ray actors around them (vLLM engine actors, the PPO trainer) are not started: they need
GPUs. What still runs on re-created clients (tests/helpers/trainer_clients.py, tests/test_trainer_interop.py):
OpenRLHF v0.9's batch requests, verl's 0.7/0.8 lookups and legacy managers (other releases than those installed
here) and fault injection, which those re-creations drive faster.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from rubric_reward.serve import ServeConfig, ServiceThread

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "serve"
HELPERS = ROOT / "tests" / "helpers"
SCRIPT = {
    "answers": lambda response, body: "MET" if "Paris" in response else "UNMET",
    "correct": lambda response, body: "UNMET" if "Lyon" in response else "MET",
    "tone": "warm", "register": "formal", "invents_policy": "UNMET",
}
RESPONSES = ["The capital of France is Paris.", "I believe it is Lyon.", "Paris, please.",
             "Could you please ask about another country?"]
UNKNOWN = "no_such_rubric"
LABELS = ["concise_answer", "support_reply", json.dumps(["Does the response name a city?"]), UNKNOWN]
FALLBACK = -1.0
JUDGE_LATENCY_S = 0.2


def trainer_python(env: str) -> str:
    python = os.environ.get(env)
    if python and Path(python).exists():
        return python
    message = f"{env} is not set to a trainer venv's python (scripts/setup_trainers.sh builds them)"
    if os.environ.get("RUBRIC_REWARD_REQUIRE_TRAINERS") == "1":
        pytest.fail(f"RUBRIC_REWARD_REQUIRE_TRAINERS=1 but {message}")
    pytest.skip(message)


def run_helper(python: str, helper: str, spec: dict, tmp_path: Path, timeout: float = 400) -> dict:
    spec_path, out_path = tmp_path / "spec.json", tmp_path / "out.json"
    spec_path.write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_ENABLE_UV_RUN_RUNTIME_ENV="0", RAY_USAGE_STATS_ENABLED="0",
               TOKENIZERS_PARALLELISM="false", WANDB_MODE="disabled", HF_HUB_OFFLINE="1")
    for key in ("RUBRIC_REWARD_URL", "RUBRIC_REWARD_CONFIG"):
        env.pop(key, None)
    t0 = time.perf_counter()
    proc = subprocess.run([python, str(HELPERS / helper), str(spec_path), str(out_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{helper} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    out = json.loads(out_path.read_text())
    out["_wall_s"] = time.perf_counter() - t0
    print(f"{helper}: {out['_wall_s']:.1f} s")
    return out


@pytest.fixture
def service(judge_server, tmp_path):
    """(reward.yaml for in-process judging, the service's URL, the /score reward of a sample)."""
    server = judge_server(SCRIPT, latency_s=JUDGE_LATENCY_S)
    cfg = yaml.safe_load((EXAMPLES / "reward.yaml").read_text())
    cfg["judge"]["base_url"] = server.base_url
    cfg.update(rubric_dir=str(EXAMPLES / "rubrics"), unscored_reward=FALLBACK, cache=None)
    path = tmp_path / "reward.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with ServiceThread(ServeConfig.from_yaml(path)) as svc:
        from rubric_reward.rewards.client import RewardClient

        client = RewardClient(svc.url)

        def reference(samples: list[dict]) -> list[float]:
            """/score's reward per sample; an unknown rubric id (which /score rejects with a 422) is unscored."""
            known = [i for i, s in enumerate(samples) if s["label"] != UNKNOWN]
            items = [{"id": str(i), "prompt": samples[i]["prompt"], "response": samples[i]["response"],
                      "label": samples[i]["label"]} for i in known]
            out = [FALLBACK] * len(samples)
            for i, r in zip(known, client.score(items), strict=True):
                out[i] = FALLBACK if r.get("reward") is None else float(r["reward"])
            return out

        try:
            yield path, svc.url, reference
        finally:
            client.close()


def _samples(n: int, prompt_of=lambda i: "What is the capital of France?") -> list[dict]:
    return [{"prompt": prompt_of(i), "response": RESPONSES[i % 4], "label": LABELS[(i // 4) % 4]} for i in range(n)]


@pytest.mark.timeout(600)
def test_verl_091_reward_loop_and_ray_manager(service, tmp_path):
    python = trainer_python("RUBRIC_REWARD_VERL_PYTHON")
    reward_yaml, url, reference = service
    samples = _samples(24)
    expected = reference(samples)
    assert FALLBACK in expected and len(set(expected)) > 2  # a varied batch, one rubric id unknown
    out = run_helper(python, "real_verl.py", {"reward_yaml": str(reward_yaml), "service_url": url,
                                              "samples": samples, "managers": ["naive", "rate_limited", "dapo"], "unscored_reward": FALLBACK,
                                              "ray_manager": True}, tmp_path)
    assert out["verl"] == "0.9.1"
    assert out["shipped"] == {"path": "examples/serve/verl_reward.py", "name": "compute_score_async",
                              "manager": "naive", "max_concurrent": 64, "num_workers": 8}
    assert out["custom_fn"]["found"] and out["custom_fn"]["async"]
    assert out["custom_fn"]["first"]["score"] == pytest.approx(expected[0])
    assert out["decoded_ok"] and out["legacy_layout_found"] is False  # verl_0.7_config.yaml: ignored by 0.9.1
    for name, manager_class in (("naive", "NaiveRewardManager"), ("rate_limited", "RateLimitedRewardManager"),
                                ("dapo", "DAPORewardManager")):
        got = out["workers"][name]
        assert got["manager_class"] == manager_class
        assert got["rewards"] == pytest.approx(expected), name
        assert [e["rubric_unscored"] for e in got["extra"]] == [float(x == FALLBACK) for x in expected]
        assert not any("error" in e or "timeout" in e for e in got["extra"]), got["extra"]
    # the shipped max_concurrent reaches verl: 24 samples of a 200 ms judge overlap (one at a time: >= 4.8 s)
    assert out["workers"]["rate_limited"]["max_concurrent"] == 64
    assert out["workers"]["rate_limited"]["seconds"] < 24 * JUDGE_LATENCY_S / 2
    ray = out["ray_manager"]
    assert ray["workers"] == 2 and ray["rewards"] == pytest.approx(expected)
    assert ray["nonzero_at_last_token"] == [n - 1 if e else None for n, e in zip(ray["response_lengths"], expected)]
    assert ray["rubric_unscored"] == [float(x == FALLBACK) for x in expected]
    assert {"score", "rubric_unscored", "rubric_judge_cost"} <= set(ray["extra_keys"])
    print(json.dumps({k: round(v["seconds"], 2) for k, v in out["workers"].items()}),
          f"ray manager {ray['seconds']:.1f} s")


@pytest.mark.timeout(600)
def test_openrlhf_0112_remote_url_and_reward_func(service, tmp_path):
    python = trainer_python("RUBRIC_REWARD_OPENRLHF_PYTHON")
    reward_yaml, url, reference = service
    chat = lambda i: f"<|im_start|>user\nQuestion {i // 4}: what is the capital of France?<|im_end|>\n<|im_start|>assistant\n"  # noqa: E731
    samples = _samples(16, chat)
    expected = reference(samples)
    out = run_helper(python, "real_openrlhf.py", {"reward_yaml": str(reward_yaml), "service_url": url,
                                                  "samples": samples, "n_samples_per_prompt": 4}, tmp_path)
    http, func = out["http"], out["func"]
    for mode in (http, func):
        assert mode["rewards"] == pytest.approx(expected)
        assert mode["unscored"] == [float(x == FALLBACK) for x in expected]
    # one shape per trainer: both paths give OpenRLHF the same answer, so the same tensors and advantages
    assert func["raw"] == http["raw"]
    assert func["rewards_shape"] == http["rewards_shape"] and func["info_shapes"] == http["info_shapes"]
    assert func["batch_rewards_shape"] == http["batch_rewards_shape"]
    assert func["advantages"] == pytest.approx(http["advantages"])
    print("shapes", http["rewards_shape"][0], http["info_shapes"], "batch", http["batch_rewards_shape"])


def test_documented_install_lines_are_the_ones_ci_runs():
    """docs/integrations.md's install lines per trainer name the versions and packages setup_trainers.sh installs
    (which CI runs), and never the `train` extra beside a trainer."""
    import re

    doc = (ROOT / "docs" / "integrations.md").read_text()
    section = doc[doc.index("## Installing beside a trainer"):doc.index("## OpenRLHF")]
    script = (ROOT / "scripts" / "setup_trainers.sh").read_text()
    lines = [line.split("#")[0].split() for line in re.findall(r"^pip install .*$", section, flags=re.M)]
    assert len(lines) >= 8
    for words in lines:
        for word in words[2:]:
            if word.startswith("-") or word in ("rubric-reward", "openrlhf[vllm]==0.11.2"):
                continue
            assert word in script or word.strip('"') in script, f"{word!r} (docs) is not what CI installs"
    assert "rubric-reward[" not in section and "verl==0.9.1" in script and "openrlhf==0.11.2" in script
    assert "--no-deps" in section and "--no-build-isolation deepspeed==0.19.6" in section
