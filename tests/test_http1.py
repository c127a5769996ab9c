"""The lean HTTP/1.1 client (judges/http1.py): framing, keep-alive, and that an answer is never read as
another request's, against a raw loopback server that scripts the exact bytes of each answer."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import struct

import pytest

from rubric_reward.judges import ChatRequest, Judge, JudgeConfig
from rubric_reward.judges.http1 import HTTP1Error, HTTP1Pool
from rubric_reward.results import ErrorKind
from rubric_reward.testing.judge_server import JudgeServer, ScriptedJudge


def _ok(body: bytes, *extra: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in extra)
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%b\r\n%b" % (len(body), head.encode(), body)


def _chunked(body: bytes, sizes=(3, 1, 100), trailer: bytes = b"") -> bytes:
    out, i, k = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"], 0, 0
    while i < len(body):
        n = sizes[k % len(sizes)]
        out.append(b"%x;ext=1\r\n%b\r\n" % (len(body[i:i + n]), body[i:i + n]))
        i, k = i + n, k + 1
    out.append(b"0\r\n" + trailer + b"\r\n")
    return b"".join(out)


class Scripted:
    """A loopback server: for each request (read in full), ``answer(n, body)`` gives the bytes to send and
    whether to close after; bytes are written in ``pieces`` random splits. Counts connections."""

    def __init__(self, answer, pieces: int = 1, seed: int = 0):
        self.answer, self.pieces, self.rng = answer, pieces, random.Random(seed)
        self.connections = 0
        self.requests = 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1/chat/completions"
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


async def _dead_port() -> int:
    """A loopback port nothing listens on (a server opened and closed)."""
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


async def _ask_once(base_url: str):
    """One chat call through a real Judge (no retries) and its reply."""
    judge = Judge(JudgeConfig(model="judge", base_url=base_url, max_retries=0, limit_scope="process"))
    try:
        return await judge.complete(ChatRequest(({"role": "user", "content": "hi"},)))
    finally:
        await judge.aclose()


def test_keep_alive_reuses_one_connection_and_sends_the_headers():
    seen = []

    def answer(n, body):
        seen.append(body)
        return _ok(b'{"n": %d}' % n), False

    async def main():
        async with Scripted(answer) as s:
            pool = HTTP1Pool({"Content-Type": "application/json", "Authorization": "Bearer k"})
            out = [await pool.post(s.url, b'{"q": %d}' % i, 5) for i in range(5)]
            await pool.close()
            return s.connections, out

    connections, out = run(main())
    assert connections == 1
    assert [json.loads(b)["n"] for _, _, b in out] == [1, 2, 3, 4, 5]
    assert seen == [b'{"q": %d}' % i for i in range(5)]
    assert all(status == 200 for status, _, _ in out)


@pytest.mark.parametrize("pieces", [1, 7, 200])
def test_framings_split_anywhere_give_the_exact_body(pieces):
    body = json.dumps({"choices": [{"message": {"content": "x" * 300}}]}).encode()
    framings = [
        lambda: (_ok(body), False),
        lambda: (_chunked(body), False),
        lambda: (_chunked(body, trailer=b"X-Trailer: 1\r\n"), False),
        lambda: (b"HTTP/1.1 100 Continue\r\n\r\n" + _ok(body), False),
        lambda: (b"HTTP/1.1 200 OK\r\n\r\n" + body, True),  # no length: the body ends with the connection
        lambda: (_ok(body, "Connection: close"), True),
    ]

    async def main():
        async with Scripted(lambda n, _: framings[(n - 1) % len(framings)](), pieces=pieces, seed=pieces) as s:
            pool = HTTP1Pool()
            out = [await pool.post(s.url, b"{}", 5) for _ in range(2 * len(framings))]
            await pool.close()
            return s.connections, out

    connections, out = run(main())
    assert [b for _, _, b in out] == [body] * (2 * len(framings))
    # a close-framed or a Connection: close answer ends its connection (answers 5, 6, 11 and 12 of 12); the
    # others keep theirs
    assert connections == 4


def test_headers_are_lower_case_and_errors_keep_their_status():
    async def main():
        async with Scripted(lambda n, _: (b"HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\nContent-Length: 4\r\n\r\nslow",
                                          False)) as s:
            pool = HTTP1Pool()
            status, headers, body = await pool.post(s.url, b"{}", 5)
            await pool.close()
            return status, headers, body

    status, headers, body = run(main())
    assert (status, headers["retry-after"], body) == (429, "7", b"slow")


@pytest.mark.parametrize("raw, match", [
    (b"HTTP/1.1 2xx OK\r\nContent-Length: 0\r\n\r\n", "status line"),
    (b"SPDY/3 200 OK\r\nContent-Length: 0\r\n\r\n", "status line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", "conflicting"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", "chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n", "CRLF"),
    (b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n", "header"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: \xb23\r\n\r\nabc", "Content-Length"),  # a superscript two
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n", "chunk size"),
    (b"HTTP/1.1 \xb2\xb2\xb2 OK\r\nContent-Length: 0\r\n\r\n", "status line"),
])
def test_malformed_answers_are_errors_and_close_the_connection(raw, match):
    async def main():
        async with Scripted(lambda n, _: (raw, False) if n == 1 else (_ok(b"fine"), False)) as s:
            pool = HTTP1Pool()
            with pytest.raises(HTTP1Error, match=match):
                await pool.post(s.url, b"{}", 5)
            after = await pool.post(s.url, b"{}", 5)
            await pool.close()
            return s.connections, after

    connections, after = run(main())
    assert after[2] == b"fine" and connections == 2


def test_a_server_that_closes_mid_answer_or_before_it_is_an_error():
    answers = {1: (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", True), 2: (b"", True)}

    async def main():
        async with Scripted(lambda n, _: answers.get(n, (_ok(b"ok"), False))) as s:
            pool = HTTP1Pool()
            with pytest.raises(HTTP1Error, match="middle of an answer"):
                await pool.post(s.url, b"{}", 5)
            with pytest.raises(HTTP1Error, match="before any answer"):
                await pool.post(s.url, b"{}", 5)
            out = await pool.post(s.url, b"{}", 5)
            await pool.close()
            return out

    assert run(main())[2] == b"ok"


def test_bytes_beyond_an_answer_are_never_read_as_the_next_requests_answer():
    # a server that answers request 1 twice: the copy must not become request 2's answer
    def answer(n, body):
        return (_ok(body) * 2 if n == 1 else _ok(body)), False

    async def main():
        async with Scripted(answer) as s:
            pool = HTTP1Pool()
            first = await pool.post(s.url, b'"one"', 5)
            second = await pool.post(s.url, b'"two"', 5)
            await pool.close()
            return s.connections, first, second

    connections, first, second = run(main())
    assert (first[2], second[2]) == (b'"one"', b'"two"')
    assert connections == 2


def test_a_timeout_closes_the_connection_and_a_late_answer_goes_nowhere():
    async def main():
        async with Scripted(lambda n, body: (None, False) if n == 1 else (_ok(body), False)) as s:
            pool = HTTP1Pool()
            loop = asyncio.get_running_loop()
            t = loop.time()
            with pytest.raises(TimeoutError):
                await pool.post(s.url, b'"late"', 0.2)
            took = loop.time() - t
            out = await pool.post(s.url, b'"next"', 5)
            await pool.close()
            return took, out, s.connections

    took, out, connections = run(main())
    assert 0.15 < took < 2 and out[2] == b'"next"' and connections == 2


def test_a_cancelled_caller_leaves_no_connection_behind_for_reuse():
    async def main():
        async with Scripted(lambda n, body: (None, False) if n == 1 else (_ok(body), False)) as s:
            pool = HTTP1Pool()
            task = asyncio.ensure_future(pool.post(s.url, b'"cancelled"', 5))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            out = await pool.post(s.url, b'"next"', 5)
            await pool.close()
            return out, s.connections

    out, connections = run(main())
    assert out[2] == b'"next"' and connections == 2


def test_an_idle_connection_the_server_closed_is_not_reused():
    async def main():
        async with Scripted(lambda n, body: (_ok(body, "Keep-Alive: timeout=0"), n == 1)) as s:
            pool = HTTP1Pool()
            await pool.post(s.url, b"1", 5)  # the server closes after this one without saying so
            await asyncio.sleep(0.1)
            out = await pool.post(s.url, b"2", 5)
            await pool.close()
            return out

    assert run(main())[2] == b"2"


def test_connection_refused_is_an_http1_error():
    async def main():
        with pytest.raises(HTTP1Error, match="cannot connect"):
            await HTTP1Pool().post(f"http://127.0.0.1:{await _dead_port()}/v1", b"{}", 5)

    run(main())


def test_many_concurrent_requests_each_get_their_own_answer():
    # random framing and random splits, 64 callers: every answer echoes its own request
    rng = random.Random(3)

    def answer(n, body):
        kind = rng.randrange(3)
        if kind == 0:
            return _ok(body), False
        if kind == 1:
            return _chunked(body, sizes=(rng.randrange(1, 9),)), False
        return b"HTTP/1.1 200 OK\r\n\r\n" + body, True

    async def main():
        async with Scripted(answer, pieces=5, seed=1) as s:
            pool = HTTP1Pool()
            bodies = [json.dumps({"i": i, "pad": "y" * (i % 50)}).encode() for i in range(500)]
            sem = asyncio.Semaphore(64)

            async def one(b):
                async with sem:
                    return (await pool.post(s.url, b, 5))[2]

            out = await asyncio.gather(*(one(b) for b in bodies))
            await pool.close()
            return bodies, out

    bodies, out = run(main())
    assert out == bodies


def test_the_backend_gives_the_same_replies_through_either_client():
    request = ChatRequest(({"role": "user", "content": "hello"},))
    with JudgeServer(ScriptedJudge({})) as server:
        async def ask(client):
            judge = Judge(JudgeConfig(model="judge", base_url=server.base_url, http_client=client, max_retries=0,
                                      limit_scope="process"))
            try:
                return [(r.text, r.error) for r in await asyncio.gather(*(judge.complete(request) for _ in range(3)))]
            finally:
                await judge.aclose()

        assert run(ask("auto")) == run(ask("aiohttp"))


def test_a_dead_endpoint_is_a_connection_error_reply_through_the_backend():
    async def main():
        return await _ask_once(f"http://127.0.0.1:{await _dead_port()}/v1")

    reply = run(main())
    assert reply.error is not None and reply.error.kind is ErrorKind.CONNECTION and "cannot connect" in str(reply.error)


def test_each_request_times_out_at_its_own_deadline_under_one_timer():
    # requests 1-3 hang; 4 answers: one timer for the pool must still cut each hanging one at its own deadline
    async def main():
        async with Scripted(lambda n, body: (None, False) if n <= 3 else (_ok(body), False)) as s:
            pool = HTTP1Pool()
            loop = asyncio.get_running_loop()
            start = loop.time()

            async def timed(body, timeout):
                try:
                    return (await pool.post(s.url, body, timeout))[2]
                except TimeoutError:
                    return loop.time() - start

            first = [asyncio.ensure_future(timed(b"%d" % i, t)) for i, t in enumerate((0.6, 0.2, 0.4))]
            await asyncio.sleep(0.05)
            ok = await timed(b"fine", 5)
            out = await asyncio.gather(*first)
            await pool.close()
            return ok, out

    ok, out = run(main())
    assert ok == b"fine"
    for took, timeout in zip(out, (0.6, 0.2, 0.4), strict=True):
        assert timeout <= took < timeout + 1.0, out  # never early (the upper bound is slack for a loaded machine)
    assert out[1] < out[2] < out[0]  # each at its own deadline, not all at the latest


def test_the_body_is_byte_for_byte_json_dumps_of_its_fields():
    from rubric_reward.judges.http import OpenAIHTTPBackend

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
        request = ChatRequest(messages, schema={"type": "object", "enum": [tail]} if i % 2 else None,
                              max_tokens=rng.choice([0, 64]), logprobs=bool(i % 3 == 0),
                              affinity=rng.choice([prefix, None, user, prefix[:3]]))
        for backend in backends:
            assert backend.encode(request) == json.dumps(backend.body(request), ensure_ascii=False,
                                                         separators=(",", ":")).encode(), (i, request)


def test_credentials_in_the_url_go_through_aiohttp_which_sends_them():
    # the lean client would drop user:password@ silently; such URLs take aiohttp, which sends Basic auth
    seen = []

    def answer(n, body):
        return _ok(b'{"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}'), False

    async def main():
        async with Scripted(answer) as s:
            original = s._handle

            async def spy(reader, writer):
                peek = await reader.readuntil(b"\r\n\r\n")
                seen.append(peek)
                reader._buffer[:0] = peek  # put the head back for the scripted handler
                await original(reader, writer)

            s.server.close()
            s.server = await asyncio.start_server(spy, "127.0.0.1", 0)
            return await _ask_once(f"http://user:pw@127.0.0.1:{s.server.sockets[0].getsockname()[1]}/v1")

    reply = run(main())
    assert reply.error is None and reply.text == "x"
    assert b"authorization: basic" in seen[0].lower()
    with pytest.raises(ValueError, match="without credentials"):
        run(HTTP1Pool().post("http://user:pw@127.0.0.1:1/v1", b"{}", 1))


def test_a_reset_ends_a_close_delimited_answer_as_an_error_not_a_short_body():
    async def main():
        async def handler(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\n\r\n{\"partial\": ")
            await writer.drain()
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = a reset (RST)
            writer.transport.abort()

        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
        try:
            with pytest.raises(HTTP1Error, match="middle of an answer"):
                await HTTP1Pool().post(url, b"{}", 5)
        finally:
            server.close()

    run(main())


def test_a_bad_port_is_a_connection_error_reply_as_on_aiohttp():
    reply = run(_ask_once("http://127.0.0.1:abc/v1"))
    assert reply.error is not None and reply.error.kind is ErrorKind.CONNECTION and "bad URL" in str(reply.error)
