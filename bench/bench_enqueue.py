"""Ingest throughput against the raw Redis limit and a minimal FastAPI peer, side by side.

    .venv/bin/python -m bench.bench_enqueue --sizes 100k,1m,10m --repeats 3

For each document size, in one run on one private Redis (AOF off, then AOF everysec):

- raw Redis limit: C concurrent asyncio clients each doing MULTI HSET(fields + payload)
  + XADD + EXEC, as ocrq writes a job (the ceiling any HTTP front can reach);
- ocrq producer, raw body / multipart / JSON base64, with 1 and 2 uvicorn processes (auth
  off, metrics and JSON access logging on, as shipped);
- the FastAPI peer (bench/peer_fastapi.py: the same MULTI, nothing else), raw body;
- the floor (bench/relay_floor.py): a raw asyncio relay that parses HTTP with httptools and
  writes hand-packed RESP, the most any Python front can reach on these cores; raw, and
  multipart (the file part parsed out as it arrives, the least a multipart front must do);
- ocrq raw under granian instead of uvicorn (the ASGI server lever), when it is installed.

Every phase sends the same number of documents (C clients in one separate process), is
repeated, and reports jobs/s as the median of the repeats (min..max), the ratio to the
raw Redis limit and to the peer measured in the same run, and the server's CPU time per job
(its processes' user + system time over the phase, psutil): throughput on a shared 2-core
box moves with its neighbours, CPU per job much less. Redis is flushed between phases.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import importlib.util
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis
import redis.asyncio as aioredis

from bench import arguments
from ocrq.shared.embedded import free_port, start_server
from tests.support import measuring, processes, services

HERE = Path(__file__).resolve().parent
REPO = HERE.parent  # `python -m bench.bench_enqueue` runs from here
SIZES = {"100k": 100 * 1024, "1m": 1024 * 1024, "10m": 10 * 1024 * 1024 - 4096}
DOCS = {"100k": 2000, "1m": 600, "10m": 60}  # per phase: ~1 GB at most in Redis
API_KEY = "bench-key-0123456789abcdef"
# The producer as shipped: auth on with one key, metrics on, the JSON access log at info.
# The backlog limits stay on (their checks run), set above what a run's uploads reach.
SHIPPED = {
    "api_keys": f"bench:{API_KEY}",
    "log_level": "info",
    "max_backlog": "1000000",
    "max_tenant_backlog": "1000000",
}


def document(size: int) -> bytes:
    """A PDF-looking document of exactly `size` bytes (the producer sniffs it as PDF)."""
    return b"%PDF-1.4\n" + os.urandom(size - 9)


async def raw_limit(url: str, data: bytes, count: int, clients: int) -> float:
    """jobs/s of MULTI HSET + XADD at this concurrency, straight into Redis."""
    pool = aioredis.Redis.from_url(url, max_connections=clients)
    todo = iter(range(count))

    async def client() -> None:
        for _ in todo:
            job_id = secrets.token_urlsafe(16)
            async with pool.pipeline(transaction=True) as pipe:
                pipe.hset(f"raw:job:{job_id}", mapping=measuring.raw_job_fields(job_id, data))
                pipe.xadd("raw:stream", {"id": job_id})
                await pipe.execute()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    await pool.aclose()
    return count / elapsed


def launched_by_us(proc: psutil.Process) -> psutil.Process:
    """The process this bench started that proc belongs to (proc, or the ancestor whose
    parent is the bench): a server's supervisor and all its workers count as one server.
    proc itself when the bench did not start it."""
    ancestor = proc
    while (parent := ancestor.parent()) is not None:
        if parent.pid == os.getpid():
            return ancestor
        ancestor = parent
    return proc


def server_cpu_s(url: str) -> float:
    """User + system seconds so far of the server listening on url's port: the process the
    bench started and every process under it (uvicorn's workers included, whichever of them
    psutil names as the socket's owner)."""
    port = int(url.rsplit(":", 1)[1])
    owners = {c.pid for c in psutil.net_connections("tcp") if c.laddr.port == port and c.pid}
    tree: dict[int, psutil.Process] = {}
    for pid in owners:
        with contextlib.suppress(psutil.NoSuchProcess):
            root = launched_by_us(psutil.Process(pid))
            tree.update((each.pid, each) for each in (root, *root.children(recursive=True)))
    total = 0.0
    for each in tree.values():
        with contextlib.suppress(psutil.NoSuchProcess):
            times = each.cpu_times()
            total += times.user + times.system
    return total


def http_load(url: str, kind: str, size: int, count: int, clients: int) -> tuple[float, ...]:
    """(jobs/s, server CPU µs per job, client CPU µs per job) of `count` uploads of one kind
    from a separate process (C concurrent)."""
    cpu_before = server_cpu_s(url)
    client = ["--client", url, kind, str(size), str(count), str(clients)]
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_enqueue", *client],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    server_us = (server_cpu_s(url) - cpu_before) / count * 1e6
    rate, client_s = (float(v) for v in done.stdout.strip().splitlines()[-1].split())
    return rate, server_us, client_s / count * 1e6


async def client_main(
    url: str, kind: str, size: int, count: int, clients: int
) -> tuple[float, float]:
    """The client process: upload `count` documents; (jobs/s, its CPU seconds uploading).

    The CPU is taken around the uploads only: the interpreter's start and imports (~250 ms)
    are no part of what a client pays per job."""
    data = document(size)
    json_body = b'{"document": "' + base64.b64encode(data) + b'", "filename": "d.pdf"}'
    todo = iter(range(count))
    limits = httpx.Limits(max_connections=clients)
    key = {"x-api-key": API_KEY}  # the peer ignores it; ocrq checks it, as shipped
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits, headers=key) as http:
        await http.get("/healthz")

        async def send() -> httpx.Response:
            if kind == "raw":
                return await http.post(
                    "/v1/jobs", content=data, headers={"content-type": "application/pdf"}
                )
            if kind == "multipart":
                return await http.post("/v1/jobs", files={"file": ("d.pdf", data)})
            return await http.post(
                "/v1/jobs", content=json_body, headers={"content-type": "application/json"}
            )

        async def client() -> None:
            for _ in todo:
                r = await send()
                assert r.status_code == 202, r.text[:200]

        started, cpu_started = time.perf_counter(), time.process_time()
        await asyncio.gather(*(client() for _ in range(clients)))
        elapsed, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
        return count / elapsed, cpu_s


@contextlib.contextmanager
def served(
    argv: list[str], port: int, ready_path: str, log: Path, env: dict[str, str] | None = None
) -> Iterator[str]:
    """`python ARGV` listening on port (its output to log), ready when ready_path answers
    200; its base URL until the block ends."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *argv], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        processes.wait_http(f"{url}{ready_path}", proc, 30.0, log)
        yield url
    finally:
        processes.stop(proc, processes.STOP_TIMEOUT_S)


def fastapi_peer(redis_url: str, log: Path) -> contextlib.AbstractContextManager[str]:
    """The FastAPI peer under uvicorn (uvloop, httptools), one process."""
    port = free_port()
    argv = ["-m", "uvicorn", "--app-dir", str(HERE), "peer_fastapi:app", "--port", str(port)]
    argv += ["--loop", "uvloop", "--http", "httptools", "--no-access-log"]
    argv += ["--log-level", "warning"]
    return served(argv, port, "/docs", log, {**os.environ, "REDIS_URL": redis_url})


def relay_floor(redis_port: int, log: Path) -> contextlib.AbstractContextManager[str]:
    """bench/relay_floor.py, one process."""
    port = free_port()
    argv = ["-m", "bench.relay_floor", "--port", str(port), "--redis-port", str(redis_port)]
    return served(argv, port, "/", log)


def granian_producer(redis_url: str, log: Path) -> contextlib.AbstractContextManager[str]:
    """The producer app under granian (ASGI, uvloop, one process), settings as shipped."""
    port = free_port()
    settings = {**SHIPPED, "redis_url": redis_url, "host": "127.0.0.1", "port": str(port)}
    env = {**os.environ, **{f"OCRQ_{k.upper()}": v for k, v in settings.items()}}
    env["OCRQ_LOG_FORMAT"] = "json"
    argv = ["-m", "granian", "--interface", "asgi", "--factory", "--loop", "uvloop", "--no-ws"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "ocrq.producer.app:create_app"]
    return served(argv, port, "/healthz", log, env)


def measure(
    label: str,
    run: Callable[[], float | tuple[float, ...]],
    repeats: int,
    flush: Callable[[], object],
) -> dict[str, Any]:
    """Median, min and max jobs/s of `repeats` runs (and the median server and client CPU
    per job), Redis flushed before each."""
    rates, cpus, client_cpus = [], [], []
    for _ in range(repeats):
        flush()
        got = run()
        rate, *cpu = got if isinstance(got, tuple) else (got,)
        rates.append(rate)
        if cpu:
            cpus.append(cpu[0])
            client_cpus.append(cpu[1])
    return {
        "label": label,
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "cpu_us": statistics.median(cpus) if cpus else None,
        "client_us": statistics.median(client_cpus) if client_cpus else None,
    }


def run_size(name: str, args: argparse.Namespace, tmp: Path, aof: bool) -> list[dict[str, Any]]:
    """Every phase for one document size on one Redis."""
    size, count, c = SIZES[name], max(args.min_docs, DOCS[name] // args.scale), args.clients
    server = start_server(tmp / f"redis-{name}-{aof}", aof=aof)
    sync = redis.Redis.from_url(server.url)
    data = document(size)
    rows = []

    def phase(label: str, url: str, kind: str = "raw") -> None:
        load = functools.partial(http_load, url, kind, size, count, c)
        rows.append(measure(label, load, args.repeats, sync.flushall))

    try:
        limit = functools.partial(raw_limit, server.url, data, count, c)
        rows.append(
            measure("raw Redis limit (MULTI HSET+XADD)", lambda: asyncio.run(limit()),
                    args.repeats, sync.flushall)
        )  # fmt: skip
        with relay_floor(server.port, tmp / "floor.log") as url:
            phase("floor: raw asyncio relay (1 process)", url)
            phase("floor, multipart parsed (1 process)", url, "multipart")
        for workers in (1, 2):
            with services.producer(server.url, tmp, workers, **SHIPPED) as url:
                for kind in ("raw", "multipart", "json") if workers == 1 else ("raw",):
                    phase(f"ocrq {kind} ({workers} process)", url, kind)
        if importlib.util.find_spec("granian") is not None:
            with granian_producer(server.url, tmp / "granian.log") as url:
                phase("ocrq raw under granian (1 process)", url)
        with fastapi_peer(server.url, tmp / "peer.log") as url:
            phase("FastAPI peer raw (1 process)", url)
    finally:
        sync.close()
        server.stop()
    for row in rows:
        row["ratio"] = row["median"] / rows[0]["median"]
        row["peer"] = row["median"] / rows[-1]["median"]
    return rows


HEADER = (
    "| phase | jobs/s median (min..max) | of the raw limit | of the peer | server CPU µs/job "
    "| client CPU µs/job |\n|---|---|--:|--:|--:|--:|"
)


def table_row(row: dict[str, Any]) -> str:
    """One phase as a Markdown table row."""
    spread = f"{row['min']:,.1f}..{row['max']:,.1f}"
    cpu, client = (f"{row[k]:,.0f}" if row[k] is not None else "" for k in ("cpu_us", "client_us"))
    return (
        f"| {row['label']} | {row['median']:,.1f} ({spread}) | {row['ratio']:.0%} "
        f"| {row['peer']:.2f} | {cpu} | {client} |"
    )


def main() -> None:
    """Parse flags, run every size, print the tables."""
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        url, kind, size, count, clients = sys.argv[2:7]
        rate, cpu_s = asyncio.run(client_main(url, kind, int(size), int(count), int(clients)))
        print(rate, cpu_s)
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=arguments.names_of(SIZES), default="100k,1m,10m")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--scale", type=int, default=1, help="divide the document counts by this")
    p.add_argument("--min-docs", type=int, default=20)
    p.add_argument("--aof", choices=("off", "everysec", "both"), default="both")
    args = p.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load {os.getloadavg()}")
    aofs = {"off": [False], "everysec": [True], "both": [False, True]}[args.aof]
    with services.scratch_dir() as tmp:
        for aof in aofs:
            for name in args.sizes:
                mode = "everysec" if aof else "off"
                print(f"\n## {name} documents, AOF {mode}, {args.clients} clients")
                print(HEADER)
                for row in run_size(name, args, tmp, aof):
                    print(table_row(row), flush=True)


if __name__ == "__main__":
    main()
