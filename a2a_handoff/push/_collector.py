"""The push deliveries' Prometheus metrics, read from a pusher's figures when scraped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client.core import Metric


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
