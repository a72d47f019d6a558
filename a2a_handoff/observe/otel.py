"""Traces exported: the OpenTelemetry SDK with its OTLP/HTTP exporter (`a2a-handoff[otel]`).

The library itself only uses `opentelemetry-api`; a program that wants its spans sent
somewhere calls `export_traces` once at start-up (the example servers do, given
`--otlp-endpoint` or `$OTEL_EXPORTER_OTLP_ENDPOINT`).
"""

from __future__ import annotations

from typing import Any


def export_traces(service: str, endpoint: str | None = None, exporter: Any = None) -> Any:
    """Set a tracer provider for `service` sending spans to `endpoint` (OTLP/HTTP, e.g.
    `http://127.0.0.1:4318`) — or to `exporter`, a SpanExporter (an in-memory one in tests);
    the provider."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "exporting traces needs the OpenTelemetry SDK: pip install '.[otel]' in the"
            " a2a-handoff clone"
        ) from exc
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise RuntimeError(
                "the OTLP exporter is missing: pip install '.[otel]' in the a2a-handoff clone"
            ) from exc
        url = endpoint.rstrip("/") + "/v1/traces" if endpoint else None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    trace.set_tracer_provider(provider)
    return provider
