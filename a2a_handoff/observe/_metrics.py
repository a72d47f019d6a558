"""An agent's Prometheus metrics, in a registry of its own (`GET /metrics` renders it).

Counters move as things happen (a call answered, a transition committed, a handoff sent or
received, a ledger row written); the gauges that describe the store or the client's breakers
(outbox pending, oldest pending age, breaker states, escalations waiting) are set when
/metrics is read (`refresh`), from the same cheap figures /health uses.

The contract metrics a contract's `observability.metrics` names (`handoff.latency_ms`,
`handoff.rejected`, `handoff.escalated`, …) are counted from the ledger: when the row of a
handoff under that contract is written, as `a2a_contract_<name>` labelled with the contract
(a name ending in `_ms` or `_seconds` is a histogram, any other a counter).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from a2a_handoff.observe._hot_metrics import (
    BATCH_BUCKETS,
    COMMIT_BUCKETS,
    LATENCY_BUCKETS,
    Buckets,
    Hot,
)

if TYPE_CHECKING:  # prometheus-client is imported when the registry is first needed
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]

_MS_BUCKETS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000)
BREAKER_VALUES = {"closed": 0, "half_open": 1, "open": 2}

_LAZY = frozenset(  # made with the registry (`Metrics._make_registry`)
    (
        "registry",
        "open_streams",
        "outbox_pending",
        "outbox_oldest_age",
        "breaker_state",
        "breaker_changes",
        "escalations",
        "escalations_waiting",
        "recoveries",
    )
)


class Metrics:
    """The metrics of one agent.

    The per-request and per-handoff counters and histograms are plain numbers in `Hot` (no
    lock, no label look-up on the hot path; the loop is one thread), made samples when
    /metrics is read. The Prometheus registry and its gauges and labelled counters are made,
    and prometheus-client imported, the first time one of them is asked for (/metrics read,
    a breaker change, an escalation, a recovery, a contract metric): an agent that only
    serves requests never loads the library."""

    registry: CollectorRegistry
    open_streams: Gauge
    outbox_pending: Gauge
    outbox_oldest_age: Gauge
    breaker_state: Gauge
    breaker_changes: Counter
    escalations: Counter
    escalations_waiting: Gauge
    recoveries: Counter

    def __init__(self) -> None:
        self.hot = Hot()
        self._contract: dict[str, Counter | Histogram] = {}
        self._collectors: list[Any] = [self.hot]  # registered when the registry is made

    def add_collector(self, collector: Any) -> None:
        """Render `collector` (an object with `collect()`) with the agent's metrics."""
        if "registry" in self.__dict__:
            self.registry.register(collector)
        else:
            self._collectors.append(collector)

    def __getattr__(self, name: str) -> Any:
        # Called only while the registry is not made: afterwards these are plain attributes.
        if name not in _LAZY:
            raise AttributeError(name)
        self._make_registry()
        return self.__dict__[name]

    @property
    def content_type(self) -> str:
        """Of `render()`'s text."""
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        return CONTENT_TYPE_LATEST

    def _make_registry(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.registry = r = CollectorRegistry(auto_describe=True)
        for collector in self._collectors:
            r.register(collector)
        self.open_streams = Gauge("a2a_open_streams", "SSE task streams open", registry=r)
        self.outbox_pending = Gauge(
            "a2a_outbox_pending", "Handoffs checkpointed and not yet delivered", registry=r
        )
        self.outbox_oldest_age = Gauge(
            "a2a_outbox_oldest_pending_age_seconds",
            "Age of the oldest pending handoff (0: none)",
            registry=r,
        )
        self.breaker_state = Gauge(
            "a2a_breaker_state",
            "Circuit breaker per target: 0 closed, 1 half-open, 2 open",
            ["target"],
            registry=r,
        )
        self.breaker_changes = Counter(
            "a2a_breaker_changes",
            "Circuit breaker state changes, by target and new state",
            ["target", "state"],
            registry=r,
        )
        self.escalations = Counter(
            "a2a_escalations",
            "Escalations: received (by a human agent), decided, timed_out (the fallback answered)",
            ["event"],
            registry=r,
        )
        self.escalations_waiting = Gauge(
            "a2a_escalations_waiting",
            "Tasks waiting for an answer (on a human agent: escalations waiting for an operator)",
            registry=r,
        )
        self.recoveries = Counter(
            "a2a_recoveries",
            "Recovery actions: handoffs replayed, tasks failed at start-up,"
            " contract recovery paths followed",
            ["kind"],
            registry=r,
        )

    def handoff_sent(self, edge: tuple[str, str, str, str]) -> None:
        """A handoff's delivery ended: `edge` is (source, target, kind, outcome)."""
        sent = self.hot.sent
        sent[edge] = sent.get(edge, 0) + 1

    def handoff_received(self, edge: tuple[str, str, str, str]) -> None:
        """A handoff received: `edge` is (source, target, kind, outcome)."""
        received = self.hot.received
        received[edge] = received.get(edge, 0) + 1

    def handoff_latency(self, stage: tuple[str, str, str, str], seconds: float) -> None:
        """`seconds` from a handoff decided to `stage`: (source, target, kind, stage)."""
        buckets = self.hot.latency.get(stage)
        if buckets is None:
            buckets = self.hot.latency[stage] = Buckets(LATENCY_BUCKETS)
        buckets.observe(seconds)

    def commit(self, seconds: float, batch: int) -> None:
        hot = self.hot  # `Buckets.observe` inline (a commit is on every request's path)
        hot.commit_seconds.counts[bisect_left(COMMIT_BUCKETS, seconds)] += 1
        hot.commit_seconds.sum += seconds
        hot.commit_batch.counts[bisect_left(BATCH_BUCKETS, batch)] += 1
        hot.commit_batch.sum += batch

    def contract(self, names: Iterable[str], contract: str, value: float | None = None) -> None:
        """Count a ledger event for the contract metrics `names` (a histogram observes
        `value` in ms; a counter moves by one)."""
        for name in names:
            metric = self._contract.get(name)
            if metric is None:
                metric = self._contract[name] = self._make(name)
            from prometheus_client import Histogram  # loaded by then (`_make`)

            if isinstance(metric, Histogram):
                if value is not None:
                    metric.labels(contract).observe(value)
            else:
                metric.labels(contract).inc()

    def _make(self, name: str) -> Counter | Histogram:
        from prometheus_client import Counter, Histogram

        safe = "a2a_contract_" + re.sub(r"[^a-zA-Z0-9_]", "_", name)
        doc = f"The contract metric {name}, counted from the handoff ledger"
        if name.endswith(("_ms", "_seconds")):
            buckets = _MS_BUCKETS if name.endswith("_ms") else LATENCY_BUCKETS
            return Histogram(safe, doc, ["contract"], buckets=buckets, registry=self.registry)
        return Counter(safe, doc, ["contract"], registry=self.registry)

    def refresh(
        self,
        *,
        pending: int,
        oldest_age: float,
        breakers: Mapping[str, str],
        streams: int,
        waiting: int | None,
    ) -> None:
        """Set the gauges read from the store and the client (when /metrics is read)."""
        self.outbox_pending.set(pending)
        self.outbox_oldest_age.set(oldest_age)
        self.open_streams.set(streams)
        for target, state in breakers.items():
            self.breaker_state.labels(target).set(BREAKER_VALUES.get(state, 0))
        if waiting is not None:
            self.escalations_waiting.set(waiting)

    def render(self) -> bytes:
        """The registry in the Prometheus text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """One sample's value (0 when absent): for tests and the console."""
        found = self.registry.get_sample_value(name, dict(labels or {}))
        return found or 0.0
