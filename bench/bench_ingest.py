"""Producer responsiveness: /healthz latency while 10 MB base64 JSON uploads are decoded.

    .venv/bin/python -m bench.bench_ingest --seconds 20 --clients 4

Starts a private Redis and `ocrq producer` (uvicorn, one process), then probes /healthz at a
steady rate from a separate process with its own httpx client, in phases side by side: idle;
while N client threads keep submitting 10 MiB documents as JSON base64 (each job is cancelled
right after it is accepted, which drops its document, so Redis stays small); and, as a
control, the same documents as raw bodies (no base64, no decode thread). Also times one
synchronous decode_json_submission of the same body in this process: the stall the thread
offload keeps off the event loop.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import multiprocessing
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

import httpx
import msgspec

from ocrq.producer.jobs.decoding import clean_slice
from ocrq.producer.jobs.ingest import Query, SubmitPlain, decode_json_slowly, decode_json_submission
from ocrq.shared.schemas import SubmitBody
from tests.support import measuring, services

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PROBE_TIMEOUT_S = 10.0
UPLOAD_TIMEOUT_S = 60.0
MIB = 1024 * 1024


def probe_healthz(url: str, seconds: float, rate_hz: float, conn: Connection) -> None:
    """Child process: GET url at rate_hz for `seconds`; send back (latencies in s, failures)."""
    with httpx.Client(timeout=PROBE_TIMEOUT_S) as client:
        client.get(url)  # open the keep-alive connection outside the measurement
        deadline = time.perf_counter() + seconds
        latencies, failures = measuring.paced_probes(
            client, url, rate_hz, lambda: time.perf_counter() < deadline
        )
    conn.send((latencies, failures))
    conn.close()


def run_probes(url: str, seconds: float, rate_hz: float) -> tuple[list[float], int]:
    """Run the prober in its own process, so the uploaders' GIL never delays its clock."""
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=probe_healthz, args=(f"{url}/healthz", seconds, rate_hz, sender))
    proc.start()
    try:
        budget_s = seconds + PROBE_TIMEOUT_S + 30
        if not receiver.poll(budget_s):
            raise TimeoutError(f"prober gave no result within {budget_s:.0f} s")
        latencies, failures = receiver.recv()
        return latencies, failures
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(10)


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


def upload_loop(url: str, upload: Upload, stop: threading.Event, uploads: Uploads) -> None:
    """Submit the body until stop is set; cancel each job so its document leaves Redis."""
    headers = {"Content-Type": upload.content_type}
    body = upload.body
    with httpx.Client(timeout=UPLOAD_TIMEOUT_S) as client:
        while not stop.is_set():
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


def fake_png(doc_bytes: int) -> bytes:
    """PNG magic bytes then zeros: accepted at ingest, whose type sniffing reads the magic."""
    return PNG_MAGIC + bytes(doc_bytes - len(PNG_MAGIC))


def submission_body(document: bytes) -> bytes:
    """A JSON submission of the document, base64-encoded."""
    payload = {"document": base64.b64encode(document).decode(), "filename": "bench.png"}
    return msgspec.json.encode(payload)


def time_gil_steps(body: bytes, repeats: int) -> dict[str, float]:
    """Median ms of the single C calls inside the decode that hold the GIL from start to end."""
    submit = msgspec.json.decode(body, type=SubmitBody)
    clean = clean_slice(submit.document, 0)
    steps: dict[str, Callable[[], object]] = {
        "msgspec decode, native base64 (one call)": lambda: msgspec.json.decode(
            body, type=SubmitPlain
        ),
        "msgspec decode, document as str": lambda: msgspec.json.decode(body, type=SubmitBody),
        "clean_slice (encode + translate, 1 MiB)": lambda: clean_slice(submit.document, 0),
        "a2b_base64 of one 1 MiB slice": lambda: binascii.a2b_base64(clean, strict_mode=True),
    }
    medians = {}
    for name, step in steps.items():
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            step()
            times.append(time.perf_counter() - started)
        medians[name] = statistics.median(times) * 1000
    return medians


def time_sync_decode(body: bytes, max_document: int, repeats: int) -> dict[str, list[float]]:
    """Seconds per decode of body, once per repeat each, in this process: the shipped path
    (msgspec's native base64 into bytes) and the slice-by-slice fallback (data URIs, …)."""
    decoders = {
        "decode_json_submission (native base64)": decode_json_submission,
        "decode_json_slowly (slice by slice)": decode_json_slowly,
    }
    times: dict[str, list[float]] = {name: [] for name in decoders}
    for _ in range(repeats):
        for name, decode in decoders.items():
            started = time.perf_counter()
            decode(body, max_document, Query(None, {}))
            times[name].append(time.perf_counter() - started)
    return times


@dataclass(frozen=True)
class Phase:
    name: str
    latencies: list[float]
    failures: int
    seconds: float
    body_bytes: int = 0
    uploads: int = 0
    upload_latencies: list[float] = field(default_factory=list)

    def pct(self, q: float) -> float:
        """The q-quantile of the probe latencies, in ms (nearest rank)."""
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        index = min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))
        return ordered[index] * 1000


def busy_phase(url: str, upload: Upload, args: argparse.Namespace) -> Phase:
    """Probe while `clients` threads keep uploading; count uploads inside the probe window."""
    uploads, stop = Uploads(), threading.Event()
    threads = [
        threading.Thread(target=upload_loop, args=(url, upload, stop, uploads), daemon=True)
        for _ in range(args.clients)
    ]
    for t in threads:
        t.start()
    try:
        time.sleep(args.warmup)  # every client has an upload in flight before probing starts
        started = time.perf_counter()
        latencies, failures = run_probes(url, args.seconds, args.rate)
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
    base = phases[0]
    for p in phases[1:]:
        print(f"p99({p.name}) / p99({base.name}) = {p.pct(0.99) / base.pct(0.99):.2f}x")


def print_decode(decode_s: dict[str, list[float]], steps: dict[str, float], doc_bytes: int) -> None:
    """The synchronous decode times and the longest uninterruptible steps."""
    print(f"\none synchronous decode of a {doc_bytes / MIB:g} MiB document (ms, median / max):")
    for name, seconds in decode_s.items():
        median, worst = statistics.median(seconds) * 1000, max(seconds) * 1000
        print(f"  {name:<40} {median:>6.1f} / {worst:.1f}")
    print("longest single GIL-holding steps (median ms):")
    for name, ms in steps.items():
        print(f"  {name:<40} {ms:>6.1f}")


def main() -> int:
    """Parse flags, run the phases against one producer, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="probing time per phase")
    parser.add_argument("--rate", type=float, default=100.0, help="/healthz probes per second")
    parser.add_argument("--clients", type=int, default=4, help="concurrent uploaders")
    parser.add_argument("--doc-mib", type=float, default=10.0, help="document size in MiB")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of uploads first")
    parser.add_argument("--decode-repeats", type=int, default=5)
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
        with services.producer(redis_url, tmp, **env) as url:
            print(f"producer {url}; idle phase: {args.seconds:g} s at {args.rate:g} probes/s")
            started = time.perf_counter()
            latencies, failures = run_probes(url, args.seconds, args.rate)
            phases = [Phase("idle", latencies, failures, time.perf_counter() - started)]
            for upload in uploads:
                print(f"{upload.name} phase: {args.clients} clients uploading {args.doc_mib:g} MiB")
                phases.append(busy_phase(url, upload, args))
    print_table(phases, doc_bytes)
    print_decode(decode_s, steps, doc_bytes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
