"""A persistent cache of successful judge replies in SQLite (WAL), implementing ``ReplyCache``.

The key is a SHA-256 over a canonical JSON of everything that changes an answer: endpoint(s),
backend, model, every sampling parameter, the rendered messages, the output schema and the sample
index. Operational settings (timeouts, retries, rate limits, prices) and secrets (the API key, the
name of its environment variable) are never part of it, so rotating a key still hits. The database
holds only the key digest, the reply and what it cost; never the request configuration.

Only successes are stored: no transport error, no content-filter stop, no truncated (``length``)
or empty answer. Each write is one transaction (atomic); WAL lets several processes share a file.
A hit comes back with ``cached=True``, ``cost=0.0`` and zero usage (it costs nothing new); the
original cost and usage stay in the database (:meth:`SQLiteCache.lookup`) and hits add it to
``saved_cost``.

The file also keeps one secret (:meth:`SQLiteCache.nonce_salt`): the key of group-mode response ids, so a
rerun's group calls are the same requests and hit their stored replies.

Billing (for resumable runs). A cache opened with an ``owner`` (a run) and an ``invocation`` number
also records, per reply it stores, that the reply is *unbilled*: paid for, but not yet in a saved
result. The runner grades each item inside :meth:`SQLiteCache.billing` and calls
:meth:`SQLiteCache.settle` once the item's result is saved. A reply paid for by a killed invocation
stays unbilled; the first hit on it in a later invocation of the same run comes back with its
recorded cost (``cached=True`` with a cost: the transport bills it), so the run's spend counts what the provider billed
exactly once. Every other hit, re-reads of a finished run included, costs nothing. Settled replies
remember the item they were billed to: when that result is lost (a corrupted journal line) or
replaced, :meth:`SQLiteCache.unsettle` makes them unbilled again, so the item's new result carries
their cost (``recounted_cost``: the part an earlier invocation's spend already counts).

``refreshing()`` makes reads miss for the calls made inside it (a runner retrying an item whose
cached answer could not be parsed asks the judge again; the fresh answer replaces the old one).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..results import Usage
from .base import ChatReply, ChatRequest, TokenLogprob
from .config import judge_fields

__all__ = ["CacheEntry", "SQLiteCache", "cache_key", "key_material", "refreshing"]

KEY_VERSION = 1

# JudgeConfig fields that do not change one request's answer (declared on JudgeConfig): left out of
# the key, so rotating a key or raising a limit still hits.
_NOT_IN_KEY = judge_fields("calls") | judge_fields("nothing")

_refresh: contextvars.ContextVar[bool] = contextvars.ContextVar("rubric_reward_cache_refresh", default=False)
_billing: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("rubric_reward_cache_billing",
                                                                           default=None)


@contextlib.contextmanager
def refreshing() -> Iterator[None]:
    """Within this context (and tasks started from it), cache reads miss; writes still happen."""
    token = _refresh.set(True)
    try:
        yield
    finally:
        _refresh.reset(token)


def _config_dict(config: Any) -> dict[str, Any]:
    if hasattr(config, "to_dict"):
        return dict(config.to_dict())
    if isinstance(config, Mapping):
        return dict(config)
    raise TypeError(f"cannot key a cache on a {type(config).__name__}; pass a JudgeConfig")


def key_material(config: Any, request: ChatRequest) -> dict[str, Any]:
    """The canonical (secret-free) description of a request that the cache key hashes."""
    cfg = {k: v for k, v in _config_dict(config).items() if k not in _NOT_IN_KEY}
    urls = cfg.pop("base_url", None)
    if isinstance(urls, str):
        urls = [urls]
    cfg["endpoints"] = sorted(urls) if urls else None  # replicas of one model: order is irrelevant
    if hasattr(config, "resolved_backend"):
        cfg["backend"] = config.resolved_backend()
    cfg["max_tokens"] = request.max_tokens or cfg.get("max_tokens")
    cfg["logprobs"] = bool(request.logprobs)
    cfg["top_logprobs"] = (request.top_logprobs or cfg.get("top_logprobs")) if request.logprobs else 0
    return {
        "v": KEY_VERSION,
        "config": cfg,
        "messages": [dict(m) for m in request.messages],
        "schema": request.schema,
        "sample_index": request.sample_index,
    }


def cache_key(config: Any, request: ChatRequest) -> str:
    """SHA-256 hex digest of :func:`key_material` as canonical JSON."""
    blob = json.dumps(key_material(config, request), sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=_jsonable)
    return hashlib.sha256(blob.encode()).hexdigest()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, tuple | set | frozenset):
        return list(obj)
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"cannot put a {type(obj).__name__} in a cache key")


def cacheable(reply: ChatReply) -> bool:
    """Only clean successes are cached."""
    return (
        reply.error is None
        and reply.text is not None
        and reply.text.strip() != ""
        and reply.finish_reason not in ("content_filter", "length")
    )


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """A stored reply with what it originally cost."""

    text: str
    usage: Usage
    cost: float
    logprobs: tuple[TokenLogprob, ...] | None
    finish_reason: str | None
    model: str
    created: float

    def reply(self) -> ChatReply:
        """The reply a hit returns: nothing new spent."""
        return ChatReply(self.text, cost=0.0, cached=True, attempts=0, logprobs=self.logprobs,
                         finish_reason=self.finish_reason)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    cost REAL NOT NULL,
    logprobs TEXT,
    finish_reason TEXT,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS unbilled (
    key TEXT NOT NULL,
    owner TEXT NOT NULL,
    invocation INTEGER NOT NULL,
    PRIMARY KEY (key, owner)
);
CREATE TABLE IF NOT EXISTS billed (
    key TEXT NOT NULL,
    owner TEXT NOT NULL,
    item TEXT NOT NULL,
    invocation INTEGER NOT NULL,
    PRIMARY KEY (key, owner)
);
CREATE INDEX IF NOT EXISTS billed_item ON billed (owner, item);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
)
"""


class SQLiteCache:
    """``ReplyCache`` on one SQLite file. Safe to share between threads and processes.

    Lookups and single-row writes on a local file take microseconds, so they run inline on the
    caller's event loop; a lock serialises threads, WAL and ``busy_timeout`` serialise processes.
    """

    def __init__(self, path: str | Path, *, owner: str | None = None, invocation: int = 0):
        self.path = Path(path)
        self.owner = owner
        self.invocation = invocation
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.saved_cost = 0.0  # original cost of every hit served by this object
        self.reclaimed_cost = 0.0  # hits billed now: paid for by a killed invocation of this run
        self.recounted_cost = 0.0  # the part of it an earlier invocation's spend already counts
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._salt: bytes | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
            conn.execute("PRAGMA busy_timeout=30000")
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    # ------------------------------------------------------------------ sync core
    def lookup(self, config: Any, request: ChatRequest) -> CacheEntry | None:
        """The stored entry for this request, with its original cost (no hit counting)."""
        key = cache_key(config, request)
        with self._lock:
            row = self._db().execute(
                "SELECT text, prompt_tokens, completion_tokens, cached_tokens, cost, logprobs, finish_reason,"
                " model, created FROM replies WHERE key = ?", (key,),
            ).fetchone()
        if row is None:
            return None
        text, pt, ct, cached_t, cost, logprobs, finish, model, created = row
        return CacheEntry(text, Usage(pt, ct, cached_t), cost, _decode_logprobs(logprobs), finish, model, created)

    def store(self, config: Any, request: ChatRequest, reply: ChatReply) -> bool:
        """Store a successful reply (atomically, replacing any older one); False if not cacheable."""
        if not cacheable(reply):
            return False
        key = cache_key(config, request)
        model = str(getattr(config, "model", "") or _config_dict(config).get("model", ""))
        u = reply.usage
        row = (key, model, reply.text, u.prompt_tokens, u.completion_tokens, u.cached_tokens, float(reply.cost),
               _encode_logprobs(reply.logprobs), reply.finish_reason, time.time())
        with self._lock:
            db = self._db()
            db.execute("INSERT OR REPLACE INTO replies VALUES (?,?,?,?,?,?,?,?,?,?)", row)
            if self.owner is not None and reply.cost:
                db.execute("INSERT OR REPLACE INTO unbilled VALUES (?,?,?)", (key, self.owner, self.invocation))
            self.writes += 1
        self._note(key)
        return True

    # ------------------------------------------------------------------ billing
    @contextlib.contextmanager
    def billing(self) -> Iterator[list[str]]:
        """Collect the keys of replies paid for (or reclaimed) by the calls made inside; pass them to
        :meth:`settle` once the result they went into is saved."""
        keys: list[str] = []
        token = _billing.set(keys)
        try:
            yield keys
        finally:
            _billing.reset(token)

    def settle(self, keys: list[str], item: str = "") -> None:
        """The replies ``keys`` are now in the saved result of ``item``: later hits on them cost nothing."""
        if self.owner is None or not keys:
            return
        with self._lock:
            db = self._db()
            db.executemany("DELETE FROM unbilled WHERE key = ? AND owner = ?", [(k, self.owner) for k in keys])
            db.executemany("INSERT OR REPLACE INTO billed VALUES (?,?,?,?)",
                           [(k, self.owner, item, self.invocation) for k in keys])

    def unsettle(self, items: list[str], counted: set[int]) -> None:
        """The saved results of ``items`` are lost (a corrupted journal line) or about to be replaced:
        the replies billed to them are unbilled again, so the items that use them next carry their
        cost. ``counted``: invocations whose recorded spend includes their bills (not billed twice)."""
        if self.owner is None or not items:
            return
        with self._lock:
            db = self._db()
            rows = [row for item in items for row in db.execute(
                "SELECT key, invocation FROM billed WHERE owner = ? AND item = ?", (self.owner, item))]
            db.execute("BEGIN")
            try:
                db.executemany("INSERT OR REPLACE INTO unbilled VALUES (?,?,?)",
                               [(k, self.owner, 0 if inv in counted else inv) for k, inv in rows])
                db.executemany("DELETE FROM billed WHERE key = ? AND owner = ?", [(k, self.owner) for k, _ in rows])
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _note(self, key: str) -> None:
        keys = _billing.get()
        if keys is not None and self.owner is not None:
            keys.append(key)

    def _reclaim(self, key: str) -> int | None:
        """The invocation that paid for ``key`` when an earlier invocation of this run did and it is
        unbilled (0: one whose spend already counts it), claiming it for this invocation so that it
        is billed once; None otherwise."""
        if self.owner is None:
            return None
        with self._lock:
            db = self._db()
            row = db.execute("SELECT invocation FROM unbilled WHERE key = ? AND owner = ? AND invocation < ?",
                             (key, self.owner, self.invocation)).fetchone()
            if row is not None:
                db.execute("UPDATE unbilled SET invocation = ? WHERE key = ? AND owner = ?",
                           (self.invocation, key, self.owner))
        if row is None:
            return None
        self._note(key)
        return int(row[0])

    def nonce_salt(self) -> bytes:
        """The secret key of group-mode response ids (:mod:`rubric_reward.grading.group`): drawn once
        (:func:`secrets.token_bytes`) and kept in this file, so a rerun reproduces its calls' ids and hits
        their replies; a response author without the file cannot predict them."""
        if self._salt is None:
            import secrets

            with self._lock:
                db = self._db()
                db.execute("INSERT OR IGNORE INTO meta VALUES ('nonce_salt', ?)", (secrets.token_bytes(32),))
                self._salt = bytes(db.execute("SELECT value FROM meta WHERE name = 'nonce_salt'").fetchone()[0])
        return self._salt

    def __len__(self) -> int:
        with self._lock:
            return int(self._db().execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SQLiteCache:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ ReplyCache protocol
    async def get(self, config: Any, request: ChatRequest) -> ChatReply | None:
        if _refresh.get():
            self.misses += 1
            return None
        entry = self.lookup(config, request)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        if entry.cost and (payer := self._reclaim(cache_key(config, request))) is not None:
            self.reclaimed_cost += entry.cost
            if payer == 0:
                self.recounted_cost += entry.cost
            return ChatReply(entry.text, usage=entry.usage, cost=entry.cost, attempts=0, cached=True,
                             logprobs=entry.logprobs, finish_reason=entry.finish_reason)
        self.saved_cost += entry.cost
        return entry.reply()

    async def put(self, config: Any, request: ChatRequest, reply: ChatReply) -> None:
        self.store(config, request, reply)


def _encode_logprobs(logprobs: tuple[TokenLogprob, ...] | None) -> str | None:
    if logprobs is None:
        return None
    return json.dumps([[t.token, t.logprob, dict(t.top)] for t in logprobs], ensure_ascii=False)


def _decode_logprobs(raw: str | None) -> tuple[TokenLogprob, ...] | None:
    if raw is None:
        return None
    return tuple(TokenLogprob(tok, lp, top) for tok, lp, top in json.loads(raw))
