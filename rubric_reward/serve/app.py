"""The reward service: an aiohttp app over one shared :class:`~rubric_reward.serve.service.ServiceEngine`.

Routes:

* ``POST /score`` -- ``{"items": [{"prompt"|"conversation", "response", "rubric"|"rubric_id", "id"}],
  "rubric"|"rubric_id"?, "deadline_s"?}`` -> ``{"results": [...], "summary": {...}}``, per item the
  reward, scores, per-criterion verdicts with reasons, and the error when unscored.
* ``POST /openrlhf`` (also ``/get_reward``) -- OpenRLHF's remote reward contract: ``{"query",
  "prompts", "labels"}`` -> ``{"rewards", "scores", "extra_logs", "unscored", "errors"}``.
* ``GET /health`` (no auth; with the judge's reachability) and ``GET /metrics`` (Prometheus text).

Bad requests get a 4xx JSON ``{"error": {"code", "field", "message"}}`` and the service keeps
serving; on ``/openrlhf`` only a body that cannot be read as OpenRLHF's samples does: a bad sample,
too many samples, a shutdown or an internal error give unscored samples in a 200, because OpenRLHF
turns a non-2xx into lost rewards. A request whose client disconnects is cancelled with its judge
calls. The bearer token (``serve.auth_token_env``) is checked from the headers, before any body is read,
compared in constant time and never logged. ``serve.read_timeout_s`` closes a connection that takes longer to
send a request head (or sits idle that long) and answers 408 to a body that takes longer; ``serve.max_connections``
caps open connections (a new one closes the oldest idle one, or is refused with a 503 when all are busy).
On SIGTERM the service stops listening, answers 503 to requests that still arrive on open
connections, finishes the accepted ones (each bounded by the request deadline) and exits.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..rewards.records import RewardRecord
from .config import ServeConfig
from .service import ServiceEngine
from .errors import RequestError
from .health import JudgeProbe
from .prometheus import ServeMetrics

__all__ = ["ServiceThread", "build_app", "serve"]

log = logging.getLogger("rubric_reward.serve")

ENGINE = web.AppKey("engine", ServiceEngine)
PROBE = web.AppKey("probe", JudgeProbe)
METRICS = web.AppKey("metrics", ServeMetrics)
STATE = web.AppKey("state", dict)
BUSY = web.AppKey("busy", set)  # the connections (request handlers) with a request in progress
_ENDPOINTS = {"/score": "score", "/openrlhf": "openrlhf", "/get_reward": "openrlhf", "/health": "health",
              "/metrics": "metrics"}
_ACCESS_FORMAT = '%a "%r" %s %b %Tfs'  # no headers: the Authorization header is never logged


def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=json.dumps(payload, ensure_ascii=False).encode(), status=status,
                        content_type="application/json", headers=headers)


def _error(exc: RequestError, headers: dict[str, str] | None = None) -> web.Response:
    return _json(exc.to_dict(), exc.status, headers)


async def _read_json(request: web.Request, max_bytes: int, timeout_s: float) -> Any:
    if request.content_length is not None and request.content_length > max_bytes:
        raise RequestError(413, "body_too_large", None,
                           f"the body is {request.content_length} bytes; the limit is {max_bytes}")
    try:
        async with asyncio.timeout(timeout_s):
            raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise RequestError(413, "body_too_large", None, f"the body is over the limit of {max_bytes} bytes") from None
    except TimeoutError:
        raise RequestError(408, "body_timeout", None,
                           f"the body did not arrive within {timeout_s:g}s (serve.read_timeout_s)") from None
    if not raw:
        raise RequestError(400, "malformed_json", None, "the body is empty; send a JSON object")
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise RequestError(400, "malformed_json", None, "the body is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise RequestError(400, "malformed_json", None,
                           f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise RequestError(400, "malformed_json", None, "the JSON is nested too deeply") from None
    except ValueError as exc:  # a number past Python's digit limit
        raise RequestError(400, "malformed_json", None, f"not valid JSON: {str(exc).split(';')[0]}") from None


def build_app(config: ServeConfig | Any = None) -> web.Application:
    """The aiohttp application; the engine (judges, cache) is built on startup, inside the serving loop."""
    config = ServeConfig.load(config)
    token = config.serve.auth_token()  # fails now, not at the first request, when the variable is unset
    metrics = ServeMetrics()
    state: dict[str, Any] = {"draining": False, "in_flight": 0}
    busy: set[Any] = set()
    guard = _guard(token.encode() if token else None, metrics, state, busy)
    app = web.Application(middlewares=[guard], client_max_size=config.serve.max_body_bytes)
    app[METRICS] = metrics
    app[STATE] = state
    app[BUSY] = busy
    app.cleanup_ctx.append(_engine_context(config, metrics))
    _add_routes(app, config, metrics, state)
    return app


def _guard(expected: bytes | None, metrics: ServeMetrics, state: dict[str, Any], busy: set[Any]) -> Any:
    """The middleware every request passes: draining, auth (from the headers, before any body is read), the
    in-flight count, errors as JSON, metrics. ``busy`` holds the connections with a request in progress."""

    @web.middleware
    async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> Any:
        endpoint = _ENDPOINTS.get(request.path, "other")
        start = time.perf_counter()
        status = 500
        working = endpoint in ("score", "openrlhf")
        connection = request.protocol
        busy.add(connection)
        try:
            if state["draining"] and endpoint not in ("health", "openrlhf"):  # OpenRLHF: unscored samples
                raise RequestError(503, "shutting_down", None, "the service is shutting down; retry elsewhere")
            if expected is not None and endpoint != "health":
                _check_token(request, expected)
            if working:
                state["in_flight"] += 1
                metrics.in_flight.inc()
            try:
                response = await handler(request)
            finally:
                if working:
                    state["in_flight"] -= 1
                    metrics.in_flight.dec()
            status = response.status
            return response
        except RequestError as exc:
            status = exc.status
            metrics.rejected(exc.code)
            headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
            if exc.status == 503:
                headers = {"Connection": "close", "Retry-After": "1"}
            response = _error(exc, headers)
            if exc.status in (401, 408, 413):  # a body left unread (or cut): not kept for another request
                response.force_close()
            return response
        except web.HTTPException as exc:  # router: unknown path or method
            status = exc.status
            code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status, "http_error")
            metrics.rejected(code)
            return _json({"error": {"code": code, "field": None,
                                    "message": f"{request.method} {request.path}: {exc.reason}"}}, exc.status)
        except asyncio.CancelledError:  # the client went away: its work is dropped, its items not counted
            status = 499
            raise
        except Exception:
            log.exception("internal error on %s %s", request.method, request.path)
            metrics.rejected("internal")
            return _json({"error": {"code": "internal", "field": None, "message": "internal error (see the server log)"}},
                         500)
        finally:
            busy.discard(connection)
            metrics.observe(endpoint, status, time.perf_counter() - start)

    return guard


def _engine_context(config: ServeConfig, metrics: ServeMetrics) -> Callable[[web.Application], Any]:
    """The app's cleanup context: the engine and the judge probe, built on startup and closed on shutdown."""

    async def start_engine(app: web.Application) -> Any:
        app[ENGINE] = engine = ServiceEngine(config)
        app[PROBE] = JudgeProbe(config.judge_configs())
        metrics.watch_pools(engine.pool_stats)
        yield
        metrics.watch_pools(None)
        await app[PROBE].aclose()
        await app[ENGINE].aclose()

    return start_engine


def _add_routes(app: web.Application, config: ServeConfig, metrics: ServeMetrics, state: dict[str, Any]) -> None:
    """The endpoints: /score, /openrlhf (and /get_reward), /health, /metrics."""
    max_bytes, read_timeout = config.serve.max_body_bytes, config.serve.read_timeout_s

    async def score(request: web.Request) -> web.Response:
        engine = request.app[ENGINE]
        start = time.perf_counter()
        pairs, deadline = engine.score_request(await _read_json(request, max_bytes, read_timeout))
        records = await engine.score(pairs, deadline_s=deadline)
        metrics.results("score", records)
        scored = sum(1 for r in records if not r.unscored)
        return _json({"results": [engine.item_result(r) for r in records], "summary": {
            "items": len(records), "scored": scored, "unscored": len(records) - scored,
            "cost": sum(r.cost for r in records), "elapsed_s": round(time.perf_counter() - start, 4),
        }})

    async def openrlhf(request: web.Request) -> web.Response:
        engine = request.app[ENGINE]
        body = await _read_json(request, max_bytes, read_timeout)
        draining = state["draining"]
        try:
            records = await engine.score_openrlhf(body, draining=draining)
        except RequestError:
            raise
        except Exception:  # noqa: BLE001 - OpenRLHF cannot take a 500: every sample unscored instead
            log.exception("internal error on %s %s", request.method, request.path)
            metrics.rejected("internal")
            queries = engine.openrlhf_request(body)[0]
            records = [RewardRecord.failed("internal error (see the server log)", "internal") for _ in queries]
        metrics.results("openrlhf", records)
        return _json(engine.openrlhf_answer(records), headers={"Connection": "close"} if draining else None)

    async def health(request: web.Request) -> web.Response:
        draining = state["draining"]
        probe = request.app.get(PROBE)
        judge = await probe.status() if probe is not None else {"judge_reachable": None, "judge_error": None}
        status = "draining" if draining else ("degraded" if judge["judge_reachable"] is False else "ok")
        return _json({"status": status, "in_flight": state["in_flight"], "judge": engine_judges(request.app),
                      **judge}, 503 if draining else 200)

    async def metrics_view(_: web.Request) -> web.Response:
        body, content_type = metrics.render()
        return web.Response(body=body, headers={"Content-Type": content_type})

    app.router.add_post("/score", score)
    app.router.add_post("/openrlhf", openrlhf)
    app.router.add_post("/get_reward", openrlhf)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics_view)


def engine_judges(app: web.Application) -> list[str]:
    engine = app.get(ENGINE)
    return engine.judge_names if engine is not None else []


def _check_token(request: web.Request, expected: bytes) -> None:
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    # compare_digest on equal-length inputs is constant time; a length mismatch leaks only the length
    # the header's bytes as sent (aiohttp keeps undecodable bytes as surrogates)
    given_bytes = given.strip().encode("utf-8", "surrogateescape")
    ok = scheme.lower() == "bearer" and hmac.compare_digest(given_bytes, expected)
    if not ok:
        raise RequestError(401, "unauthorized", "Authorization",
                           "a valid 'Authorization: Bearer <token>' header is required")


# ---------------------------------------------------------------------------- running
_REFUSED_BODY = json.dumps({"error": {"code": "too_many_connections", "field": None,
                                      "message": "every connection is busy (serve.max_connections); retry"}}).encode()
_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(_REFUSED_BODY), _REFUSED_BODY))


class _Refused(asyncio.Protocol):
    """A connection past the cap while every connection is busy: told 503 and closed at once."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(_REFUSED)  # type: ignore[attr-defined]
        transport.close()


class _CappedSite(web.BaseSite):
    """A TCP site that holds at most ``cap`` connections (``serve.max_connections``): a new connection past it
    closes the oldest ones with no request in progress (idle, half-open, or lingering after an answer), or is
    refused when every connection holds a request in progress. With ``serve.read_timeout_s`` (the handlers' keep-alive timeout,
    which also bounds how long a connection may take to send a request head) no client holds a slot for long,
    and /health stays reachable."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, cap: int, busy: set[Any],
                 on_refused: Callable[[], None]):
        # asyncio accepts up to `backlog` sockets per turn, before any is capped: a burst passes the cap by at most
        # that many descriptors for a turn
        super().__init__(runner, backlog=128)
        self._host, self._port, self._cap, self._busy, self._on_refused = host, port, cap, busy, on_refused
        # handlers made but not yet connected (asyncio connects a burst of accepted sockets a loop turn later)
        self._pending: list[tuple[float, Any]] = []

    @property
    def port(self) -> int:
        return self._server.sockets[0].getsockname()[1] if self._server is not None else self._port

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        self._server = await asyncio.get_running_loop().create_server(
            self._protocol, self._host, self._port, backlog=self._backlog)

    def _protocol(self) -> asyncio.BaseProtocol:
        server = self._runner.server
        now = time.monotonic()
        connections = server.connections  # oldest first
        known = set(connections)
        self._pending = [(t, h) for t, h in self._pending if now - t < 1.0 and h not in known]
        live = [h for h in connections if h.transport is not None]  # a closed one leaves on the next turn
        idle = [h for h in live if h not in self._busy]
        if len(live) - len(idle) >= self._cap:  # every slot holds a request in progress
            self._on_refused()
            return _Refused()
        over = len(live) + len(self._pending) + 1 - self._cap
        for h in idle[:max(0, over)]:  # a burst still connecting is brought under the cap by the next connection
            h.force_close()
        handler = server()
        self._pending.append((now, handler))
        return handler


async def _start(app: web.Application, host: str, port: int, config: ServeConfig,
                 access_log: bool) -> tuple[web.AppRunner, int]:
    kw: dict[str, Any] = {"access_log_format": _ACCESS_FORMAT} if access_log else {"access_log": None}
    # a request whose client has gone is cancelled, and its judge calls with it (OpenRLHF resends on timeout);
    # keepalive_timeout closes a connection that has not sent a whole request head that long after connecting
    # or after its previous answer; after an answer to a body left unread (401, 408, 413) the rest of it is
    # read and dropped for at most lingering_time, so that the client can read the answer, then it is closed
    timeout = config.serve.read_timeout_s
    runner = web.AppRunner(app, shutdown_timeout=config.shutdown_timeout_s, handler_cancellation=True,
                           keepalive_timeout=timeout, lingering_time=min(2.0, timeout), **kw)
    await runner.setup()
    site = _CappedSite(runner, host, port, config.serve.connection_cap(), app[BUSY],
                       lambda: app[METRICS].rejected("too_many_connections"))
    await site.start()
    return runner, site.port


async def _drain(app: web.Application, runner: web.AppRunner) -> None:
    app[STATE]["draining"] = True
    await runner.cleanup()  # stop listening, close idle connections, wait for accepted requests


async def serve(config: ServeConfig | Any = None, *, host: str | None = None, port: int | None = None,
                on_ready: Callable[[int], None] | None = None, access_log: bool = True) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully (see the module docstring)."""
    config = ServeConfig.load(config)
    app = build_app(config)
    host = host or config.serve.host
    runner, bound = await _start(app, host, config.serve.port if port is None else port, config, access_log)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if on_ready is not None:
        on_ready(bound)
    try:
        await stop.wait()
        log.warning("shutting down: %d request(s) in flight; new requests are refused", app[STATE]["in_flight"])
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await _drain(app, runner)


class ServiceThread:
    """Run the service on a background thread (tests, benchmarks, notebooks)::

        with ServiceThread(config, port=0) as svc:
            requests.post(svc.url + "/score", json=...)
    """

    def __init__(self, config: ServeConfig | Any = None, *, host: str = "127.0.0.1", port: int = 0,
                 access_log: bool = False):
        self.config = ServeConfig.load(config)
        self.host, self.port, self.access_log = host, port, access_log
        self.app: web.Application | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> ServiceThread:
        self._loop = asyncio.new_event_loop()
        self.app = build_app(self.config)
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            try:
                self._runner, self.port = self._loop.run_until_complete(
                    _start(self.app, self.host, self.port, self.config, self.access_log))
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()
            self._loop.close()

        self._thread = threading.Thread(target=run, name="reward-service", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Graceful: refuse new requests, finish accepted ones, close the judges."""
        if self._loop is None or self._runner is None:
            return
        fut = asyncio.run_coroutine_threadsafe(_drain(self.app, self._runner), self._loop)
        try:
            fut.result(timeout=self.config.shutdown_timeout_s + 10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._loop = None

    def __enter__(self) -> ServiceThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
