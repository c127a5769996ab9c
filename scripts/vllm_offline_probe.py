#!/usr/bin/env python
"""In-process (offline) vLLM probe: chat generation with logprobs, JSON-schema structured output, prefix caching.

Run it INSIDE the vLLM venv (scripts/setup_vllm_cpu.sh), e.g.::

    $RUBRIC_REWARD_VLLM_PYTHON scripts/vllm_offline_probe.py [--model DIR] [--n-prompts 4]

Prints one JSON object on a stdout line starting with ``VLLM_PROBE_JSON `` (vLLM logs to stdout too, also after
it, at shutdown) and, with ``--out FILE``, writes it to FILE. Exit status 0 when logprobs and all structured
outputs are as expected. Without ``--model`` the default
offline model is resolved with ``rubric_reward.models.resolve_model("smollm2-135m-instruct")`` (converted once).

vLLM 0.31 API used here (a later change turns this into the in-process vLLM judge backend):
- ``vllm.LLM(model=DIR, dtype="float32", enforce_eager=True, max_model_len=2048, enable_prefix_caching=True)``
- ``LLM.chat(list_of_conversations, SamplingParams(temperature=0, max_tokens=N, logprobs=5))``
- JSON-schema constrained decoding: ``SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))``
  with ``from vllm.sampling_params import StructuredOutputsParams`` (``GuidedDecodingParams`` /
  ``guided_decoding=`` no longer exist in 0.31).
- ``CompletionOutput.logprobs``: one ``dict[token_id, Logprob(logprob, rank, decoded_token)]`` per generated token,
  holding the top-``logprobs`` tokens plus the sampled one (so up to logprobs+1 entries).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# Same defaults as rubric_reward.testing.vllm_server.server_env, set before vllm is imported.
for _k, _v in {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_k, _v)

MARKER = "VLLM_PROBE_JSON "

SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "maxLength": 200},
        "verdict": {"type": "string", "enum": ["MET", "UNMET"]},
    },
    "required": ["reasoning", "verdict"],
    "additionalProperties": False,
}

# A shared instruction block longer than one KV block (128 tokens on CPU) so prefix caching can hit.
SYSTEM = (
    "You are a strict grader. You receive a task, a response and one criterion. Decide whether the response "
    "meets the criterion. Check every part of a compound criterion; implicit content does not count as explicit. "
) * 6

ITEMS = [
    ("Write a haiku about autumn.", "Leaves fall in silence\ncrimson carpets on the path\nthe year exhales slow.",
     "The response has exactly three lines."),
    ("Name the capital of France.", "Paris.", "The response names the capital of France."),
    ("Give two prime numbers.", "4 and 9.", "Both numbers given are prime."),
    ("Say hello in Spanish.", "Hola.", "The response is in Spanish."),
    ("Write one sentence about cats.", "Cats sleep a lot. They also purr.", "The response is exactly one sentence."),
    ("List three colours.", "Red, green, blue.", "The response lists three colours."),
    ("Translate 'dog' to German.", "Hund", "The response gives the German word for dog."),
    ("What is 2+2?", "5", "The answer is correct."),
]


def conversation(i: int) -> list[dict]:
    task, response, criterion = ITEMS[i % len(ITEMS)]
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Task: {task}\nResponse: {response}\nCriterion: {criterion}\n"
                                    "Reply with JSON: reasoning first, then verdict MET or UNMET."},
    ]


def _cpu_bind() -> str:
    cpus = sorted(os.sched_getaffinity(0))
    use = cpus[:-1] if len(cpus) > 1 else cpus  # leave one core to vLLM's busy-polling scheduler process
    return ",".join(map(str, use))


def _prefix_hits(llm) -> dict:
    out = {}
    try:
        for m in llm.get_metrics():
            if "prefix_cache" in m.name:
                out[m.name] = getattr(m, "value", None)
    except Exception as exc:  # pragma: no cover - depends on vLLM version
        out["error"] = repr(exc)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="model folder (default: the converted smollm2-135m-instruct)")
    ap.add_argument("--n-prompts", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--out", help="also write the JSON report to this file")
    args = ap.parse_args()

    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", _cpu_bind())
    report: dict = {"ok": False, "env": {k: os.environ.get(k) for k in ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_KVCACHE_SPACE")}}

    model = args.model
    if model is None:
        from rubric_reward.models import DEFAULT_LOCAL_MODEL, resolve_model

        t = time.perf_counter()
        model = resolve_model(DEFAULT_LOCAL_MODEL)
        report["resolve_s"] = round(time.perf_counter() - t, 2)
    report["model"] = model

    t = time.perf_counter()
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    report["vllm_version"] = vllm.__version__
    report["import_s"] = round(time.perf_counter() - t, 2)

    t = time.perf_counter()
    llm = LLM(
        model=model,
        dtype="float32",
        enforce_eager=True,
        max_model_len=args.max_model_len,
        enable_prefix_caching=True,
        disable_log_stats=False,  # else LLM.get_metrics() raises "Stat logging disabled"
        seed=0,
    )
    report["startup_s"] = round(time.perf_counter() - t, 2)

    convs = [conversation(i) for i in range(args.n_prompts)]

    # 1. Plain greedy chat with top-5 logprobs.
    sp = SamplingParams(temperature=0, max_tokens=args.max_tokens, logprobs=5)
    t = time.perf_counter()
    outs = llm.chat(convs, sp, use_tqdm=False)
    report["chat_s"] = round(time.perf_counter() - t, 2)
    chat = []
    for o in outs:
        c = o.outputs[0]
        first = c.logprobs[0] if c.logprobs else {}
        chat.append({
            "text": c.text,
            "finish_reason": c.finish_reason,
            "n_tokens": len(c.token_ids),
            "n_logprob_steps": len(c.logprobs or []),
            "first_step_top": sorted(
                ({"token": lp.decoded_token, "logprob": round(lp.logprob, 4), "rank": lp.rank} for lp in first.values()),
                key=lambda d: d["rank"],
            ),
            "prompt_tokens": len(o.prompt_token_ids or []),
            "num_cached_tokens": getattr(o, "num_cached_tokens", None),
        })
    report["chat"] = chat
    report["logprobs_ok"] = all(r["n_logprob_steps"] == r["n_tokens"] and len(r["first_step_top"]) >= 5 for r in chat)

    # 2. JSON-schema constrained decoding.
    sp_json = SamplingParams(
        temperature=0, max_tokens=160, logprobs=5, structured_outputs=StructuredOutputsParams(json=SCHEMA)
    )
    t = time.perf_counter()
    outs = llm.chat(convs, sp_json, use_tqdm=False)
    report["structured_s"] = round(time.perf_counter() - t, 2)
    structured = []
    for o in outs:
        c = o.outputs[0]
        try:
            parsed = json.loads(c.text)
            valid = isinstance(parsed, dict) and set(parsed) == {"reasoning", "verdict"} and parsed["verdict"] in (
                "MET", "UNMET")
        except ValueError:
            parsed, valid = None, False
        structured.append({"text": c.text, "finish_reason": c.finish_reason, "valid": valid,
                           "num_cached_tokens": getattr(o, "num_cached_tokens", None)})
    report["structured"] = structured
    report["structured_valid"] = sum(s["valid"] for s in structured)
    report["structured_total"] = len(structured)
    report["prefix_cache"] = _prefix_hits(llm)
    report["ok"] = bool(report["logprobs_ok"] and report["structured_valid"] == len(structured))
    text = json.dumps(report)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    print(MARKER + text, flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
