"""Worker metrics and its small HTTP port: /healthz and /metrics."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

if TYPE_CHECKING:
    from ocrq.consumer.flow import PageFlow

_STAGE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_BLOB_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class WorkerMetrics:
    """Jobs by outcome, pages, stage latencies, window fill, engine errors, in-flight, and
    the object store's latency, bytes and errors."""

    def __init__(self, tenants: frozenset[str] = frozenset()) -> None:
        r = self.registry = CollectorRegistry()
        # A tenant label only for the tenants OCRQ_QUOTAS names: bounded cardinality.
        self.tenants = tenants
        self.jobs = Counter("ocrq_jobs", "Jobs finished, by outcome", ["outcome"], registry=r)
        self.pages = Counter("ocrq_pages", "Pages recognised", registry=r)
        self.stage_seconds = Histogram(
            "ocrq_stage_seconds", "Stage latency", ["stage"], buckets=_STAGE_BUCKETS, registry=r
        )
        self.window_fill = Histogram(
            "ocrq_window_fill",
            "Jobs per collection window",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=r,
        )
        self.engine_errors = Counter(
            "ocrq_engine_errors", "Engine errors by code", ["code"], registry=r
        )
        self.in_flight = Gauge("ocrq_jobs_in_flight", "Jobs being processed", registry=r)
        self.engine_requests = Gauge(
            "ocrq_engine_requests_in_flight",
            "Engine requests (page groups) in flight",
            registry=r,
        )
        self.engine_slots = Gauge("ocrq_engine_slots", "Engine requests allowed", registry=r)
        self.render_ahead = Gauge(
            "ocrq_render_ahead_bytes", "Rendered pages waiting for an engine slot", registry=r
        )
        # The object store, as the producer counts it (same names): fed by observe_blob.
        self.blob_seconds = Histogram(
            "ocrq_blob_seconds",
            "Object store call latency, by operation",
            ["op"],
            buckets=_BLOB_BUCKETS,
            registry=r,
        )
        self.blob_bytes = Counter(
            "ocrq_blob_bytes", "Bytes moved to or from the object store", ["op"], registry=r
        )
        self.blob_errors = Counter(
            "ocrq_blob_errors", "Object store calls that failed, by operation", ["op"], registry=r
        )
        self.tenant_jobs = Counter(
            "ocrq_tenant_jobs",
            "Jobs ended, by tenant (OCRQ_QUOTAS' named ones, else other) and status",
            ["tenant", "status"],
            registry=r,
        )
        self.tenant_pages = Counter(
            "ocrq_tenant_pages", "Pages of ended jobs, by tenant", ["tenant"], registry=r
        )
        self.last_loop = time.monotonic()

    def tenant_ended(self, tenant: str, status: str, pages: int) -> None:
        """One job of the tenant ended (the store's on_end callback)."""
        label = tenant if tenant in self.tenants else "other"
        self.tenant_jobs.labels(label, status).inc()
        self.tenant_pages.labels(label).inc(pages)

    def observe_blob(self, op: str, seconds: float, nbytes: int, ok: bool) -> None:
        """One object store call (open_blob_store's observe callback)."""
        self.blob_seconds.labels(op).observe(seconds)
        if nbytes:
            self.blob_bytes.labels(op).inc(nbytes)
        if not ok:
            self.blob_errors.labels(op).inc()

    def watch_flow(self, flow: PageFlow) -> None:
        """Read the page flow's gauges from it at each scrape."""
        self.engine_requests.set_function(lambda: flow.engine.used)
        self.engine_slots.set_function(lambda: flow.engine.size)
        self.render_ahead.set_function(lambda: flow.render.ready_bytes)

    def alive(self, stale_after_s: float) -> bool:
        """True while the worker loop has turned recently."""
        return time.monotonic() - self.last_loop < stale_after_s


class HealthServer:
    """A minimal HTTP/1.1 server on the worker: GET /healthz and GET /metrics."""

    def __init__(self, metrics: WorkerMetrics, host: str, port: int, stale_after_s: float) -> None:
        self.metrics, self.host, self.port = metrics, host, port
        self.stale_after_s = stale_after_s
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        """Listen; return the bound port (useful when port is 0)."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening."""
        if self._server:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)

    def _respond(self, path: str) -> tuple[str, str, bytes]:
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.metrics.registry)
        if path == "/healthz":
            if self.metrics.alive(self.stale_after_s):
                return "200 OK", "application/json", b'{"status":"ok"}'
            return "503 Service Unavailable", "application/json", b'{"status":"stalled"}'
        return "404 Not Found", "application/json", b'{"code":"not_found"}'

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5.0):
                request_line = await reader.readline()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
            parts = request_line.decode("latin-1").split()
            path = parts[1].split("?")[0] if len(parts) >= 2 else "/"
            status, ctype, body = self._respond(path)
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await asyncio.wait_for(writer.drain(), 5.0)
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
