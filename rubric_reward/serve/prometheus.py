"""Prometheus metrics of the reward service, on a registry of its own (one per app)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

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
        self._pools: Callable[[], list[dict[str, Any]]] | None = None
        r.register(_PoolCollector(self))

    def watch_pools(self, source: Callable[[], list[dict[str, Any]]] | None) -> None:
        """Report the judges' caps and replica pools (``source``: the engine's ``pool_stats``) on each scrape."""
        self._pools = source

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


class _PoolCollector:
    """Judge caps and replica pools, read at scrape time (per judge; per replica URL)."""

    def __init__(self, metrics: ServeMetrics):
        self._metrics = metrics

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        p = "rubric_reward_judge"
        cap = GaugeMetricFamily(f"{p}_cap", "Concurrency cap of the judge endpoint (shared=1: held across the "
                                "machine's processes)", labels=["judge", "shared"])
        cap_used = GaugeMetricFamily(f"{p}_cap_in_use", "This process's calls holding the cap", labels=["judge"])
        calls = CounterMetricFamily(f"{p}_replica_calls", "Attempts routed to each replica", labels=["judge", "url"])
        affine = CounterMetricFamily(f"{p}_replica_affine_calls", "Attempts that went to their key's first-choice "
                                     "replica (affinity share = affine / calls)", labels=["judge", "url"])
        spills = CounterMetricFamily(f"{p}_replica_spills", "Attempts placed on a replica because their first "
                                     "choice was over the load bound or full", labels=["judge", "url"])
        failovers = CounterMetricFamily(f"{p}_replica_failovers", "Attempts placed on a replica because their "
                                        "first choice's breaker was open or it gave the key an unusable answer",
                                        labels=["judge", "url"])
        refused = CounterMetricFamily(f"{p}_replica_refused", "Answers from a replica the grader could not use "
                                      "(counted as breaker failures)", labels=["judge", "url"])
        in_flight = GaugeMetricFamily(f"{p}_replica_in_flight", "Attempts in flight per replica",
                                      labels=["judge", "url"])
        share = GaugeMetricFamily(f"{p}_replica_affinity_share", "Share of a replica's attempts on their key's "
                                  "first choice", labels=["judge", "url"])
        source = self._metrics._pools
        for pool in (source() if source is not None else []):
            name = pool["judge"]
            cap.add_metric([name, "1" if pool["cap_shared"] else "0"], pool["cap"])
            cap_used.add_metric([name], pool["cap_in_use"])
            for rep in pool["replicas"]:
                labels = [name, rep["url"]]
                calls.add_metric(labels, rep["calls"])
                affine.add_metric(labels, rep["affine"])
                spills.add_metric(labels, rep["spills"])
                failovers.add_metric(labels, rep["failovers"])
                refused.add_metric(labels, rep["refused"])
                in_flight.add_metric(labels, rep["in_flight"])
                if rep["affinity_share"] is not None:
                    share.add_metric(labels, rep["affinity_share"])
        yield from (cap, cap_used, calls, affine, spills, failovers, refused, in_flight, share)
