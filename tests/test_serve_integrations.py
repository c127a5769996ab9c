"""verl and OpenRLHF adapters, run from the files in examples/serve/ the way those trainers load them."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml

from rubric_reward.serve import ServiceThread

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "serve"
SCRIPT = {
    "answers": lambda response, body: "MET" if "Paris" in response else "UNMET",
    "correct": lambda response, body: "UNMET" if "Lyon" in response else "MET",
    "tone": "warm", "register": "formal", "invents_policy": "UNMET",  # support_reply's other criteria
}


def _load(path: Path, name: str):
    """Load a function from a file path, as verl and OpenRLHF do (not as an installed module)."""
    spec = importlib.util.spec_from_file_location(f"custom_reward_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _reward_yaml(tmp_path: Path, server, **fields) -> Path:
    """examples/serve/reward.yaml with the judge pointed at the loopback server."""
    cfg = yaml.safe_load((EXAMPLES / "reward.yaml").read_text())
    cfg["judge"]["base_url"] = server.base_url
    cfg["rubric_dir"] = str(EXAMPLES / "rubrics")
    cfg.update(fields)
    path = tmp_path / "reward.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _flags(unscored: float, cause: str | None = None) -> dict:
    return {"rubric_unscored": unscored, **{f"rubric_unscored_{c}": float(c == cause) for c in ("judge", "input",
                                                                                               "service")}}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("layout", ["0.9", "0.7"])
def test_verl_config_per_release_loads_through_verls_lookup(layout, judge_server, tmp_path, monkeypatch):
    """Each shipped config, looked up as that verl release does, names our function (not verl's default
    scorer) and a manager that exists there; the other release's lookup finds nothing in it."""
    from tests.helpers.trainer_clients import verl_lookup

    server = judge_server(SCRIPT)
    monkeypatch.chdir(ROOT)  # verl resolves the file path from the working directory
    cfg = yaml.safe_load((EXAMPLES / f"verl_{layout}_config.yaml").read_text())
    other = {"0.9": "0.7", "0.7": "0.9"}[layout]
    assert verl_lookup(cfg, other)[0] is None  # why there are two files: the other layout is ignored
    section = cfg["reward"]["custom_reward_function"] if layout == "0.9" else cfg["custom_reward_function"]
    section["reward_kwargs"]["config"] = str(_reward_yaml(tmp_path, server, unscored_reward=-1.0))
    fn, manager, reward_loop = verl_lookup(cfg, layout)
    assert fn is not None and manager == "naive" and reward_loop

    async def call(*args):
        return await fn(*args)

    good = asyncio.run(call("geo", "Paris.", "concise_answer", {"prompt": "Capital of France?"}))
    wrong = asyncio.run(call("geo", "Paris, or maybe Lyon.", "concise_answer", {"question": "Capital of France?"}))
    inline = asyncio.run(call("geo", "Paris", json.dumps(["Does it name a city?"]), None))
    assert good == {"score": 1.0, "rubric_score": 1.0, **_flags(0.0), "rubric_judge_cost": 0.0}
    assert wrong["score"] == pytest.approx(3 / 5) and inline["score"] == 1.0
    assert "Capital of France?" in server.bodies[0]["messages"][-1]["content"]
    # a label that names no rubric is an explicit unscored sample, not a crash
    bad = asyncio.run(call("geo", "Paris", "no_such_rubric", None))
    assert bad == {"score": -1.0, "rubric_score": -1.0, **_flags(1.0, "input"), "rubric_judge_cost": 0.0}
    assert asyncio.run(call("geo", "Paris", "concise_answer", {"prompt": [{"no_role": 1}]}))["rubric_unscored"] == 1.0


@pytest.mark.timeout(60)
def test_verl_reward_file_functions(judge_server, tmp_path):
    server = judge_server(SCRIPT)
    kwargs = {"config": str(_reward_yaml(tmp_path, server, unscored_reward=-1.0))}
    batch = _load(EXAMPLES / "verl_reward.py", "compute_score_batch")
    out = batch(data_sources=["geo"] * 3, solution_strs=["Paris", "Lyon", "Paris"],
                ground_truths=["concise_answer", "no_such_rubric", "support_reply"], extra_infos=None, **kwargs)
    assert [o["score"] for o in out[:2]] == [1.0, -1.0] and out[1]["rubric_unscored"] == 1.0
    assert out[2]["rubric_unscored"] == 0.0  # a second rubric from rubric_dir, judged in the same batch
    assert _load(EXAMPLES / "verl_reward.py", "compute_score")("geo", "Paris", "concise_answer", None,
                                                               **kwargs)["score"] == 1.0
    assert _load(EXAMPLES / "verl_reward.py", "compute_score_prime")("geo", "Lyon", "concise_answer", None,
                                                                     **kwargs) == pytest.approx(1 / 5)


@pytest.mark.timeout(60)
def test_verl_through_the_service(judge_server, tmp_path, monkeypatch):
    from rubric_reward.integrations.verl import compute_score, compute_score_batch
    from rubric_reward.serve import ServeConfig

    server = judge_server(SCRIPT)
    cfg = ServeConfig.from_yaml(_reward_yaml(tmp_path, server))
    with ServiceThread(cfg) as svc:
        monkeypatch.setenv("RUBRIC_REWARD_URL", svc.url)
        monkeypatch.setenv("RUBRIC_REWARD_UNSCORED", "-0.5")
        import numpy as np

        one = compute_score("geo", "Paris", "concise_answer", {"prompt": "Capital?"})
        # parquet rows give numpy arrays: a question list as the label, messages as the prompt
        arr = compute_score("geo", "Paris", np.array(["Does it name a city?"], dtype=object),
                            {"prompt": np.array([{"role": "user", "content": "Capital?"}], dtype=object)})
        out = compute_score_batch(["geo"] * 3, ["Paris", "Lyon", "Paris. Lyon."],
                                  ["concise_answer", "missing_rubric", "concise_answer"], [None] * 3)
    assert one["score"] == 1.0 and arr["score"] == 1.0 and arr["rubric_unscored"] == 0.0
    # the service rejects the unknown id (422); that sample is unscored and the rest are still scored
    assert [o["score"] for o in out] == [1.0, -0.5, pytest.approx(3 / 5)]
    assert [o["rubric_unscored"] for o in out] == [0.0, 1.0, 0.0]


@pytest.mark.timeout(60)
def test_openrlhf_reward_func_example(judge_server, tmp_path, monkeypatch):
    server = judge_server(SCRIPT)
    monkeypatch.delenv("RUBRIC_REWARD_URL", raising=False)
    monkeypatch.setenv("RUBRIC_REWARD_CONFIG", str(_reward_yaml(tmp_path, server)))
    reward_func = _load(EXAMPLES / "openrlhf_reward_func.py", "reward_func")
    prompt = "<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n"
    queries = [prompt + "Paris.<|im_end|>", prompt + "Lyon.<|im_end|>", "unrelated text"]
    torch = sys.modules.pop("torch", None)  # without torch loaded the answer is plain lists
    try:
        out = reward_func(queries, [prompt] * 3, ["concise_answer"] * 3)
    finally:
        if torch is not None:
            sys.modules["torch"] = torch
    assert out["rewards"] == [1.0, pytest.approx(1 / 5), 0.0] and out["scores"] == out["rewards"]
    assert out["extra_logs"]["rubric_unscored"] == [0.0, 0.0, 1.0]
    assert out["extra_logs"]["rubric_unscored_input"] == [0.0, 0.0, 1.0] and "query[2]" in out["errors"][2]
    assert all("<|im_end|>" not in b["messages"][-1]["content"] for b in server.bodies)


def test_adapters_say_what_to_configure(monkeypatch):
    from rubric_reward.integrations.verl import compute_score

    monkeypatch.delenv("RUBRIC_REWARD_URL", raising=False)
    monkeypatch.delenv("RUBRIC_REWARD_CONFIG", raising=False)
    with pytest.raises(ValueError, match="RUBRIC_REWARD_URL"):
        compute_score("x", "y", "z")


@pytest.mark.timeout(60)
def test_openrlhf_flag_example_against_the_service(judge_server, tmp_path):
    """The URL in examples/serve/openrlhf.sh, served from examples/serve/reward.yaml, in OpenRLHF's shape."""
    import re
    import urllib.request

    from rubric_reward.serve import ServeConfig

    server = judge_server(SCRIPT)
    script = (EXAMPLES / "openrlhf.sh").read_text()
    default_url = re.search(r"REWARD_URL:-(http://[^}]+)\}", script).group(1)
    assert "--reward.remote_url" in script and "--data.label_key rubric" in script
    with ServiceThread(ServeConfig.from_yaml(_reward_yaml(tmp_path, server))) as svc:
        url = svc.url + "/" + default_url.split("/", 3)[3]
        prompt = "<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n"
        body = {"query": [prompt + "Paris.<|im_end|>"], "prompts": [prompt], "labels": ["concise_answer"]}
        req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            out = json.loads(resp.read())
    assert out["rewards"] == [1.0] and out["scores"] == [1.0] and out["extra_logs"]["rubric_unscored"] == [0.0]
