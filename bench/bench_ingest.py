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
import base64
import binascii
import contextlib
import itertools
import json
import multiprocessing
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec
import psutil
import redis

from bench import relay_floor as floor_relay
from bench.bench_enqueue import relay_floor
from ocrq.producer.jobs.decoding import clean_slice, decode_plain
from ocrq.producer.jobs.ingest import Query, SubmitPlain, decode_json_slowly, decode_json_submission
from ocrq.shared.keys import Keys
from ocrq.shared.schemas import SubmitBody
from tests.support import measuring, services

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PROBE_TIMEOUT_S = 10.0
UPLOAD_TIMEOUT_S = 60.0
MIB = 1024 * 1024


EVENT_PERIOD_S = 0.25  # between the follower's changes: more than the SSE coalescing window


def follow_events(url: str, redis_url: str, seconds: float, floor: bool, conn: Connection) -> None:
    """Child process: queue a job, move it every EVENT_PERIOD_S for `seconds` and follow its
    event stream; send back each event's delay from publication (s) and the longest gap."""
    store = redis.Redis.from_url(redis_url)
    published: dict[int, float] = {}
    arrivals: list[tuple[float, int]] = []
    with httpx.Client(timeout=PROBE_TIMEOUT_S) as client:
        queued = client.post(
            f"{url}/v1/jobs", content=fake_png(1024), headers={"content-type": "image/png"}
        )
        job_id = queued.raise_for_status().json()["id"]
        deadline = time.time() + seconds
        where = floor_relay.where_job(job_id) if floor else (Keys().job(job_id), Keys().events)
        mover = threading.Thread(
            target=move_job, args=(store, where, job_id, deadline, published), daemon=True
        )
        events_url = f"{url}/v1/jobs/{job_id}/events"
        with client.stream("GET", events_url, timeout=seconds + PROBE_TIMEOUT_S) as stream:
            mover.start()
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    view = json.loads(line[5:])
                    if view.get("status") == "queued":  # not the last, the mover's ending
                        done = (view.get("progress") or {}).get("pages_done", 0)
                        arrivals.append((time.time(), done))
                if time.time() > deadline + 1.0:
                    break
        mover.join(PROBE_TIMEOUT_S)
    delays = [at - published[k] for at, k in arrivals if k in published]
    # From the first change on: the stream's first event is the state it found.
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(arrivals[1:])]
    conn.send((delays, max(gaps, default=0.0)))
    conn.close()


def move_job(
    store: redis.Redis,
    where: tuple[str, str],
    job_id: str,
    deadline: float,
    published: dict[int, float],
) -> None:
    """What a worker's progress does to a job: pages_done moves, the change is published on
    the channel (where = the job's hash, the channel)."""
    job_key, channel = where
    done = 0
    # The first change a period in: one right at the stream's start would wait out the
    # coalescing window of the stream's first read, which no later event does.
    time.sleep(EVENT_PERIOD_S)
    while time.time() < deadline:
        done += 1
        store.hset(job_key, "pages_done", done)
        published[done] = time.time()
        event = {"id": job_id, "status": "queued", "pages_done": done}
        store.publish(channel, msgspec.json.encode(event))
        time.sleep(EVENT_PERIOD_S)
    store.hset(job_key, "status", "cancelled")  # a terminal state ends the stream
    store.publish(channel, msgspec.json.encode({"id": job_id, "status": "cancelled"}))


def in_child(target: Callable[..., None], budget_s: float, *args: object) -> Any:
    """Run target(*args, conn) in a spawned process (its clock free of the uploaders' GIL)."""
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(*args, sender))
    proc.start()
    try:
        if not receiver.poll(budget_s):
            raise TimeoutError(f"{target.__name__} gave no result within {budget_s:.0f} s")
        return receiver.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(10)


class RssPeak:
    """The producer's peak resident memory (its process and children), sampled every 50 ms."""

    def __init__(self, url: str) -> None:
        port = int(url.rsplit(":", 1)[1])
        pids = {c.pid for c in psutil.net_connections("tcp") if c.laddr.port == port and c.pid}
        self.procs = [psutil.Process(pid) for pid in pids]
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            rss = sum(p.memory_info().rss for p in self.procs)
            self.peak = max(self.peak, rss)

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(1.0)


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
    budget_s = seconds + PROBE_TIMEOUT_S + 30
    result: tuple[list[float], int] = in_child(
        probe_healthz, budget_s, f"{url}/healthz", seconds, rate_hz
    )
    return result


@dataclass(frozen=True)
class Fronts:
    """Where uploads go (and whose RSS is sampled), and where /healthz is probed and the
    followed job's events are read: the same front, or an idle floor relay beside it."""

    uploads: str
    observed: str
    observed_is_floor: bool


def measure_phase(
    fronts: Fronts, redis_url: str, args: argparse.Namespace
) -> tuple[list[float], int, list[float], float, int]:
    """Probes, the followed job's event delays and longest gap, and the peak RSS, at once."""
    seconds, url = args.seconds, fronts.observed
    with RssPeak(fronts.uploads) as rss, ThreadPoolExecutor(1) as pool:
        budget_s = seconds + PROBE_TIMEOUT_S + 30
        floor = fronts.observed_is_floor
        followed = pool.submit(in_child, follow_events, budget_s, url, redis_url, seconds, floor)
        latencies, failures = run_probes(url, seconds, args.rate)
        delays, gap = followed.result(budget_s)
    return latencies, failures, delays, gap, rss.peak


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


def fake_png(doc_bytes: int) -> bytes:
    """PNG magic bytes then zeros: accepted at ingest, whose type sniffing reads the magic."""
    return PNG_MAGIC + bytes(doc_bytes - len(PNG_MAGIC))


def submission_body(document: bytes) -> bytes:
    """A JSON submission of the document, base64-encoded."""
    payload = {"document": base64.b64encode(document).decode(), "filename": "bench.png"}
    return msgspec.json.encode(payload)


class NativeBase64(msgspec.Struct):
    """The fast path before pybase64: msgspec's own base64 decoder, into bytes."""

    document: bytes
    filename: str | None = None


def time_gil_steps(body: bytes, repeats: int) -> dict[str, float]:
    """Median ms of the single C calls inside the decode that hold the GIL from start to end."""
    submit = msgspec.json.decode(body, type=SubmitBody)
    clean = clean_slice(submit.document, 0)
    text = msgspec.json.decode(body, type=SubmitPlain).document
    steps: dict[str, Callable[[], object]] = {
        "msgspec decode, document left as JSON text (one call)": lambda: msgspec.json.decode(
            body, type=SubmitPlain
        ),
        "decode_plain: pybase64 of the document (one call)": lambda: decode_plain(text),
        "msgspec decode, its native base64 (the path before)": lambda: msgspec.json.decode(
            body, type=NativeBase64
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
    (the document as JSON text, then pybase64) and the slice-by-slice fallback (data URIs, …)."""
    decoders = {
        "decode_json_submission (pybase64)": decode_json_submission,
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


def print_decode(decode_s: dict[str, list[float]], steps: dict[str, float], doc_bytes: int) -> None:
    """The synchronous decode times and the longest uninterruptible steps."""
    print(f"\none synchronous decode of a {doc_bytes / MIB:g} MiB document (ms, median / max):")
    for name, seconds in decode_s.items():
        median, worst = statistics.median(seconds) * 1000, max(seconds) * 1000
        print(f"  {name:<40} {median:>6.1f} / {worst:.1f}")
    print("longest single GIL-holding steps (median ms):")
    for name, ms in steps.items():
        print(f"  {name:<40} {ms:>6.1f}")


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
