"""Run inside the verl 0.9.1 venv (scripts/setup_trainers.sh): verl's own code against our reward.

Usage: python real_verl.py SPEC.json OUT.json   (cwd: the repository root, as a verl user runs from theirs)

SPEC: {"reward_yaml": path (in-process judging), "service_url": url (the reward service),
       "samples": [{"prompt", "response", "label"}...], "managers": [...], "ray_manager": bool}

Nothing of verl is re-created here: the config is composed by Hydra from the shipped
examples/serve/verl_0.9_config.yaml (which extends verl's own ppo_trainer config), the function is found by
verl's ``get_custom_reward_fn``, managers are built by ``load_reward_manager`` inside verl's
``RewardLoopWorker``, batches are real ``DataProto`` objects tokenized with a real (tiny, locally trained) HF
tokenizer, and ``RewardLoopManager`` runs its workers as Ray actors on a local Ray bound to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path.cwd()
CONFIG_DIR = REPO / "examples" / "serve"


def tiny_tokenizer(folder: Path) -> str:
    """A byte-level BPE tokenizer (decode(encode(s)) == s) saved as an HF tokenizer folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    text = ("The capital of France is Paris. Lyon is a city in France. Please answer politely and briefly. "
            "Could you please ask about another country? I believe the answer is Lyon, sorry. ") * 20
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "<eos>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>").save_pretrained(folder)
    return str(folder)


def compose(overrides: list[str]):
    """verl's full PPO config with the shipped file composed in, as `main_ppo --config-path examples/serve
    --config-name verl_0.9_config ...` composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return hydra_compose(config_name="verl_0.9_config", overrides=overrides)


def batch(tokenizer, samples: list[dict]):
    """A DataProto as verl's rollout hands it to the reward loop: left-padded prompts, right-padded responses."""
    import numpy as np
    import torch

    from verl import DataProto

    pad = tokenizer.pad_token_id
    p_ids = [tokenizer(s["prompt"], add_special_tokens=False)["input_ids"] for s in samples]
    r_ids = [tokenizer(s["response"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
             for s in samples]
    P, R = max(map(len, p_ids)), max(map(len, r_ids)) + 3
    prompts = torch.tensor([[pad] * (P - len(p)) + p for p in p_ids])
    responses = torch.tensor([r + [pad] * (R - len(r)) for r in r_ids])
    mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (R - len(r))
                         for p, r in zip(p_ids, r_ids)])
    n = len(samples)
    reward_model = np.empty(n, dtype=object)
    extra_info = np.empty(n, dtype=object)
    for i, s in enumerate(samples):
        reward_model[i] = {"ground_truth": s["label"], "style": "rule"}
        extra_info[i] = {"prompt": s["prompt"], "index": i}
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
                 "attention_mask": mask},
        non_tensors={"data_source": np.array(["rubric"] * n, dtype=object), "reward_model": reward_model,
                     "extra_info": extra_info})


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    out: dict = {}
    tmp = Path(tempfile.mkdtemp(prefix="real_verl_"))
    tok_dir = tiny_tokenizer(tmp / "tokenizer")
    common = [f"actor_rollout_ref.model.path={tok_dir}",
              f"reward.custom_reward_function.reward_kwargs.config={spec['reward_yaml']}"]

    import verl
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils import hf_tokenizer

    out["verl"] = verl.__version__
    cfg = compose(common)
    out["shipped"] = {"path": cfg.reward.custom_reward_function.path, "name": cfg.reward.custom_reward_function.name,
                      "manager": cfg.reward.reward_manager.name, "max_concurrent": cfg.reward.get("max_concurrent"),
                      "num_workers": cfg.reward.num_workers}
    fn = get_custom_reward_fn(cfg)
    out["custom_fn"] = {"found": fn is not None, "async": inspect.iscoroutinefunction(fn)
                        or inspect.iscoroutinefunction(getattr(fn, "func", None)),
                        "wraps": getattr(getattr(fn, "args", [None])[0], "__name__", None) if fn else None}
    # the file verl imports is ours: calling what it found scores a sample
    s0 = spec["samples"][0]
    one = fn(data_source="rubric", solution_str=s0["response"], ground_truth=s0["label"],
             extra_info={"prompt": s0["prompt"]})
    out["custom_fn"]["first"] = asyncio.run(one) if inspect.isawaitable(one) else one

    # the 0.7/0.8 layout merged into 0.9.1's config: main_ppo's lookup finds nothing (verl's default scorer)
    from omegaconf import OmegaConf

    legacy = OmegaConf.create(OmegaConf.to_container(cfg))
    del legacy.reward.custom_reward_function.reward_kwargs
    legacy.reward.custom_reward_function.path = None
    legacy = OmegaConf.merge(legacy, OmegaConf.load(CONFIG_DIR / "verl_0.7_config.yaml"))
    out["legacy_layout_found"] = get_custom_reward_fn(legacy) is not None

    tokenizer = hf_tokenizer(tok_dir)
    data = batch(tokenizer, spec["samples"])
    out["decoded_ok"] = all(tokenizer.decode(tokenizer(s["response"], add_special_tokens=False)["input_ids"])
                            == s["response"] for s in spec["samples"])

    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    out["workers"] = {}
    for name in spec["managers"]:
        overrides = common + [f"reward.reward_manager.name={name}"]
        worker = RewardLoopWorker(compose(overrides))
        t0 = time.perf_counter()
        results = worker.loop.run_until_complete(worker.compute_score_batch(data))
        out["workers"][name] = {"manager_class": type(worker.reward_manager).__name__,
                                "seconds": time.perf_counter() - t0,
                                "max_concurrent": getattr(type(worker.reward_manager), "_max_concurrent", None),
                                "rewards": [float(r["reward_score"]) for r in results],
                                "extra": [{k: v for k, v in r["reward_extra_info"].items()
                                           if k.startswith("rubric_") or k in ("score", "acc", "error", "timeout")}
                                          for r in results]}

    if spec.get("ray_manager"):
        import ray

        from verl.experimental.reward_loop.reward_loop import RewardLoopManager

        # workers inherit this process's environment (PYTHONPATH: the checkout under test)
        ray.init(num_cpus=2, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False)
        try:
            # the service this time (reward_kwargs.url), 2 Ray reward workers
            cfg = compose([f"actor_rollout_ref.model.path={tok_dir}", "reward.num_workers=2",
                           "~reward.custom_reward_function.reward_kwargs.config",
                           f"+reward.custom_reward_function.reward_kwargs.url={spec['service_url']}",
                           # with url, the adapter's own fallback (the service's unscored_reward stays there)
                           f"+reward.custom_reward_function.reward_kwargs.unscored_reward={spec['unscored_reward']}"])
            t0 = time.perf_counter()
            manager = RewardLoopManager(cfg)
            scored = manager.compute_rm_score(data)
            rm = scored.batch["rm_scores"]
            out["ray_manager"] = {"seconds": time.perf_counter() - t0, "workers": len(manager.reward_loop_workers),
                                  "rewards": rm.sum(dim=1).tolist(),
                                  "nonzero_at_last_token": [int(row.nonzero().flatten()[-1]) if row.any() else None
                                                            for row in rm],
                                  "response_lengths": [int(x) for x in
                                                       data.batch["attention_mask"][:, data.batch["prompts"].size(1):]
                                                       .sum(1)],
                                  "extra_keys": sorted(scored.meta_info["reward_extra_keys"]),
                                  "rubric_unscored": [float(x) for x in scored.non_tensor_batch["rubric_unscored"]]}
        finally:
            ray.shutdown()
    Path(sys.argv[2]).write_text(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
