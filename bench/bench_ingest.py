"""Producer responsiveness: /healthz latency while 10 MB base64 JSON uploads are decoded.

    .venv/bin/python -m bench.bench_ingest --seconds 20 --clients 4

Starts a private Redis and `ocrq producer` (uvicorn, one process), then probes /healthz at a
steady rate from a separate process with its own httpx client, while another process follows
one job's Server-Sent Events (it moves the job's ``pages_done`` every 250 ms and publishes the
change, as a worker does, and times each event from publication to arrival), and a thread
samples the producer's RSS, in phases side by side: idle;
while N client threads keep submitting 10 MiB documents as JSON base64 (each job is cancelled
right after it is accepted, which drops its document, so Redis stays small); and, as a
control, the same documents as raw bodies (no base64, no decode thread). Also times one
synchronous decode_json_submission of the same body in this process: the stall the thread
offload keeps off the event loop.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from bench.bench_enqueue import relay_floor
from bench.ingest_decode import (
    MIB,
    fake_png,
    print_decode,
    submission_body,
    time_gil_steps,
    time_sync_decode,
)
from bench.ingest_observers import EVENT_PERIOD_S, Fronts, measure_phase
from tests.support import services

UPLOAD_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Upload:
    """What a busy phase's clients send: a phase name, the body and its Content-Type."""

    name: str
    body: bytes
    content_type: str


@dataclass
class Uploads:
    """Completed uploads, shared by the uploader threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    finished_at: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def record(self, started: float, ended: float) -> None:
        """One accepted upload."""
        with self.lock:
            self.finished_at.append(ended)
            self.latencies.append(ended - started)

    def between(self, start: float, end: float) -> int:
        """Uploads that finished in [start, end]."""
        with self.lock:
            return sum(1 for t in self.finished_at if start <= t <= end)


def upload_loop(
    url: str,
    upload: Upload,
    period_s: float,
    offset_s: float,
    stop: threading.Event,
    uploads: Uploads,
) -> None:
    """Submit the body until stop is set, one every period_s at most (0: back to back), the
    first after offset_s (clients spread over the period); cancel each job so its document
    leaves Redis."""
    headers = {"Content-Type": upload.content_type}
    body = upload.body
    next_at = time.perf_counter() + offset_s
    with httpx.Client(timeout=UPLOAD_TIMEOUT_S) as client:
        while not stop.wait(max(0.0, next_at - time.perf_counter())):
            next_at = max(next_at + period_s, time.perf_counter() - period_s)
            started = time.perf_counter()
            try:
                r = client.post(f"{url}/v1/jobs", content=body, headers=headers)
                if r.status_code != 202:
                    raise RuntimeError(f"submit answered {r.status_code}: {r.text[:200]}")
                uploads.record(started, time.perf_counter())
                client.delete(f"{url}/v1/jobs/{r.json()['id']}").raise_for_status()
            except (httpx.HTTPError, RuntimeError) as e:
                with uploads.lock:
                    uploads.errors.append(str(e))
                stop.wait(0.5)


@dataclass(frozen=True)
class Phase:
    name: str
    latencies: list[float]
    failures: int
    seconds: float
    body_bytes: int = 0
    uploads: int = 0
    upload_latencies: list[float] = field(default_factory=list)
    event_delays: list[float] = field(default_factory=list)
    event_gap: float = 0.0
    rss_peak: int = 0

    def pct(self, q: float) -> float:
        """The q-quantile of the probe latencies, in ms (nearest rank)."""
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        index = min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))
        return ordered[index] * 1000


def busy_phase(fronts: Fronts, redis_url: str, upload: Upload, args: argparse.Namespace) -> Phase:
    """Probe while `clients` threads keep uploading; count uploads inside the probe window."""
    uploads, stop = Uploads(), threading.Event()
    period_s = args.clients / args.upload_rate if args.upload_rate else 0.0
    threads = [
        threading.Thread(
            target=upload_loop,
            args=(fronts.uploads, upload, period_s, i * period_s / args.clients, stop, uploads),
            daemon=True,
        )
        for i in range(args.clients)
    ]
    for t in threads:
        t.start()
    try:
        time.sleep(args.warmup)  # every client has an upload in flight before probing starts
        started = time.perf_counter()
        latencies, failures, delays, gap, rss = measure_phase(fronts, redis_url, args)
        ended = time.perf_counter()
    finally:
        stop.set()
        for t in threads:
            t.join(UPLOAD_TIMEOUT_S + 5)
    if uploads.errors:
        print(f"upload errors ({len(uploads.errors)}), first: {uploads.errors[0]}")
    return Phase(
        upload.name,
        latencies,
        failures,
        ended - started,
        len(upload.body),
        uploads.between(started, ended),
        uploads.latencies,
        delays,
        gap,
        rss,
    )


def print_table(phases: list[Phase], doc_bytes: int) -> None:
    """Probe latencies and upload throughput per phase, then p99 ratios against the first."""
    print(
        f"\n{'phase':<6} {'probes':>6} {'fail':>4} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>8} "
        f"{'uploads/s':>9} {'doc MB/s':>8} {'body MB/s':>9} {'upload p50 ms':>13}"
    )
    for p in phases:
        rate = p.uploads / p.seconds
        upload_p50 = statistics.median(p.upload_latencies) * 1000 if p.upload_latencies else 0
        print(
            f"{p.name:<6} {len(p.latencies):>6} {p.failures:>4} {p.pct(0.50):>7.2f} "
            f"{p.pct(0.99):>7.2f} {p.pct(1.0):>8.2f} {rate:>9.2f} {rate * doc_bytes / 1e6:>8.1f} "
            f"{rate * p.body_bytes / 1e6:>9.1f} {upload_p50:>13.0f}"
        )
    print(
        f"\n{'phase':<6} {'events':>6} {'delay p50 ms':>12} {'delay max ms':>12} "
        f"{'longest gap ms':>14} {'producer RSS peak MiB':>21}"
    )
    for p in phases:
        ordered = sorted(p.event_delays) or [float("nan")]
        print(
            f"{p.name:<6} {len(p.event_delays):>6} {statistics.median(ordered) * 1000:>12.1f} "
            f"{ordered[-1] * 1000:>12.1f} {p.event_gap * 1000:>14.1f} {p.rss_peak / MIB:>21.0f}"
        )
    print(f"(a change every {EVENT_PERIOD_S * 1000:.0f} ms: the gap beyond that is lateness)")
    base = phases[0]
    for p in phases[1:]:
        print(f"p99({p.name}) / p99({base.name}) = {p.pct(0.99) / base.pct(0.99):.2f}x")


def front(
    name: str, redis_url: str, tmp: Path, env: dict[str, str]
) -> contextlib.AbstractContextManager[str]:
    """The producer (uvicorn, one process) or the floor relay, serving until the block ends."""
    if name == "floor":
        return relay_floor(redis_port(redis_url), tmp / "floor.log")
    return services.producer(redis_url, tmp, 1, **env)


@contextlib.contextmanager
def observed_front(
    args: argparse.Namespace, url: str, redis_url: str, tmp: Path
) -> Iterator[Fronts]:
    """The uploads' front observed itself, or an idle floor relay observed beside it: what
    the box's scheduling alone costs a process that has nothing else to do."""
    if args.observe == "same":
        yield Fronts(url, url, args.front == "floor")
        return
    with relay_floor(redis_port(redis_url), tmp / "observed-floor.log") as idle:
        yield Fronts(url, idle, True)


def redis_port(redis_url: str) -> int:
    """The port of redis://host:port[/db]."""
    port = urlsplit(redis_url).port
    if port is None:
        raise ValueError(f"no port in {redis_url}")
    return port


def main() -> int:
    """Parse flags, run the phases against one producer, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="probing time per phase")
    parser.add_argument("--rate", type=float, default=100.0, help="/healthz probes per second")
    parser.add_argument("--clients", type=int, default=4, help="concurrent uploaders")
    parser.add_argument(
        "--observe",
        choices=["same", "idle-floor"],
        default="same",
        help="probe /healthz and follow events on the uploads' front, or on an idle floor "
        "relay beside it (the box's own scheduling delay)",
    )
    parser.add_argument(
        "--upload-rate",
        type=float,
        default=0.0,
        help="uploads per second, all clients together (0: each client back to back)",
    )
    parser.add_argument("--doc-mib", type=float, default=10.0, help="document size in MiB")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of uploads first")
    parser.add_argument("--decode-repeats", type=int, default=5)
    parser.add_argument(
        "--front",
        choices=["ocrq", "floor"],
        default="ocrq",
        help="what serves: the producer as shipped, or the raw relay (bench/relay_floor.py)",
    )
    parser.add_argument(
        "--no-raw", action="store_true", help="skip the raw-upload phase (no base64 decode)"
    )
    args = parser.parse_args()
    doc_bytes = int(args.doc_mib * MIB)
    document = fake_png(doc_bytes)
    body = submission_body(document)
    decode_s = time_sync_decode(body, doc_bytes, args.decode_repeats)
    steps = time_gil_steps(body, args.decode_repeats)
    uploads = [Upload("json", body, "application/json")]
    if not args.no_raw:
        uploads.append(Upload("raw", document, "image/png"))
    env = {"max_backlog": "1000000000", "max_document_bytes": str(doc_bytes)}
    with services.scratch_dir() as tmp, services.private_redis(tmp) as redis_url:
        with (
            front(args.front, redis_url, tmp, env) as url,
            observed_front(args, url, redis_url, tmp) as fronts,
        ):
            print(f"{args.front} {url}; idle phase: {args.seconds:g} s at {args.rate:g} probes/s")
            print(f"/healthz and events from {fronts.observed}")
            started = time.perf_counter()
            latencies, failures, delays, gap, rss = measure_phase(fronts, redis_url, args)
            elapsed = time.perf_counter() - started
            phases = [
                Phase("idle", latencies, failures, elapsed, event_delays=delays, event_gap=gap,
                      rss_peak=rss)
            ]  # fmt: skip
            for upload in uploads:
                print(f"{upload.name} phase: {args.clients} clients uploading {args.doc_mib:g} MiB")
                phases.append(busy_phase(fronts, redis_url, upload, args))
    print_table(phases, doc_bytes)
    print_decode(decode_s, steps, doc_bytes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
