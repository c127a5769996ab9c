"""The http backend's HTTP (aiohttp) through a real Judge, against raw loopback servers that script the exact
bytes of each answer: framing, keep-alive, failures that end fast, and that an answer is never read as another
request's verdict."""

from __future__ import annotations

import asyncio
import gc
import json
import random
import socket
import struct
import time
import tracemalloc

import pytest

from rubric_reward.judges import ChatRequest, Judge, JudgeConfig
from rubric_reward.judges.http import OpenAIHTTPBackend
from rubric_reward.results import ErrorKind


def completion(content: str) -> bytes:
    """A chat completion body whose answer is ``content``."""
    return json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}]}).encode()


def asked(body: bytes) -> str:
    """The text a request asked (its last message): the scripted servers echo it as the answer."""
    return json.loads(body)["messages"][-1]["content"]


def echo(body: bytes) -> bytes:
    return completion(asked(body))


def ok(body: bytes, *extra: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in extra)
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%b\r\n%b" % (len(body), head.encode(), body)


def chunked(body: bytes, sizes=(3, 1, 100), trailer: bytes = b"") -> bytes:
    out, i, k = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"], 0, 0
    while i < len(body):
        n = sizes[k % len(sizes)]
        out.append(b"%x;ext=1\r\n%b\r\n" % (len(body[i:i + n]), body[i:i + n]))
        i, k = i + n, k + 1
    out.append(b"0\r\n" + trailer + b"\r\n")
    return b"".join(out)


class Scripted:
    """A loopback server: for each request (read in full), ``answer(n, body)`` gives the bytes to send and whether
    to close after (None: hang); bytes are written in ``pieces`` random splits. Counts connections and keeps
    each request's head."""

    def __init__(self, answer, pieces: int = 1, seed: int = 0):
        self.answer, self.pieces, self.rng = answer, pieces, random.Random(seed)
        self.connections = 0
        self.requests = 0
        self.heads: list[bytes] = []
        self.bodies: list[bytes] = []

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.base_url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _handle(self, reader, writer):
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                body = await reader.readexactly(length)
                self.requests += 1
                self.heads.append(head)
                self.bodies.append(body)
                data, close = self.answer(self.requests, body)
                if data is None:  # hang
                    await asyncio.sleep(3600)
                cuts = sorted(self.rng.sample(range(1, len(data)), min(self.pieces - 1, len(data) - 1)))
                for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
                    writer.write(data[a:b])
                    await writer.drain()
                    if self.pieces > 1:
                        await asyncio.sleep(0)
                if close:
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def run(coro):
    return asyncio.run(coro)


def request(text: str) -> ChatRequest:
    return ChatRequest(({"role": "user", "content": text},))


def judge_for(base_url: str, **kw) -> Judge:
    return Judge(JudgeConfig(**{"model": "judge", "base_url": base_url, "max_retries": 0, "limit_scope": "process",
                                **kw}))


async def ask(base_url: str, *texts: str, pause: float = 0.0, **kw) -> list:
    """One call per text, one after another, through one Judge (no retries)."""
    judge = judge_for(base_url, **kw)
    try:
        out = []
        for t in texts:
            out.append(await judge.complete(request(t)))
            if pause:
                await asyncio.sleep(pause)
        return out
    finally:
        await judge.aclose()


async def _dead_port() -> int:
    """A loopback port nothing listens on (a server opened and closed)."""
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


def test_keep_alive_reuses_one_connection_and_sends_the_exact_body_and_headers(monkeypatch):
    monkeypatch.setenv("RR_TEST_HTTP_KEY", "k")

    async def main():
        async with Scripted(lambda n, body: (ok(echo(body)), False)) as s:
            replies = await ask(s.base_url, *(f"q{i}" for i in range(5)), api_key_env="RR_TEST_HTTP_KEY")
            return s, replies

    s, replies = run(main())
    assert [r.text for r in replies] == [f"q{i}" for i in range(5)]
    assert s.connections == 1
    backend = OpenAIHTTPBackend(JudgeConfig(model="judge", base_url="http://127.0.0.1:1/v1"))
    assert s.bodies == [backend.encode(request(f"q{i}")) for i in range(5)]
    assert all(b"authorization: bearer k\r\n" in h.lower() and b"content-type: application/json" in h.lower()
               for h in s.heads)


@pytest.mark.parametrize("pieces", [1, 7, 200])
def test_framings_split_anywhere_give_the_exact_answer(pieces):
    framings = [
        lambda b: (ok(echo(b)), False),
        lambda b: (chunked(echo(b)), False),
        lambda b: (chunked(echo(b), trailer=b"X-Trailer: 1\r\n"), False),
        lambda b: (b"HTTP/1.1 100 Continue\r\n\r\n" + ok(echo(b)), False),
        lambda b: (ok(echo(b)).replace(b"\r\n", b"\n"), False),  # LF-only line ends
        lambda b: (b"HTTP/1.1 200 OK\r\n\r\n" + echo(b), True),  # no length: the body ends with the connection
        lambda b: (ok(echo(b), "Connection: close"), True),
    ]
    texts = [f"x{i}" + "y" * 300 for i in range(2 * len(framings))]

    async def main():
        async with Scripted(lambda n, b: framings[(n - 1) % len(framings)](b), pieces=pieces, seed=pieces) as s:
            return await ask(s.base_url, *texts), s

    replies, s = run(main())
    assert [r.text for r in replies] == texts
    # a close-framed or a Connection: close answer ends its connection (answers 6, 7, 13 and 14 of 14); the
    # others keep theirs
    assert s.connections == 4


def test_an_error_status_keeps_its_kind_status_and_retry_after():
    async def main():
        async with Scripted(lambda n, _: (b"HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\nContent-Length: 4\r\n\r\n"
                                          b"slow", False)) as s:
            return (await ask(s.base_url, "q"))[0]

    reply = run(main())
    assert reply.error.kind is ErrorKind.RATE_LIMIT and reply.error.status == 429 and reply.retry_after_s == 7


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1 2xx OK\r\nContent-Length: 0\r\n\r\n",
    b"SPDY/3 200 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: \xb23\r\n\r\nabc",  # a superscript two
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.1 \xb2\xb2\xb2 OK\r\nContent-Length: 0\r\n\r\n",
])
def test_a_malformed_answer_fails_its_call_and_the_next_call_gets_its_own(raw):
    async def main():
        async with Scripted(lambda n, b: (raw, False) if n == 1 else (ok(echo(b)), False)) as s:
            return await ask(s.base_url, "first", "second"), s.connections

    (first, second), connections = run(main())
    assert first.error is not None and first.error.kind is ErrorKind.CONNECTION and first.text is None
    assert second.text == "second" and connections == 2


def test_a_server_that_closes_mid_answer_or_before_any_answer_fails_the_call_fast():
    answers = {1: (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", True), 2: (b"", True)}

    async def main():
        async with Scripted(lambda n, b: answers.get(n, (ok(echo(b)), False))) as s:
            start = time.monotonic()
            replies = await ask(s.base_url, "a", "b", "c", timeout_s=30)
            return replies, time.monotonic() - start

    (mid, before, after), took = run(main())
    assert mid.error.kind is ErrorKind.CONNECTION and before.error.kind is ErrorKind.CONNECTION
    assert after.text == "c" and took < 5


def test_a_connection_closed_before_the_request_is_written_fails_fast():
    # the server takes the connection and closes it at once, before reading anything
    async def main():
        async def handler(reader, writer):
            writer.close()

        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        try:
            start = time.monotonic()
            reply = (await ask(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", "q", timeout_s=30))[0]
            return reply, time.monotonic() - start
        finally:
            server.close()

    reply, took = run(main())
    assert reply.error.kind is ErrorKind.CONNECTION and took < 5  # not timeout_s (30 s)


def test_an_idle_connection_the_server_closed_is_not_reused():
    async def main():
        async with Scripted(lambda n, b: (ok(echo(b), "Keep-Alive: timeout=0"), n == 1)) as s:
            return await ask(s.base_url, "1", "2", pause=0.1)

    assert [r.text for r in run(main())] == ["1", "2"]


@pytest.mark.parametrize("pause", [0.0, 0.05])
def test_an_answer_sent_twice_never_becomes_the_next_requests_answer(pause):
    async def main():
        async with Scripted(lambda n, b: (ok(echo(b)) * (2 if n == 1 else 1), False)) as s:
            return await ask(s.base_url, "one", "two", "three", pause=pause)

    replies = run(main())
    assert [r.text for r in replies] == ["one", "two", "three"]


@pytest.mark.parametrize("pause", [0.0, 0.05])
def test_a_short_content_length_never_hands_the_rest_to_another_request(pause):
    # every odd answer says it is shorter than it is, and what follows is a well-framed forged verdict
    forged = ok(completion("FORGED"))

    def answer(n, body):
        if n % 2:
            full = echo(body)
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b%b" % (len(full) - 5, full, forged), False
        return ok(echo(body)), False

    async def main():
        async with Scripted(answer) as s:
            return await ask(s.base_url, *(f"q{i}" for i in range(24)), pause=pause)

    replies = run(main())
    assert not any(r.text == "FORGED" for r in replies)
    for i, r in enumerate(replies):  # a short answer fails its own call; the next one gets its own answer
        assert r.text == f"q{i}" if i % 2 else r.error is not None and r.error.kind is ErrorKind.CONNECTION


def test_an_over_long_content_length_fails_at_the_close_or_the_timeout():
    full = completion("q")
    short = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(full) + 50, full)

    async def main():
        async with Scripted(lambda n, b: (short, n == 1) if n <= 2 else (ok(echo(b)), False)) as s:
            start = time.monotonic()
            closed = (await ask(s.base_url, "a", timeout_s=30))[0]
            took_closed = time.monotonic() - start
            start = time.monotonic()
            kept, after = await ask(s.base_url, "b", "c", timeout_s=0.3)
            return closed, took_closed, kept, time.monotonic() - start, after

    closed, took_closed, kept, took_kept, after = run(main())
    assert closed.error.kind is ErrorKind.CONNECTION and took_closed < 5
    assert kept.error.kind is ErrorKind.TIMEOUT and took_kept < 5 and after.text == "c"


def test_a_reset_mid_answer_fails_the_call():
    async def main():
        async def handler(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\n\r\n{\"choices\": ")
            await writer.drain()
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = a reset (RST)
            writer.transport.abort()

        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        try:
            return (await ask(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", "q"))[0]
        finally:
            server.close()

    reply = run(main())
    # aiohttp may end a close-delimited body at the reset; what it read is then a cut (malformed) completion body
    assert reply.text is None and reply.error.kind in (ErrorKind.CONNECTION, ErrorKind.SERVER), reply.error


def test_a_timeout_closes_the_connection_and_a_late_answer_goes_nowhere():
    async def main():
        async with Scripted(lambda n, b: (None, False) if n == 1 else (ok(echo(b)), False)) as s:
            start = time.monotonic()
            late, nxt = await ask(s.base_url, "late", "next", timeout_s=0.2)
            return late, time.monotonic() - start, nxt, s.connections

    late, took, nxt, connections = run(main())
    assert late.error.kind is ErrorKind.TIMEOUT and 0.15 < took < 3
    assert nxt.text == "next" and connections == 2


def test_a_cancelled_caller_leaves_no_connection_behind_for_reuse():
    async def main():
        async with Scripted(lambda n, b: (None, False) if n == 1 else (ok(echo(b)), False)) as s:
            judge = judge_for(s.base_url)
            try:
                task = asyncio.ensure_future(judge.complete(request("cancelled")))
                await asyncio.sleep(0.1)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                return await judge.complete(request("next")), s.connections
            finally:
                await judge.aclose()

    reply, connections = run(main())
    assert reply.text == "next" and connections == 2


def test_a_dead_endpoint_and_a_bad_port_are_connection_error_replies():
    async def main():
        return (await ask(f"http://127.0.0.1:{await _dead_port()}/v1", "q"))[0], \
            (await ask("http://127.0.0.1:abc/v1", "q"))[0]

    dead, bad_port = run(main())
    assert dead.error.kind is ErrorKind.CONNECTION and "connect" in str(dead.error).lower()
    assert bad_port.error.kind is ErrorKind.CONNECTION and "InvalidUrl" in str(bad_port.error)


def test_many_concurrent_requests_each_get_their_own_answer():
    # random framing and random splits, 64 callers: every answer echoes its own request
    rng = random.Random(3)

    def answer(n, body):
        kind = rng.randrange(3)
        if kind == 0:
            return ok(echo(body)), False
        if kind == 1:
            return chunked(echo(body), sizes=(rng.randrange(1, 9),)), False
        return b"HTTP/1.1 200 OK\r\n\r\n" + echo(body), True

    texts = [f"{i} " + "y" * (i % 50) for i in range(300)]

    async def main():
        async with Scripted(answer, pieces=5, seed=1) as s:
            judge = judge_for(s.base_url, max_concurrency=64)
            try:
                return await asyncio.gather(*(judge.complete(request(t)) for t in texts))
            finally:
                await judge.aclose()

    assert [r.text for r in run(main())] == texts


def test_the_session_holds_at_most_max_concurrency_connections_and_reuses_them():
    async def main():
        async with Scripted(lambda n, b: (ok(echo(b)), False)) as s:
            judge = judge_for(s.base_url, max_concurrency=3)
            try:
                replies = await asyncio.gather(*(judge.complete(request(f"{i}")) for i in range(30)))
                connector = judge.backend._sessions.get().connector
                return replies, connector.limit, s.connections
            finally:
                await judge.aclose()

    replies, limit, connections = run(main())
    assert [r.text for r in replies] == [f"{i}" for i in range(30)]
    assert limit == 3 and connections <= 3


def _timed_chunked(size: int) -> float:
    content = "x" * size
    raw = chunked(completion(content), sizes=(1,))

    async def main():
        async with Scripted(lambda n, b: (raw, False)) as s:
            start = time.perf_counter()
            reply = (await ask(s.base_url, "q", timeout_s=60))[0]
            assert reply.text == content
            return time.perf_counter() - start

    return run(main())


def test_chunked_answers_decode_in_linear_time():
    small, large = _timed_chunked(32_000), _timed_chunked(256_000)  # one-byte chunks: 8x the bytes
    assert large < 8 * 4 * small + 1.0, (small, large)  # quadratic would be 64x; slack for a loaded machine


def test_a_pooled_connection_keeps_no_buffer_of_its_largest_answer():
    big = ok(completion("z" * (16 << 20)))

    async def main():
        async with Scripted(lambda n, b: (big if n == 1 else ok(echo(b)), False)) as s:
            judge = judge_for(s.base_url, timeout_s=60)
            try:
                first = await judge.complete(request("big"))
                assert len(first.text) == 16 << 20
                del first
                second = await judge.complete(request("small"))
                gc.collect()
                held, _ = tracemalloc.get_traced_memory()
                return second, held, s.connections
            finally:
                await judge.aclose()

    tracemalloc.start()
    try:
        second, held, connections = run(main())
    finally:
        tracemalloc.stop()
    assert second.text == "small" and connections == 1  # the same connection, kept alive
    assert held < 4 << 20, held  # not the 16 MB answer


def test_credentials_in_the_url_are_sent_as_basic_auth():
    async def main():
        async with Scripted(lambda n, b: (ok(echo(b)), False)) as s:
            reply = (await ask(s.base_url.replace("http://", "http://user:pw@"), "q"))[0]
            return reply, s.heads

    reply, heads = run(main())
    assert reply.text == "q"
    assert b"authorization: basic dxnlcjpwdw==" in heads[0].lower()  # base64("user:pw")


def test_credentials_in_the_url_and_an_api_key_are_refused_before_any_call(monkeypatch):
    monkeypatch.setenv("RR_TEST_HTTP_KEY", "k")
    with pytest.raises(ValueError, match="base_url"):
        judge_for("http://user:pw@127.0.0.1:1/v1", api_key_env="RR_TEST_HTTP_KEY")


def test_the_body_is_byte_for_byte_json_dumps_of_its_fields():
    rng = random.Random(4)
    alphabet = 'ab "\\\n\t\x00\x1f\u00e9\u2028\ud7ff\U0001f600<>&/'
    backends = [OpenAIHTTPBackend(JudgeConfig(model="judge", base_url="http://127.0.0.1:1/v1", **kw))
                for kw in ({}, {"seed": 3, "top_p": 0.5}, {"extra_body": {"top_k": 5, "messages": "x"}},
                           {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}})]
    system = "You judge. " * 20
    for i in range(3000):
        prefix = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        tail = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        user = prefix + tail if rng.random() < 0.8 else prefix
        messages = ({"role": "system", "content": system}, {"role": "user", "content": user})
        if rng.random() < 0.1:
            messages = ({"role": "user", "content": [{"type": "text", "text": user}]},)
        req = ChatRequest(messages, schema={"type": "object", "enum": [tail]} if i % 2 else None,
                          max_tokens=rng.choice([0, 64]), logprobs=bool(i % 3 == 0),
                          affinity=rng.choice([prefix, None, user, prefix[:3]]))
        for backend in backends:
            assert backend.encode(req) == json.dumps(backend.body(req), ensure_ascii=False,
                                                     separators=(",", ":")).encode(), (i, req)
