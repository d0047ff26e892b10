"""OpenTelemetry traces: off unless the standard OTEL_* variables ask for them.

One trace follows a job across processes: the producer's request span, the enqueue, then in
a worker the job, each page's render, each engine call and the webhook delivery. The trace
context travels in the job record (``Field.TRACE``, a W3C ``traceparent``), written by the
enqueue and read by the worker that claims the job.

Tracing is on when an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; OTLP over HTTP) and not switched off
(``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``). The SDK reads the rest itself:
headers, sampler, batch delays, ``OTEL_SERVICE_NAME``. Off, the SDK is never imported and
every ``span`` is a ``nullcontext``: no span objects, no context switches, nothing written.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported only when tracing is on: a role without them still runs
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["configure_tracing", "current_traceparent", "span", "tracing_on"]

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
TRACEPARENT = "traceparent"


class _Process:
    """The process's tracer, set once at start like its logging (None: tracing is off)."""

    provider: TracerProvider | None = None
    tracer: Tracer | None = None
    propagator: TraceContextTextMapPropagator | None = None


def tracing_on(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the OTEL_* variables ask for traces (an OTLP endpoint, not switched off)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINTS)


def configure_tracing(service: str, env: Mapping[str, str] = os.environ) -> bool:
    """Start exporting this process's spans over OTLP/HTTP when OTEL_* asks; True when on.

    ``service`` names the process unless OTEL_SERVICE_NAME does. A second call replaces the
    first (an app built again in one process); the global tracer provider is left alone.
    """
    shutdown_tracing()
    if not tracing_on(env):
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    named = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": service}
    provider = TracerProvider(resource=Resource.create(named))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _Process.provider, _Process.tracer = provider, provider.get_tracer("ocrq")
    _Process.propagator = TraceContextTextMapPropagator()
    return True


def shutdown_tracing() -> None:
    """Send the spans still buffered and stop exporting (a no-op when off)."""
    provider = _Process.provider
    _Process.provider, _Process.tracer, _Process.propagator = None, None, None
    if provider is not None:
        provider.shutdown()


@contextlib.contextmanager
def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    parent: str | None = None,
    kind: str = "internal",
) -> Iterator[Span | None]:
    """A span around the block, the child of the current one or of ``parent`` (a
    traceparent); ``kind`` a SpanKind's name in lower case (internal, server, client,
    producer, consumer). None, and no work at all, when tracing is off."""
    tracer, propagator = _Process.tracer, _Process.propagator
    if tracer is None or propagator is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    context = propagator.extract({TRACEPARENT: parent}) if parent else None
    kept = {k: v for k, v in (attributes or {}).items() if v is not None}
    chosen = SpanKind[kind.upper()]
    with tracer.start_as_current_span(name, context=context, kind=chosen, attributes=kept) as s:
        yield s


def current_traceparent() -> str:
    """The current span as a W3C traceparent ("" when tracing is off or no span is open)."""
    if _Process.propagator is None:
        return ""
    carrier: dict[str, str] = {}
    _Process.propagator.inject(carrier)
    return carrier.get(TRACEPARENT, "")


def traceparent_of(headers: Mapping[str, str]) -> str | None:
    """An incoming request's traceparent header, when it sent one."""
    return headers.get(TRACEPARENT) or None


def tracing_active() -> bool:
    """Whether this process exports spans (configure_tracing found OTEL_* asking)."""
    return _Process.tracer is not None


def trace_headers() -> dict[str, str]:
    """``traceparent`` for an outgoing request, so the receiver joins the trace ({} off)."""
    traceparent = current_traceparent()
    return {TRACEPARENT: traceparent} if traceparent else {}


def annotate(**attributes: Any) -> None:
    """Set attributes on the current span (nothing when off)."""
    if _Process.tracer is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    for name, value in attributes.items():
        if value is not None:
            current.set_attribute(name, value)
