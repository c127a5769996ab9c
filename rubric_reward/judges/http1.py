"""A keep-alive HTTP/1.1 client for the judge's ``http://`` endpoints (``https://`` goes through aiohttp).

Why it exists: at 0 ms judge latency aiohttp's ``ClientSession`` spends about 0.1 ms of client CPU per
call on request objects, header multidicts, tracing hooks and timers; a judge call needs none of that.
This client writes one prebuilt request head plus the body and reads the answer straight off an
``asyncio.Protocol`` (about 0.04 ms per call on the same machine, ``benchmarks/judge_throughput.py``).

Scope: ``POST`` of a JSON body to a plain-HTTP origin without credentials in the URL (a ``vllm serve``
replica, a router, a local server); responses framed by ``Content-Length``, ``chunked`` or connection close;
1xx answers skipped. No TLS, proxies, redirects, cookies or compression (none is asked for: no
``Accept-Encoding``).

Safety: one request at a time per connection (no pipelining), and a connection goes back to the pool
only after a response framed exactly, with no byte beyond it; a byte nobody asked for, a framing error,
a timeout or a cancelled caller closes the connection. So an answer can never be read as another
request's. Every failure raises :class:`HTTP1Error` (a ``ConnectionError``) or ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HTTP1Error", "HTTP1Pool"]

_MAX_HEAD = 64 * 1024  # bytes of status line + headers before giving up on a response
_NO_BODY = frozenset({204, 304})
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


class HTTP1Error(ConnectionError):
    """The connection failed or the server's answer was not valid HTTP/1.1 framing."""


class _Target:
    """A URL split once: where to connect and the request head up to the ``Content-Length`` value."""

    __slots__ = ("head", "host", "origin", "port")

    def __init__(self, url: str, headers: str):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or "@" in parts.netloc:
            raise ValueError("not a plain-HTTP URL without credentials")  # the URL itself may hold a secret
        self.host = parts.hostname
        try:
            self.port = parts.port or 80
        except ValueError as exc:  # "host:abc": a connection failure of this call, as aiohttp reports it
            raise HTTP1Error(f"bad URL: {exc}") from None
        self.origin = (self.host, self.port)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        if parts.port:
            netloc += f":{parts.port}"
        self.head = f"POST {path} HTTP/1.1\r\nHost: {netloc}\r\n{headers}Content-Length: ".encode("latin-1")


class _Conn(asyncio.Protocol):
    """One connection: at most one request in flight, its answer parsed as the bytes arrive."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future | None = None
        self.buf = bytearray()
        self.lost = False
        self.reusable = False  # set once an answer was framed exactly and the server keeps the connection
        self.keep_after = False  # whether the server keeps the connection after the last answer
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.headers: dict[str, str] | None = None
        self.framing = ""  # "length", "chunked" or "close"
        self.length = 0
        self.body_at = 0
        self.keep = True

    # ---------------------------------------------------------------- asyncio.Protocol
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        w = self.waiter
        if w is None or w.done():  # bytes nobody asked for: this connection can no longer be trusted
            self.close()
            return
        self.buf += data
        try:
            answer = self._parse()
        except Exception as exc:  # noqa: BLE001 - any unreadable answer fails its request, never the loop
            self.close()
            w.set_exception(exc if isinstance(exc, HTTP1Error) else HTTP1Error(f"unreadable answer: {exc!r:.200}"))
            return
        if answer is not None:
            w.set_result(answer)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = True
        w = self.waiter
        if w is None or w.done():
            return
        if self.headers is not None and self.framing == "close" and exc is None:  # a clean close ends the body
            w.set_result((self.status, self.headers, bytes(self.buf[self.body_at:])))
            return
        got = "before any answer" if not self.buf else "in the middle of an answer"
        w.set_exception(HTTP1Error(f"the server closed the connection {got}" + (f": {exc}" if exc else "")))

    # ---------------------------------------------------------------- state
    @property
    def usable(self) -> bool:
        return not self.lost and self.transport is not None and not self.transport.is_closing()

    def _expire(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_exception(TimeoutError())
        self.close()

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # ---------------------------------------------------------------- framing
    def _parse(self) -> tuple[int, dict[str, str], bytes] | None:
        buf = self.buf
        while self.headers is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    raise HTTP1Error(f"no end of headers within {_MAX_HEAD} bytes")
                return None
            self._head(bytes(buf[:end]))
            if 100 <= self.status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
                del buf[:end + 4]
                self._reset()
                continue
            self.body_at = end + 4
        start = self.body_at
        if self.framing == "length":
            stop = start + self.length
            if len(buf) < stop:
                return None
            return self._done(bytes(buf[start:stop]), stop)
        if self.framing == "chunked":
            found = _dechunk(buf, start)
            if found is None:
                return None
            return self._done(*found)
        return None  # "close": the body ends with the connection

    def _done(self, body: bytes, stop: int) -> tuple[int, dict[str, str], bytes]:
        del self.buf[:stop]
        answer = (self.status, self.headers or {}, body)
        self.keep_after = self.keep
        self._reset()
        return answer

    def _head(self, raw: bytes) -> None:
        lines = raw.decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)
        if len(status) < 2 or not status[0].startswith("HTTP/1.") or not _digits(status[1], 3):
            raise HTTP1Error(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        self.status = code = int(status[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise HTTP1Error(f"malformed header line: {line[:80]!r}")
            key, text = name.lower(), value.strip()
            if key in headers:
                if key == "content-length" and headers[key] != text:
                    raise HTTP1Error("conflicting Content-Length headers")
                if key != "content-length":
                    text = f"{headers[key]}, {text}"
            headers[key] = text
        self.headers = headers
        connection = headers.get("connection", "").lower()
        self.keep = status[0] == "HTTP/1.1" and "close" not in connection
        coding = headers.get("transfer-encoding")
        if code in _NO_BODY or 100 <= code < 200:
            self.framing, self.length = "length", 0
        elif coding is not None:
            if coding.lower().rsplit(",", 1)[-1].strip() == "chunked":
                self.framing = "chunked"
            else:
                self.framing, self.keep = "close", False
            if "content-length" in headers:  # both: the coding wins, and the connection is not reused (RFC 9112 6.3)
                self.keep = False
        elif "content-length" in headers:
            value = headers["content-length"]
            if not _digits(value):
                raise HTTP1Error(f"bad Content-Length: {value[:40]!r}")
            self.framing, self.length = "length", int(value)
        else:
            self.framing, self.keep = "close", False


class _Deadlines:
    """One timer for every exchange in flight on a loop: armed at the earliest deadline, it expires the exchanges
    past theirs and re-arms at the next (a timer per request would cost a handle and two heap operations each)."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.waiting: dict[_Conn, float] = {}
        self.timer: asyncio.TimerHandle | None = None
        self.at = math.inf

    def add(self, conn: _Conn, deadline: float) -> None:
        self.waiting[conn] = deadline
        if deadline < self.at:
            self._arm(deadline)

    def discard(self, conn: _Conn) -> None:
        self.waiting.pop(conn, None)

    def _arm(self, at: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.at = at
        self.timer = self.loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self.timer, self.at = None, math.inf
        now = self.loop.time()
        for conn in [c for c, d in self.waiting.items() if d <= now]:
            del self.waiting[conn]
            conn._expire()
        if self.waiting:
            self._arm(min(self.waiting.values()))

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer, self.at = None, math.inf


def _digits(text: str, n: int | None = None) -> bool:
    """Whether ``text`` is ASCII digits only (``n`` of them, if given): ``str.isdigit`` alone takes "²"."""
    return bool(text) and text.isascii() and text.isdigit() and (n is None or len(text) == n)


def _dechunk(buf: bytearray, at: int) -> tuple[bytes, int] | None:
    """The body of a complete chunked message starting at ``at`` and the offset after it, or None if incomplete."""
    parts = []
    while True:
        eol = buf.find(b"\r\n", at)
        if eol < 0:
            if len(buf) - at > 1024:
                raise HTTP1Error("chunk size line too long")
            return None
        size_text = bytes(buf[at:eol]).split(b";", 1)[0].strip()
        if not _HEX.fullmatch(size_text):
            raise HTTP1Error(f"bad chunk size: {size_text[:40]!r}")
        size = int(size_text, 16)
        at = eol + 2
        if size == 0:  # the last chunk, then optional trailer lines and an empty line
            if buf[at:at + 2] == b"\r\n":
                return b"".join(parts), at + 2
            end = buf.find(b"\r\n\r\n", at)
            if end < 0:
                if len(buf) - at > _MAX_HEAD:
                    raise HTTP1Error(f"no end of trailers within {_MAX_HEAD} bytes")
                return None
            return b"".join(parts), end + 4
        if len(buf) < at + size + 2:
            return None
        if buf[at + size:at + size + 2] != b"\r\n":
            raise HTTP1Error("chunk not followed by CRLF")
        parts.append(bytes(buf[at:at + size]))
        at += size + 2


class HTTP1Pool:
    """Keep-alive connections of one event loop to any number of plain-HTTP origins.

    ``headers`` are sent with every request (after ``Host``, before ``Content-Length``).
    """

    def __init__(self, headers: Mapping[str, str] | None = None):
        self._headers = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._targets: dict[str, _Target] = {}
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._open: set[_Conn] = set()
        self._deadlines: _Deadlines | None = None
        self.closed = False

    async def post(self, url: str, body: bytes, timeout: float) -> tuple[int, Mapping[str, str], bytes]:
        """POST ``body`` to ``url``: ``(status, headers with lower-case names, body)``; raises
        :class:`HTTP1Error` (connection or framing) or ``TimeoutError`` (nothing within ``timeout`` seconds)."""
        if self.closed:
            raise HTTP1Error("the client was closed")
        target = self._targets.get(url)
        if target is None:
            if len(self._targets) > 1024:
                self._targets.clear()
            target = self._targets[url] = _Target(url, self._headers)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        deadlines = self._deadlines
        if deadlines is None:
            deadlines = self._deadlines = _Deadlines(loop)
        conn = self._checkout(target.origin)
        if conn is None:
            conn = await self._connect(target, loop, deadline)
        # one exchange on ``conn`` (inline, not a method: a coroutine less per call)
        conn.waiter = w = loop.create_future()
        conn.reusable = conn.keep_after = False
        deadlines.add(conn, deadline)
        try:
            conn.transport.write(b"%b%d\r\n\r\n%b" % (target.head, len(body), body))  # type: ignore[union-attr]
            answer = await w
            conn.reusable = conn.keep_after and not conn.buf and conn.usable
            return answer
        finally:
            deadlines.discard(conn)
            conn.waiter = None
            if conn.reusable and not self.closed:
                self._idle.setdefault(target.origin, []).append(conn)
            else:
                conn.close()
                self._open.discard(conn)

    def _checkout(self, origin: tuple[str, int]) -> _Conn | None:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if conn.usable:
                return conn
            self._open.discard(conn)
        return None

    async def _connect(self, target: _Target, loop: asyncio.AbstractEventLoop, deadline: float) -> _Conn:
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _Conn(loop), target.host, target.port), max(0.0, deadline - loop.time()))
        except TimeoutError:  # an OSError too: it stays a timeout
            raise
        except OSError as exc:
            raise HTTP1Error(f"cannot connect to {target.host}:{target.port}: {exc.strerror or exc}") from None
        if self.closed:
            conn.close()
            raise HTTP1Error("the client was closed")
        self._open.add(conn)
        return conn

    async def close(self) -> None:
        """Close every connection (answers in flight fail with :class:`HTTP1Error`)."""
        self.close_now()

    def close_now(self) -> None:
        """Close every connection without awaiting; safe when the loop has stopped (the sockets are closed)."""
        self.closed = True
        if self._deadlines is not None and not self._deadlines.loop.is_closed():
            self._deadlines.cancel()
        conns, self._open, self._idle = list(self._open), set(), {}
        for conn in conns:
            transport = conn.transport
            if transport is None:
                continue
            if not conn.loop.is_closed():
                transport.close()
                continue
            # its loop is closed (an asyncio.run that has returned): the transport cannot close itself
            sock = getattr(transport, "_sock", None)
            if sock is not None:
                sock.close()
                transport._sock = None  # type: ignore[attr-defined]
