"""The push deliveries' figures (for /health) and their Prometheus metrics, read from them
when scraped. Counts and times only: /health is anyone's to read, so no task's or config's
id is among them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client.core import Metric


class PushStats:
    """What this process delivered, retried and gave up: for /health and /metrics (counts
    and a time: /health is anyone's to read, so no task's or config's id is in it)."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed_attempts = 0
        self.given_up = 0
        self.failing: set[tuple[str, str]] = set()
        self.last_given_up_at: str | None = None

    def report(self, active: int) -> dict[str, Any]:
        return {
            "active": active,
            "delivered": self.delivered,
            "failedAttempts": self.failed_attempts,
            "givenUp": self.given_up,
            "failing": len(self.failing),
            "lastGivenUpAt": self.last_given_up_at,
        }


class PushCollector:
    """`a2a_push_deliveries_total{outcome}`, `a2a_push_failing`, `a2a_push_active`."""

    def __init__(self, report: Callable[[], dict[str, Any]]) -> None:
        self.report = report

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        figures = self.report()
        deliveries = CounterMetricFamily(
            "a2a_push_deliveries",
            "Push notifications: delivered, failed attempts (retried), given up",
            labels=["outcome"],
        )
        deliveries.add_metric(["delivered"], figures["delivered"])
        deliveries.add_metric(["failed_attempt"], figures["failedAttempts"])
        deliveries.add_metric(["given_up"], figures["givenUp"])
        yield deliveries
        yield GaugeMetricFamily(
            "a2a_push_failing", "Push configs whose webhook is failing now", figures["failing"]
        )
        yield GaugeMetricFamily(
            "a2a_push_active", "Push configs this process is delivering", figures["active"]
        )
