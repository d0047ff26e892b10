"""A 300 MB, 1,500-page scan through a presigned upload: the worker's memory and /dev/shm.

    .venv/bin/python -m bench.bench_big_scan --pages 1500 --dpi 72 --render-ahead-mb 64

Makes (once, cached under --cache, /tmp) a scanned PDF of --pages pages, each one JPEG of
~200 KB of random noise (tests/support/noise_scans.py: written page by page, nothing
compresses it). Starts a private Redis, SeaweedFS, the fake vLLM (latency 0), a producer
and one worker with the store; the worker's page folder is under /dev/shm and its document
spool (the PDF read from the store, over OCRQ_SPOOL_SHM_MAX_MB) on local disk. Then
POST /v1/uploads, a PUT of the file streamed from disk to the presigned URL, and
POST /v1/jobs {"source": {"upload_id": …}}, long-polled until done. Every 100 ms throughout:
the worker's RSS (its process, and its process tree: raster pool children included) and the
bytes in its /dev/shm folder and its spool folder. Prints the peaks against the targets
(worker RSS < 1 GiB, /dev/shm within OCRQ_RENDER_AHEAD_MB) and the wall times.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench import store_services
from ocrq.shared.embedded import start_server
from tests.support import measuring, services
from tests.support.noise_scans import cached_noise_scan

MIB = 1024 * 1024
RSS_TARGET = 1024 * MIB
CHUNK = 1024 * 1024
HTTP_TIMEOUT_S = measuring.POLL_WAIT_S + 30


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under folder (ones that vanish meanwhile count as nothing)."""
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return total


@dataclass
class Peaks:
    """The highest of each sample so far, written by the sampler thread."""

    rss: int = 0  # the worker's own process
    tree_rss: int = 0  # the worker and every process under it, summed
    shm: int = 0
    spool: int = 0
    samples: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


def sample(pid: int, shm: Path, spool: Path, peaks: Peaks) -> None:
    """Until told to stop: every 100 ms, the worker's RSS and its two folders' sizes."""
    worker = psutil.Process(pid)
    while not peaks.stop.wait(0.1):
        with contextlib.suppress(psutil.Error):
            own = worker.memory_info().rss
            tree = own
            for child in worker.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    tree += child.memory_info().rss
            peaks.rss, peaks.tree_rss = max(peaks.rss, own), max(peaks.tree_rss, tree)
        peaks.shm = max(peaks.shm, folder_bytes(shm))
        peaks.spool = max(peaks.spool, folder_bytes(spool))
        peaks.samples += 1


def file_chunks(path: Path) -> Iterator[bytes]:
    """The file in 1 MiB chunks: the upload never holds it whole."""
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


def upload_and_run(api: str, path: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Presigned upload of the file, a job on it, long-polled to the end; timings and view."""
    size = path.stat().st_size
    with httpx.Client(base_url=api, timeout=HTTP_TIMEOUT_S) as client:
        started = time.perf_counter()
        r = client.post("/v1/uploads", json={"size": size, "filename": path.name})
        r.raise_for_status()
        ticket = r.json()
        headers = {**ticket["headers"], "Content-Length": str(size)}
        put = httpx.put(ticket["url"], content=file_chunks(path), headers=headers, timeout=600)
        put.raise_for_status()
        uploaded = time.perf_counter()
        body = {"source": {"upload_id": ticket["upload_id"]}, "options": options}
        r = client.post("/v1/jobs", json=body)
        if r.status_code != 202:
            raise RuntimeError(f"POST /v1/jobs answered {r.status_code}: {r.text[:300]}")
        job_id = r.json()["id"]
        while True:
            view: dict[str, Any] = client.get(
                f"/v1/jobs/{job_id}", params={"wait": measuring.POLL_WAIT_S}
            ).json()
            if view["status"] in ("done", "failed", "cancelled"):
                break
    ended = time.perf_counter()
    return {"view": view, "upload_s": uploaded - started, "wall_s": ended - started}


def run(args: argparse.Namespace, scan: Path, tmp: Path) -> tuple[dict[str, Any], Peaks]:
    """The whole stack, the upload and the job, sampled throughout."""
    server = start_server(tmp / "redis", aof=False)
    shm = Path(tempfile.mkdtemp(prefix="ocrq-bench-big-", dir="/dev/shm"))
    spool = tmp / "spool"
    spool.mkdir()
    peaks = Peaks()
    try:
        with (
            store_services.seaweed_store(tmp) as store,
            services.fake_vllm(0.0, 256) as fake,
        ):
            settings = store_services.store_settings(store, server.url, "bench-big-scan")
            blobs = services.blob_env(settings)
            worker_env = {
                **blobs,
                "shm_dir": str(shm),
                "document_spool_dir": str(spool),
                "render_ahead_mb": str(args.render_ahead_mb),
                "raster_workers": str(args.raster_workers),
                "visibility_timeout_ms": "600000",
            }
            with (
                services.producer(server.url, tmp, **blobs) as api,
                services.worker_process(server.url, fake.url, tmp, **worker_env) as worker,
            ):
                sampler = threading.Thread(target=sample, args=(worker.pid, shm, spool, peaks))
                sampler.start()
                try:
                    options = {"max_pages": args.pages, "dpi": args.dpi}
                    outcome = upload_and_run(api, scan, options)
                finally:
                    peaks.stop.set()
                    sampler.join(10)
    finally:
        server.stop()
        for path in sorted(shm.rglob("*"), reverse=True):
            with contextlib.suppress(OSError):
                path.unlink() if path.is_file() else path.rmdir()
        shm.rmdir()
    return outcome, peaks


def print_report(
    args: argparse.Namespace, scan: Path, outcome: dict[str, Any], peaks: Peaks
) -> None:
    """The table, and each target met or not."""
    view = outcome["view"]
    size = scan.stat().st_size
    job_s = measuring.epoch(view["finished_at"]) - measuring.epoch(view["started_at"])
    pages = view["progress"]["pages_done"]
    budget = args.render_ahead_mb * MIB
    upload_rate = size / MIB / outcome["upload_s"]
    rows = [
        ("document", f"{size / MIB:,.0f} MiB, {args.pages:,} pages at {args.dpi} DPI"),
        ("status", f"{view['status']}, {pages:,} pages done"),
        ("presigned upload (PUT)", f"{outcome['upload_s']:.1f} s, {upload_rate:,.0f} MiB/s"),
        ("job, claim to done", f"{job_s:.1f} s, {pages / job_s:,.1f} pages/s"),
        ("wall, upload start to done", f"{outcome['wall_s']:.1f} s"),
        ("peak worker RSS (its process)", f"{peaks.rss / MIB:,.0f} MiB"),
        ("peak worker RSS (tree, summed)", f"{peaks.tree_rss / MIB:,.0f} MiB (target < 1,024)"),
        ("peak /dev/shm folder", f"{peaks.shm / MIB:,.1f} MiB (budget {args.render_ahead_mb})"),
        ("peak document spool (disk)", f"{peaks.spool / MIB:,.0f} MiB"),
        ("samples", f"{peaks.samples:,} (every 100 ms)"),
    ]
    print("| measure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    print(
        f"\nworker RSS {'<' if peaks.tree_rss < RSS_TARGET else '>='} 1 GiB;"
        f" /dev/shm {'within' if peaks.shm <= budget else 'OVER'} the render-ahead budget"
    )


def main() -> None:
    """Parse flags, make or reuse the scan, run, print."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pages", type=int, default=1500)
    p.add_argument("--dpi", type=int, default=72, help="render DPI (the job's dpi option)")
    p.add_argument("--render-ahead-mb", type=int, default=64)
    p.add_argument("--raster-workers", type=int, default=2)
    p.add_argument("--cache", type=Path, default=Path("/tmp"), help="where the scan is kept")
    args = p.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {store_services.machine_load()}")
    made = time.perf_counter()
    scan = cached_noise_scan(args.cache, args.pages)
    ready_s = time.perf_counter() - made
    print(f"# scan {scan} ({scan.stat().st_size / MIB:,.0f} MiB), ready in {ready_s:.1f} s")
    with services.scratch_dir() as tmp:
        outcome, peaks = run(args, scan, tmp)
    print()
    print_report(args, scan, outcome, peaks)
    print(f"# done {time.strftime('%H:%M')}, {store_services.machine_load()}")


if __name__ == "__main__":
    main()
