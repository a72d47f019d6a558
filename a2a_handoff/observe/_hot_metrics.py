"""The hot path's counters of an agent's metrics (`_metrics.Metrics.hot`): plain numbers,
no lock and no label look-up (the loop is one thread), made Prometheus samples only when
/metrics is read — prometheus-client is imported then, not before."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING

from a2a_handoff.observe._labels import short_state

if TYPE_CHECKING:
    from prometheus_client.core import HistogramMetricFamily, Metric

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
_EDGE = ("source", "target", "kind", "outcome")


class Buckets:
    """A histogram's counts, kept as plain numbers."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, float]]:
        """The buckets as Prometheus counts them: each bound with the count at or below it."""
        buckets: list[tuple[str, float]] = []
        total = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += count
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), total))
        return buckets

    def family(self, name: str, doc: str) -> HistogramMetricFamily:
        from prometheus_client.core import HistogramMetricFamily

        return HistogramMetricFamily(name, doc, buckets=self.cumulative(), sum_value=self.sum)


class Hot:
    """The hot path's counters: requests by method and outcome, transitions by state,
    handoffs sent and received by edge (and their latency), the store's commits (latency,
    batch size)."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str], int] = {}
        self.transitions: dict[str, int] = {}  # by wire name (or TaskState), named when read
        self.sent: dict[tuple[str, str, str, str], int] = {}
        self.received: dict[tuple[str, str, str, str], int] = {}
        self.latency: dict[tuple[str, str, str, str], Buckets] = {}
        self.commit_seconds = Buckets(COMMIT_BUCKETS)
        self.commit_batch = Buckets(BATCH_BUCKETS)

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        requests = CounterMetricFamily(
            "a2a_requests",
            "JSON-RPC calls by method and outcome (ok or the error's name)",
            labels=["method", "outcome"],
        )
        for (method, outcome), count in sorted(self.requests.items()):
            requests.add_metric([method, outcome], count)
        yield requests
        transitions = CounterMetricFamily(
            "a2a_task_transitions",
            "Task state changes committed, by the new state",
            labels=["state"],
        )
        by_name: dict[str, int] = {}  # a state counted by its wire name or TaskState member
        for state, count in self.transitions.items():
            name = short_state(state)
            by_name[name] = by_name.get(name, 0) + count
        for name, count in sorted(by_name.items()):
            transitions.add_metric([name], count)
        yield transitions
        for name, doc, counts in (
            ("a2a_handoffs_sent", "Handoffs sent, by edge, kind and outcome", self.sent),
            (
                "a2a_handoffs_received",
                "Handoffs received, by edge, kind and outcome",
                self.received,
            ),
        ):
            family = CounterMetricFamily(name, doc, labels=_EDGE)
            for edge, count in sorted(counts.items()):
                family.add_metric(list(edge), count)
            yield family
        latency = HistogramMetricFamily(
            "a2a_handoff_latency_seconds",
            "From the handoff decided to the successor created (stage=created) and to the"
            " source terminated (stage=terminated)",
            labels=["source", "target", "kind", "stage"],
        )
        for stage, buckets in sorted(self.latency.items()):
            latency.add_metric(list(stage), buckets.cumulative(), buckets.sum)
        yield latency
        yield self.commit_seconds.family(
            "a2a_store_commit_seconds", "Store commit latency (one group commit)"
        )
        yield self.commit_batch.family("a2a_store_commit_batch_size", "Writes per store commit")
