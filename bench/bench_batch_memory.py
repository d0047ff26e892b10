"""Producer memory and /healthz latency while clients send 1 GiB JSON and ZIP batches.

    .venv/bin/python -m bench.bench_batch_memory --gib 1 --clients 4
    .venv/bin/python -m bench.bench_batch_memory --scan-only [--scanner old_json_stream.py]

Starts a private Redis and `ocrq producer` (uvicorn, one process, the ZIP spool in the
scratch folder), writes one JSON batch body and one ZIP batch body of --gib GiB each to
disk, then, per format, has --clients threads each stream that body from disk as one
POST /v1/batches at the same time. Throughout, the producer's RSS (its process and any
children) is sampled every 50 ms, and /healthz is probed from a separate process.

The documents are 1 MiB each. One in --accept-every is a real PDF (padded to 1 MiB) and
becomes a job; the others are 1 MiB that no sniffer takes, refused as
unsupported_media_type after the producer has read (and, for JSON, base64-decoded) them
whole, exactly as an accepted one is read: the producer does all its work on every byte,
and Redis holds only the accepted jobs (each batch is deleted once answered).

--scan-only times the JSON batch scanner alone on a 64 MiB body in 64 KiB chunks
(plain base64, and base64 with an escaped newline every 76 characters); --scanner names
another json_stream.py to time instead (the code before, from `git show`).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib.util
import json
import multiprocessing
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import psutil

from ocrq.shared.embedded import free_port
from tests.support import measuring, processes, services
from tests.support.payloads import small_pdf

MIB = 1024 * 1024
GIB = 1024 * MIB
DOC_BYTES = MIB
UPLOAD_TIMEOUT_S = 900.0
PROBE_TIMEOUT_S = 10.0
RSS_TARGET_MIB = 300
P99_TARGET_MS = 50


def documents(count: int, accept_every: int) -> Iterator[tuple[str, bytes]]:
    """(filename, bytes) of each document: a padded PDF now and then, else unreadable bytes."""
    pdf = small_pdf("bench batch memory")
    accepted = pdf + b"%" * (DOC_BYTES - len(pdf))
    refused = b"NOT A DOCUMENT " * (DOC_BYTES // 15) + b"x" * (DOC_BYTES % 15)
    for i in range(count):
        if i % accept_every == 0:
            yield f"doc-{i:05d}.pdf", accepted
        else:
            yield f"doc-{i:05d}.bin", refused


def write_json_body(path: Path, count: int, accept_every: int) -> None:
    """{"documents": [{"document": "<base64>", "filename": …}, …]}, written as it is made."""
    encoded: dict[bytes, bytes] = {}
    with path.open("wb") as out:
        out.write(b'{"documents": [')
        for i, (name, data) in enumerate(documents(count, accept_every)):
            b64 = encoded.setdefault(data, base64.b64encode(data))
            out.write(b", " if i else b"")
            out.write(b'{"document": "' + b64 + b'", "filename": ' + json.dumps(name).encode())
            out.write(b"}")
        out.write(b"]}")


def write_zip_body(path: Path, count: int, accept_every: int) -> None:
    """A ZIP of the same documents, stored (a ratio check would refuse the padding deflated)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in documents(count, accept_every):
            archive.writestr(name, data)


def documents_for(gib: float, per_doc: int) -> int:
    """How many documents of per_doc bytes in the body make a body of about gib GiB."""
    return max(1, int((gib * GIB - MIB) // per_doc))


def probe(url: str, rate_hz: float, stop: Event, out: Any) -> None:
    """Child process: GET url at rate_hz until stop is set; send back the latencies (s)."""
    with httpx.Client(timeout=PROBE_TIMEOUT_S) as client:
        client.get(url)  # the keep-alive connection is open before the measurement
        out.send("ready")
        latencies, failures = measuring.paced_probes(
            client, url, rate_hz, lambda: not stop.is_set()
        )
    out.send((latencies, failures))
    out.close()


@dataclass
class Sampler:
    """The RSS of a process and its children, sampled in a thread until stopped."""

    pid: int
    every_s: float = 0.05
    samples: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def cpu_s(self) -> float:
        """CPU seconds (user + system) used so far by the process tree."""
        root = psutil.Process(self.pid)
        total = 0.0
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = proc.cpu_times()
                total += times.user + times.system
        return total

    def rss(self) -> int:
        """Bytes resident now, over the process tree."""
        root = psutil.Process(self.pid)
        total = 0
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                total += proc.memory_info().rss
        return total

    def run(self) -> None:
        """Sample until stop is set."""
        while not self.stop.wait(self.every_s):
            with contextlib.suppress(psutil.NoSuchProcess):
                self.samples.append(self.rss())


@dataclass
class Phase:
    """One format's run: RSS samples, probe latencies, what each client got back."""

    name: str
    body_bytes: int
    seconds: float
    rss: list[int]
    latencies: list[float]
    failures: int
    answers: list[str]
    cpu_s: float

    def pct(self, q: float) -> float:
        """The q-quantile of the probe latencies in ms (nearest rank)."""
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] * 1000


def send_batch(url: str, body: Path, content_type: str, answers: list[str]) -> None:
    """POST one batch body streamed from disk; note the answer; delete the batch."""
    with httpx.Client(timeout=UPLOAD_TIMEOUT_S) as client, body.open("rb") as f:
        try:
            r = client.post(f"{url}/v1/batches", content=f, headers={"content-type": content_type})
            if r.status_code != 202:
                answers.append(f"{r.status_code}: {r.text[:200]}")
                return
            reply = r.json()
            accepted, rejected = len(reply["accepted"]), len(reply["rejected"])
            answers.append(f"202 {accepted} accepted {rejected} refused")
            client.delete(f"{url}/v1/batches/{reply['id']}").raise_for_status()
        except httpx.HTTPError as e:
            answers.append(f"error: {e!r}")


def run_phase(
    url: str, pid: int, name: str, body: Path | None, content_type: str, args: Any
) -> Phase:
    """Every client sends the body once, at the same time, while RSS and /healthz are watched;
    with no body, the same for --idle-s seconds with nothing sent (the baseline)."""
    ctx = multiprocessing.get_context("spawn")
    stop, (receiver, sender) = ctx.Event(), ctx.Pipe(duplex=False)
    prober = ctx.Process(target=probe, args=(f"{url}/healthz", args.rate, stop, sender))
    sampler = Sampler(pid)
    watcher = threading.Thread(target=sampler.run, daemon=True)
    answers: list[str] = []
    clients = [
        threading.Thread(target=send_batch, args=(url, body, content_type, answers), daemon=True)
        for _ in range(args.clients if body else 0)
    ]
    prober.start()
    watcher.start()
    try:
        if not receiver.poll(60) or receiver.recv() != "ready":
            raise TimeoutError("the /healthz prober did not start")
        started, cpu_before = time.perf_counter(), sampler.cpu_s()
        for t in clients:
            t.start()
        for t in clients:
            t.join(UPLOAD_TIMEOUT_S + 30)
        if body is None:
            time.sleep(args.idle_s)
        seconds, cpu_s = time.perf_counter() - started, sampler.cpu_s() - cpu_before
    finally:
        stop.set()
        sampler.stop.set()
        watcher.join(5)
        got = receiver.recv() if receiver.poll(PROBE_TIMEOUT_S + 10) else ([], -1)
        prober.join(10)
        if prober.is_alive():
            prober.kill()
            prober.join(10)
    latencies, failures = got
    size = body.stat().st_size if body else 0
    return Phase(name, size, seconds, sampler.samples, latencies, failures, answers, cpu_s)


def print_phases(phases: list[Phase], baseline_rss: int, clients: int) -> None:
    """One row per phase, then the targets."""
    print(
        f"\n{'phase':<5} {'body MiB':>8} {'s':>6} {'MiB/s in':>8} {'CPU s':>6} {'RSS max MiB':>11} "
        f"{'probes':>6} {'fail':>4} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}"
    )
    for p in phases:
        peak = max(p.rss, default=0) / MIB
        rate = (clients if p.body_bytes else 0) * p.body_bytes / MIB / p.seconds
        print(
            f"{p.name:<5} {p.body_bytes / MIB:>8.0f} {p.seconds:>6.1f} {rate:>8.1f} "
            f"{p.cpu_s:>6.1f} "
            f"{peak:>11.0f} "
            f"{len(p.latencies):>6} {p.failures:>4} {p.pct(0.5):>7.2f} {p.pct(0.99):>7.2f} "
            f"{p.pct(1.0):>7.2f}"
        )
    print(f"producer RSS before the uploads: {baseline_rss / MIB:.0f} MiB")
    for p in phases[1:]:
        print(f"{p.name} answers: {sorted(set(p.answers))}")
        peak_ok = max(p.rss, default=0) / MIB < RSS_TARGET_MIB
        p99_ok = p.pct(0.99) < P99_TARGET_MS
        print(
            f"{p.name}: RSS < {RSS_TARGET_MIB} MiB {'yes' if peak_ok else 'NO'}, "
            f"/healthz p99 < {P99_TARGET_MS} ms {'yes' if p99_ok else 'NO'}"
        )


def load_scanner(path: Path | None) -> ModuleType:
    """The json_stream module to time: the package's, or one from a file."""
    if path is None:
        from ocrq.producer.batches import json_stream

        return json_stream
    spec = importlib.util.spec_from_file_location("json_stream_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_scanner(module: ModuleType, mib: int) -> None:
    """MiB/s of DocumentArrayScanner over a body of about mib MiB, fed 64 KiB at a time."""
    doc = bytes(range(256)) * (3 * 4096)  # 3 MiB
    plain = base64.b64encode(doc)
    escaped = base64.encodebytes(doc).replace(b"\n", b"\\n")
    for name, b64 in (("plain base64", plain), ("base64 + \\n every 76", escaped)):
        element = b'{"document": "' + b64 + b'", "filename": "a.pdf"}'
        count = max(1, mib * MIB // len(element))
        body = b'{"documents": [' + b", ".join([element] * count) + b"]}"
        scanner = module.DocumentArrayScanner(max_element=len(element) + 1)
        started = time.perf_counter()
        out = 0
        for i in range(0, len(body), 64 * 1024):
            out += len(list(scanner.feed(body[i : i + 64 * 1024])))
        scanner.close()
        seconds = time.perf_counter() - started
        assert out == count
        print(
            f"{module.__file__}: {name}: {len(body) / MIB / seconds:.1f} MiB/s "
            f"({len(body) / MIB:.0f} MiB in {seconds:.2f} s)"
        )


def main() -> int:
    """Parse flags; time the scanner, or run both formats against one producer."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="size of each batch body")
    parser.add_argument("--clients", type=int, default=4, help="concurrent uploads per format")
    parser.add_argument("--rate", type=float, default=50.0, help="/healthz probes per second")
    parser.add_argument("--accept-every", type=int, default=16, help="1 in N is a real PDF")
    parser.add_argument("--formats", default="json,zip", help="json, zip or both")
    parser.add_argument("--idle-s", type=float, default=10.0, help="the idle phase's length")
    parser.add_argument("--keep-log", type=Path, help="write bodies and the producer log here")
    parser.add_argument("--scan-only", action="store_true", help="time the JSON scanner only")
    parser.add_argument("--scan-mib", type=int, default=64)
    parser.add_argument("--scanner", type=Path, help="another json_stream.py to time")
    args = parser.parse_args()
    if args.scan_only:
        time_scanner(load_scanner(args.scanner), args.scan_mib)
        return 0
    json_count = documents_for(args.gib, len(base64.b64encode(bytes(DOC_BYTES))) + 48)
    zip_count = documents_for(args.gib, DOC_BYTES + 120)  # + local header, directory entry
    limit = max(GIB, int(args.gib * GIB) + 16 * MIB)
    with services.scratch_dir() as tmp, services.private_redis(tmp) as redis_url:
        if args.keep_log:
            tmp = args.keep_log
        bodies = {"json": tmp / "batch.json", "zip": tmp / "batch.zip"}
        write_json_body(bodies["json"], json_count, args.accept_every)
        write_zip_body(bodies["zip"], zip_count, args.accept_every)
        (tmp / "spool").mkdir()
        env = {
            "redis_url": redis_url,
            "log_format": "json",
            "log_level": "warning",
            "max_batch_bytes": str(limit),
            "spool_dir": str(tmp / "spool"),
            "spool_slots": str(args.clients),
            "max_backlog": "1000000",
        }
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        command = ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
        with processes.ocrq_process(
            "producer", command, env, f"{url}/healthz", tmp / "p.log"
        ) as proc:
            baseline = Sampler(proc.pid).rss()
            print(
                f"producer {url} (pid {proc.pid}); 1 MiB documents, 1 in {args.accept_every} a PDF"
            )
            types = {"json": "application/json", "zip": "application/zip"}
            phases = [run_phase(url, proc.pid, "idle", None, "", args)]
            for name in args.formats.split(","):
                size = bodies[name].stat().st_size / MIB
                print(f"{name}: {args.clients} clients x {size:.0f} MiB", flush=True)
                phases.append(run_phase(url, proc.pid, name, bodies[name], types[name], args))
    print_phases(phases, baseline, args.clients)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
