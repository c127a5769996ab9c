"""Prometheus metrics of the reward service, on a registry of its own (one per app)."""

from __future__ import annotations

from collections.abc import Iterable

from ..rewards.records import RewardRecord

__all__ = ["ServeMetrics"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class ServeMetrics:
    """Requests, items, judge calls, latency, failures by kind, cache hits, cost, flagged and screened items."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = r = CollectorRegistry()
        p = "rubric_reward"
        self.requests = Counter(f"{p}_requests", "HTTP requests answered", ["endpoint", "status"], registry=r)
        self.items = Counter(f"{p}_items", "Items scored, by outcome", ["endpoint", "outcome"], registry=r)
        self.judge_calls = Counter(f"{p}_judge_calls", "Judge calls paid for, by the outcome of their item "
                                   "(cache hits excluded; a group call counts its share)", ["outcome"], registry=r)
        self.cache_hits = Counter(f"{p}_judge_cache_hits",
                                  "Judge calls answered without a new request (reply cache or in-flight dedupe)",
                                  registry=r)
        self.failures = Counter(f"{p}_failures", "Failed verdicts by error kind, and rejected requests by code",
                                ["kind"], registry=r)
        self.cost = Counter(f"{p}_judge_cost_dollars", "Judge cost of scored items (cache hits are free)", registry=r)
        self.latency = Histogram(f"{p}_request_latency_seconds", "Time to answer a scoring request",
                                 ["endpoint"], buckets=_LATENCY_BUCKETS, registry=r)
        self.flagged = Counter(f"{p}_flagged_items", "Items flagged before judging (docs/security.md), by what "
                               "was done: screened (minimum, no judge call), suspect or alone (judged alone)",
                               ["endpoint", "action"], registry=r)
        self.screened = Counter(f"{p}_screened_items", "Items not put to a judge, by why: degenerate or flagged",
                                ["endpoint", "why"], registry=r)
        self.in_flight = Gauge(f"{p}_requests_in_flight", "Scoring requests being worked on", registry=r)

    def observe(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, str(status)).inc()
        if endpoint in ("score", "openrlhf"):
            self.latency.labels(endpoint).observe(seconds)

    def rejected(self, code: str) -> None:
        self.failures.labels(f"request:{code}").inc()

    def results(self, endpoint: str, records: Iterable[RewardRecord]) -> None:
        """Count the items of one answered request (a request whose client left is not counted)."""
        counts = {"scored": 0, "unscored": 0}
        calls = {"scored": 0.0, "unscored": 0.0}
        cached = 0
        cost = 0.0
        for record in records:
            outcome = "unscored" if record.unscored else "scored"
            counts[outcome] += 1
            res = record.result
            if res is None:
                continue
            meta = res.metadata
            if meta.get("screened"):
                self.screened.labels(endpoint, "flagged" if meta.get("flagged") else "degenerate").inc()
            if meta.get("flagged"):
                action = "screened" if meta.get("screened") else "suspect" if meta.get("suspect") else "alone"
                self.flagged.labels(endpoint, action).inc()
            calls[outcome] += res.judge_calls
            cached += sum(1 for c in res.calls if c.cached)
            cost += res.cost
            for v in res.verdicts:
                if v.error is not None:
                    self.failures.labels(v.error.kind.value).inc()
        for outcome in counts:
            if counts[outcome]:
                self.items.labels(endpoint, outcome).inc(counts[outcome])
            if calls[outcome]:
                self.judge_calls.labels(outcome).inc(calls[outcome])
        self.cache_hits.inc(cached)
        self.cost.inc(cost)

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
