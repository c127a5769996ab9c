"""A scripted OpenAI-compatible judge server on 127.0.0.1, for tests and benchmarks.

It answers ``POST /v1/chat/completions`` with verdicts scripted per criterion name, with optional
latency and injected faults (429 with Retry-After, 500, hangs, malformed bodies, malformed or
off-menu answers), and records what it saw (request count, bodies, peak concurrency, arrival times).

Run in-process (a background thread with its own loop)::

    with JudgeServer(ScriptedJudge({"clarity": "MET"})) as server:
        Scorer(rubric, "judge", base_url=server.base_url).score(prompt, response)

or as a separate process: ``python -m rubric_reward.testing.judge_server --port 0 [--script verdicts.yaml]``,
where the script file maps criterion names to labels (ordinal and nominal criteria need their own);
:func:`spawn` starts that process and waits until it listens (benchmarks: the server then does not
share the client's GIL).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..grading.group_prompt import requested_responses
from ..grading.criterion_prompt import requested_criteria

__all__ = ["Fault", "FaultPlan", "JudgeServer", "ScriptedJudge", "load_script", "response_in_request", "spawn",
           "token_logprobs"]

Script = str | Mapping[str, float] | Callable[[str, Mapping[str, Any]], str]


@dataclass(frozen=True)
class Fault:
    """An injected failure: an HTTP status (with optional Retry-After), a hang, or a bad body."""

    status: int | None = None
    retry_after: float | str | None = None  # seconds, or a raw header value (an HTTP date)
    hang_s: float = 0.0
    body: str | None = None  # raw response body to send with status 200 (malformed JSON, ...)
    content: str | None = None  # assistant text to send instead of the scripted answer
    echo_headers: bool = False  # put the request headers in the error body (a leaky gateway)
    finish_reason: str = "stop"  # e.g. "content_filter": the provider filtered the answer


@dataclass
class FaultPlan:
    """Random faults at a given rate, reproducible with a seed (or a fixed list by request number), and
    ``marked``: a fault for every request whose messages contain the marker text (one response that
    overflows the judge's context, trips its content filter or breaks its answer, whoever shares its call)."""

    rate: float = 0.0
    kinds: tuple[Fault, ...] = ()
    seed: int = 0
    fixed: Mapping[int, Fault] = field(default_factory=dict)
    marked: Mapping[str, Fault] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def draw(self, request_no: int, body: Mapping[str, Any] | None = None) -> Fault | None:
        if request_no in self.fixed:
            return self.fixed[request_no]
        if self.marked and body is not None:
            text = "\n".join(str(m.get("content", "")) for m in body.get("messages", ()))
            marker = next((m for m in self.marked if m in text), None)
            if marker is not None:
                return self.marked[marker]
        with self._lock:
            if self.kinds and self._rng.random() < self.rate:
                return self._rng.choice(self.kinds)
        return None


PositionBias = float | Callable[[int, int], float]


def _rendered(messages: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rendered judge prompt among ``messages`` (a re-ask appends turns after it)."""
    for m in messages:
        content = str(m.get("content", ""))
        if m.get("role") == "user" and ("## Criterion\n" in content or "## Criteria\n" in content):
            return [m]
    return messages[-1:]


def response_in_request(messages: list[Mapping[str, Any]]) -> str:
    """The response text a rendered judge request asks about (inside its fence)."""
    text = str(_rendered(messages)[-1]["content"])
    m = re.search(r"## Response to judge\n[^\n]*\n(`{3,})response\n", text)
    if not m:
        return ""
    start, ticks = m.end(), m.group(1)
    end = text.find(f"\n{ticks}\n", start)
    return text[start:end if end >= 0 else len(text)]


class ScriptedJudge:
    """Answers by criterion name: a label, ``{label: probability}``, or ``f(response, body) -> label``.

    Unscripted criteria get ``default``. With probabilities the answer is the most probable label and,
    when the request asks for logprobs, the verdict token carries them. ``reply(body)``, when given,
    answers any request it returns text for (non-judge prompts: rubric generation, meta-judges);
    returning None falls through to the scripted verdicts.

    Group requests (``mode: group``) get one verdict per response shown, keyed by its id, each from the
    same script. ``position_bias`` makes the judge favour where a response is shown: a float is the
    chance that the first-shown response gets ``biased_label`` (on the criteria that offer it)
    whatever the script says; a function
    ``(position, n) -> chance`` sets it for every position (draws are seeded by the request, so a
    request always gets the same answer).
    """

    def __init__(self, verdicts: Mapping[str, Script] | None = None, default: Script = "MET",
                 reason: str = "Quoted evidence: the response says so.",
                 reply: Callable[[Mapping[str, Any]], str | None] | None = None,
                 position_bias: PositionBias | None = None, biased_label: str = "MET"):
        self.verdicts = dict(verdicts or {})
        self.default = default
        self.reason = reason
        self.reply = reply
        self.position_bias = position_bias
        self.biased_label = biased_label

    def _bias(self, position: int, n: int) -> float:
        if self.position_bias is None:
            return 0.0
        if callable(self.position_bias):
            return float(self.position_bias(position, n))
        return float(self.position_bias) if position == 0 else 0.0

    def _resolve(self, name: str, response: str, body: Mapping[str, Any]) -> tuple[str, Mapping[str, float] | None]:
        script = self.verdicts.get(name, self.default)
        if callable(script):
            script = script(response, body)
        if isinstance(script, Mapping):
            return max(script, key=script.__getitem__), script
        return str(script), None

    def answer(self, body: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]] | None]:
        """The assistant text and, when asked, token logprobs for it."""
        if self.reply is not None:
            text = self.reply(body)
            if text is not None:
                return text, None
        messages = _rendered(body["messages"])
        shown = requested_responses(messages)
        asked = requested_criteria(messages)
        if shown:
            return self._group_answer(body, messages, shown, asked)
        response = response_in_request(messages)
        if len(asked) <= 1 and (not asked or asked[0][0] is None):
            name = asked[0][1] if asked else ""
            label, probs = self._resolve(name, response, body)
            prefix = '{"reason": ' + json.dumps(self.reason) + ', "verdict": "'
            text = prefix + label + '"}'
            logprobs = token_logprobs(prefix, label, '"}', probs) if body.get("logprobs") else None
            return text, logprobs
        answer = {}
        for key, name in asked:
            label, _ = self._resolve(name, response, body)
            answer[key] = {"reason": self.reason, "verdict": label}
        return json.dumps(answer), None

    def _group_answer(self, body: Mapping[str, Any], messages: list[Mapping[str, Any]],
                      shown: list[tuple[str, str]], asked: list[tuple[str | None, str]]
                      ) -> tuple[str, list[dict[str, Any]] | None]:
        rng = random.Random(str(messages[-1].get("content", "")))
        keyed = bool(asked) and asked[0][0] is not None
        segments: list[tuple[str, Mapping[str, float] | None]] = []
        pending = "{"
        for pos, (rid, response) in enumerate(shown):
            pending += ("" if pos == 0 else ", ") + json.dumps(rid) + ": " + ("{" if keyed else "")
            for ci, (key, name) in enumerate(asked):
                label, probs = self._resolve(name, response, body)
                if rng.random() < self._bias(pos, len(shown)) and self.biased_label in _labels(body, rid, key):
                    label, probs = self.biased_label, None
                if keyed:
                    pending += ("" if ci == 0 else ", ") + json.dumps(key) + ": "
                pending += '{"reason": ' + json.dumps(self.reason) + ', "verdict": "'
                segments += [(pending, None), (label, probs or {label: 1.0})]
                pending = '"}'
            pending += "}" if keyed else ""
        segments.append((pending + "}", None))
        answer = "".join(t for t, _ in segments)
        if not body.get("logprobs"):
            return answer, None
        return answer, [_token(t, probs) for t, probs in segments]


def _labels(body: Mapping[str, Any], rid: str, key: str | None) -> tuple[str, ...]:
    """The labels a group request's schema allows for (response id, criterion key)."""
    schema = body.get("response_format", {}).get("json_schema", {}).get("schema", {})
    node = schema.get("properties", {}).get(rid, {})
    if key is not None:
        node = node.get("properties", {}).get(key, {})
    return tuple(node.get("properties", {}).get("verdict", {}).get("enum", ()))


def _token(text: str, probs: Mapping[str, float] | None) -> dict[str, Any]:
    probs = probs or {text: 1.0}
    top = [{"token": lab, "logprob": math.log(max(p, 1e-12))} for lab, p in probs.items()]
    return {"token": text, "logprob": math.log(max(probs.get(text, 1e-12), 1e-12)), "top_logprobs": top}


def token_logprobs(prefix: str, label: str, suffix: str, probs: Mapping[str, float] | None) -> list[dict[str, Any]]:
    """OpenAI-style ``logprobs.content`` for ``prefix + label + suffix`` with ``probs`` as the label
    token's alternatives (for scripted replies that carry label probabilities)."""
    return [_token(prefix, None), _token(label, probs or {label: 1.0}), _token(suffix, None)]


class JudgeServer:
    """Serve a :class:`ScriptedJudge` on 127.0.0.1 from a background thread."""

    def __init__(
        self,
        judge: ScriptedJudge | None = None,
        *,
        latency_s: float | Callable[[Mapping[str, Any]], float] = 0.0,
        faults: FaultPlan | None = None,
        port: int = 0,
        record_bodies: bool = True,
        count_tokens: Callable[[Mapping[str, Any]], int] | None = None,
    ):
        """``count_tokens(body)`` gives a request's prompt tokens (default: characters / 4 + 1)."""
        self.judge = judge or ScriptedJudge()
        self.count_tokens = count_tokens
        self.latency_s = latency_s
        self.faults = faults or FaultPlan()
        self.port = port
        self.record_bodies = record_bodies
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []
        self.arrivals: list[float] = []
        self.departures: list[float] = []
        self.tokens: list[tuple[float, int]] = []  # (arrival, prompt + completion tokens) of answered requests
        self.headers: list[dict[str, str]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset_stats(self) -> None:
        self.requests = self.in_flight = self.max_in_flight = 0
        self.bodies.clear()
        self.arrivals.clear()
        self.departures.clear()
        self.tokens.clear()
        self.headers.clear()

    # ------------------------------------------------------------------ request handling
    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        self.requests += 1
        n = self.requests
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        arrival = time.monotonic()
        self.arrivals.append(arrival)
        try:
            body = json.loads(await request.read())
            if self.record_bodies:
                self.bodies.append(body)
                self.headers.append(dict(request.headers))
            latency = self.latency_s(body) if callable(self.latency_s) else self.latency_s
            if latency:
                await asyncio.sleep(latency)
            fault = self.faults.draw(n, body)
            if fault is not None:
                if fault.hang_s:
                    await asyncio.sleep(fault.hang_s)
                if fault.status is not None:
                    headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
                    text = '{"error": "injected"}'
                    if fault.echo_headers:
                        text = json.dumps({"error": "injected", "headers": dict(request.headers)})
                    return web.Response(status=fault.status, text=text, headers=headers)
                if fault.body is not None:
                    return web.Response(status=200, text=fault.body, content_type="application/json")
            if fault is not None and fault.content is not None:
                text, logprobs = fault.content, None
            else:
                text, logprobs = self.judge.answer(body)
            if self.count_tokens is not None:
                prompt_tokens = int(self.count_tokens(body))
            else:
                prompt_tokens = sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4 + 1
            completion_tokens = len(text) // 4 + 1
            self.tokens.append((arrival, prompt_tokens + completion_tokens))
            choice: dict[str, Any] = {
                "index": 0, "finish_reason": fault.finish_reason if fault is not None else "stop",
                "message": {"role": "assistant", "content": text},
            }
            if logprobs is not None:
                choice["logprobs"] = {"content": logprobs}
            payload = {
                "id": f"cmpl-{n}", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
                "choices": [choice],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens},
            }
            return web.Response(body=json.dumps(payload).encode(), content_type="application/json")
        finally:
            self.in_flight -= 1
            self.departures.append(time.monotonic())

    def _app(self) -> Any:
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        async def models(_: Any) -> Any:
            return web.json_response({"data": [{"id": "scripted"}]})

        async def health(_: Any) -> Any:  # what routers (vllm-router) probe on a vLLM worker
            return web.Response(text="ok")

        app.router.add_get("/v1/models", models)
        app.router.add_get("/health", health)
        return app

    async def _start(self) -> None:
        from aiohttp import web

        self._runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=0.25)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, backlog=1024)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # the port the OS chose for port=0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> JudgeServer:
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            loop = self._loop
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._start())
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="judge-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("judge server did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        async def shutdown() -> None:
            await self._runner.cleanup()
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:  # handlers still sleeping (hangs, latency)
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        fut = asyncio.run_coroutine_threadsafe(shutdown(), self._loop)
        try:
            fut.result(timeout=5)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._loop = None

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def load_script(path: str) -> tuple[dict[str, Script], str | None]:
    """``(verdicts by criterion, default label or None)`` from a YAML/JSON script file."""
    from ..io.files import read_structured

    obj = read_structured(path, "judge script")
    default = None
    if isinstance(obj, Mapping) and "verdicts" in obj:
        default, obj = obj.get("default"), obj["verdicts"]
        if default is not None and not isinstance(default, str):
            raise ValueError(f"{path}: field 'default' must be a label, got {default!r}")
    if not isinstance(obj, Mapping):
        raise ValueError(f"{path}: expected a mapping of criterion name -> label or {{label: probability}}")
    verdicts: dict[str, Script] = {}
    for name, script in obj.items():
        if isinstance(script, Mapping) and all(isinstance(p, int | float) and not isinstance(p, bool)
                                               for p in script.values()):
            verdicts[str(name)] = {str(k): float(v) for k, v in script.items()}
        elif isinstance(script, str):
            verdicts[str(name)] = script
        else:
            raise ValueError(f"{path}: criterion {name!r}: expected a label or {{label: probability}}, got {script!r}")
    return verdicts, default


def spawn(latency_ms: float = 0.0, *args: str) -> tuple[subprocess.Popen, str]:
    """Start the server in its own process (``args``: more command-line options, e.g. ``--script``);
    returns ``(process, base_url)`` once it listens. The caller terminates the process."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "rubric_reward.testing.judge_server", "--port", "0",
                             "--latency-ms", str(latency_ms), *args], stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    if not line.startswith("PORT "):
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the judge server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def main(argv: list[str] | None = None) -> None:
    """Serve in the foreground (for benchmarks): prints ``PORT <n>`` once listening."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--default", default="MET", help="verdict label for criteria the script does not name")
    ap.add_argument("--script", help="YAML/JSON file: {criterion: label or {label: probability}}, optionally "
                    "under 'verdicts' next to a 'default' label (ordinal and nominal criteria need one)")
    args = ap.parse_args(argv)
    verdicts, default = load_script(args.script) if args.script else ({}, None)
    server = JudgeServer(ScriptedJudge(verdicts, default=default or args.default), latency_s=args.latency_ms / 1000,
                         port=args.port, record_bodies=False)

    async def serve() -> None:
        await server._start()
        print(f"PORT {server.port}", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
