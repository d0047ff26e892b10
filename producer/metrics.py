"""Prometheus metrics of the producer, in a registry owned by the app."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class ProducerMetrics:
    """Requests by route and status, bytes accepted, enqueue latency, lane backlog, the
    object store's latency, bytes and errors by operation, and the audit trail's losses."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ocrq_http_requests", "HTTP requests", ["route", "status"], registry=self.registry
        )
        self.accepted_bytes = Counter(
            "ocrq_accepted_bytes", "Document bytes accepted", registry=self.registry
        )
        self.enqueue_seconds = Histogram(
            "ocrq_enqueue_seconds",
            "Latency of the enqueue script",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=self.registry,
        )
        self.lane_lag = Gauge(
            "ocrq_lane_lag", "Entries not yet delivered", ["lane"], registry=self.registry
        )
        self.redis_memory_used = Gauge(
            "ocrq_redis_memory_used_bytes", "Redis used_memory", registry=self.registry
        )
        self.redis_memory_max = Gauge(
            "ocrq_redis_memory_max_bytes",
            "Redis maxmemory (0: no limit); uploads get 503 when used reaches it",
            registry=self.registry,
        )
        self.lane_pending = Gauge(
            "ocrq_lane_pending",
            "Entries delivered, not yet acked",
            ["lane"],
            registry=self.registry,
        )
        self.blob_seconds = Histogram(
            "ocrq_blob_seconds",
            "Latency of object store calls",
            ["op"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0),
            registry=self.registry,
        )
        self.blob_bytes = Counter(
            "ocrq_blob_bytes",
            "Bytes moved to (write) or from (read) the object store",
            ["op", "direction"],
            registry=self.registry,
        )
        self.blob_errors = Counter(
            "ocrq_blob_errors",
            "Object store calls that failed (unreachable, timed out, refused)",
            ["op"],
            registry=self.registry,
        )
        self.audit_write_failures = Counter(
            "ocrq_audit_write_failures",
            "Audit entries Redis did not take (logged at error level; the request was answered)",
            registry=self.registry,
        )
        self.audit_refusals_unstored = Counter(
            "ocrq_audit_refusals_unstored",
            "Refused credentials logged but not stored: past the process's budget per minute",
            registry=self.registry,
        )

    def observe_blob(self, op: str, seconds: float, nbytes: int, ok: bool) -> None:
        """One store call (open_blob_store's ``observe``): its latency, bytes, failure."""
        self.blob_seconds.labels(op).observe(seconds)
        if nbytes:
            direction = "write" if op.startswith("put") else "read"
            self.blob_bytes.labels(op, direction).inc(nbytes)
        if not ok:
            self.blob_errors.labels(op).inc()
