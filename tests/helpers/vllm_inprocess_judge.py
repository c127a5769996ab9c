"""Run inside the vLLM venv: score a small batch with the in-process vLLM judge in both verdict modes.

    $RUBRIC_REWARD_VLLM_PYTHON tests/helpers/vllm_inprocess_judge.py MODEL_DIR OUT.json

vLLM starts worker processes with spawn, so everything runs under the main guard.
"""

import json
import sys
import time

RUBRIC = {"criteria": [
    {"name": "clear", "requirement": "The answer is clear."},
    {"name": "tone", "kind": "ordinal", "requirement": "How warm is the tone?", "allow_abstain": True,
     "options": [{"label": "rude", "value": 0}, {"label": "neutral", "value": 0.5}, {"label": "warm", "value": 1}]},
    {"name": "genre", "kind": "nominal", "requirement": "Which genre?", "options": {"poem": 1.0, "prose": 0.0}},
    {"name": "flaw", "requirement": "The answer contains a factual error.", "weight": -1},
]}
ITEMS = [("Write a poem about roses.", "Roses are red, violets are blue."),
         ("Say hello politely.", "Hello there, it is lovely to meet you!")]


def main() -> None:
    from rubric_reward import JudgeConfig, Rubric, Scorer
    import vllm

    from rubric_reward.judges.vllm_backend import VLLMBackend, default_engine_args, shutdown_engine
    from rubric_reward.judges.judge import Judge

    model_dir, out_path = sys.argv[1], sys.argv[2]
    rubric = Rubric.from_obj(RUBRIC)
    report = {}
    start = time.perf_counter()
    llm = vllm.LLM(model=model_dir, **default_engine_args())  # one engine for both modes: start-up dominates
    try:
        for mode in ("logprob", "generate"):
            cfg = JudgeConfig(model=model_dir, backend="vllm", verdict_mode=mode, max_tokens=128)
            with Scorer(rubric, Judge(cfg, VLLMBackend(cfg, llm=llm))) as scorer:
                results = scorer.score_batch(ITEMS)
            report[mode] = [r.to_dict() for r in results]
            report[f"{mode}_s"] = round(time.perf_counter() - start, 1)
    finally:
        shutdown_engine(llm)
    with open(out_path, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
