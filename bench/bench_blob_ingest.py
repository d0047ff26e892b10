"""Ingest of 1 MB documents with the object store and without, and the store's own PUT rate.

    .venv/bin/python -m bench.bench_blob_ingest --docs 300 --repeats 3 --clients 4

One private Redis (AOF off) and one SeaweedFS (tests/support/seaweed.py, on this machine's
disk). Two producers (one uvicorn process each) run on that Redis at once: one without a
store (the document goes into the job hash) and one with OCRQ_BLOB_URL (a document over
OCRQ_INLINE_MAX_BYTES is PUT into the store, then the job hash holds its key). Repeat by
repeat, interleaved: --docs raw POST /v1/jobs bodies of --size through each producer from
--clients concurrent clients in a separate process (bench_enqueue's client), then --docs PUTs
of the same size straight into the store through shared.blobs (the store's own rate at the
same concurrency, the ceiling of the store's producer). Redis is flushed before each phase;
no worker runs. jobs/s are medians of the repeats (min..max).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import redis

from bench import bench_enqueue, store_services
from ocrq.shared.blobs import open_blob_store
from ocrq.shared.embedded import start_server
from ocrq.shared.settings import Settings
from tests.support import services

MIB = 1024 * 1024
SIZES = {"300k": 300 * 1024, "1m": MIB, "10m": 10 * MIB - 4096}
NO_LIMITS = {"max_backlog": "100000000", "max_tenant_backlog": "0", "log_level": "warning"}
PHASES = ("no store", "with the store", "store PUT (shared.blobs)")


async def put_rate(settings: Settings, size: int, count: int, clients: int, run: int) -> float:
    """PUTs/s of ``count`` objects of ``size`` into the store, ``clients`` at a time."""
    store = open_blob_store(settings)
    assert store is not None
    data = bench_enqueue.document(size)
    todo = iter(range(count))

    async def client() -> None:
        for i in todo:
            await store.put(f"bench-put/{run}/{i}", data)

    try:
        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return count / (time.perf_counter() - started)
    finally:
        await store.aclose()


def ingest_rate(url: str, redis_url: str, args: argparse.Namespace) -> float:
    """jobs/s of --docs raw uploads through the producer at url, Redis flushed first."""
    client = redis.Redis.from_url(redis_url)
    try:
        store_services.flush_redis(client)
    finally:
        client.close()
    return bench_enqueue.http_load(url, "raw", args.size, args.docs, args.clients)[0]


def run(args: argparse.Namespace, tmp: Path) -> dict[str, list[float]]:
    """Every repeat of the three phases, interleaved; the rates of each phase."""
    rates: dict[str, list[float]] = {name: [] for name in PHASES}
    server = start_server(tmp / "redis", aof=False)
    try:
        with store_services.seaweed_store(tmp) as store:
            settings = store_services.store_settings(store, server.url, "bench-ingest")
            for name in ("plain", "stored"):
                (tmp / name).mkdir()
            blobs = services.blob_env(settings)
            with (
                services.producer(server.url, tmp / "plain", **NO_LIMITS) as plain,
                services.producer(server.url, tmp / "stored", **NO_LIMITS, **blobs) as stored,
            ):
                for repeat in range(args.repeats):
                    rates[PHASES[0]].append(ingest_rate(plain, server.url, args))
                    rates[PHASES[1]].append(ingest_rate(stored, server.url, args))
                    put = put_rate(settings, args.size, args.docs, args.clients, repeat)
                    rates[PHASES[2]].append(asyncio.run(put))
                    print(f"repeat {repeat + 1}: " + ", ".join(
                        f"{name} {values[-1]:,.1f}/s" for name, values in rates.items()
                    ), flush=True)  # fmt: skip
    finally:
        server.stop()
    return rates


def print_table(rates: dict[str, list[float]], size: int) -> None:
    """Medians (min..max), MiB/s, and each as a share of the store's own PUT rate."""
    put = statistics.median(rates[PHASES[2]])
    plain = statistics.median(rates[PHASES[0]])
    print("| phase | jobs/s median (min..max) | MiB/s | of no store | of the store's PUT rate |")
    print("|---|---|---|---|---|")
    for name, values in rates.items():
        median = statistics.median(values)
        spread = f"{min(values):,.1f}..{max(values):,.1f}"
        print(
            f"| {name} | {median:,.1f} ({spread}) | {median * size / MIB:,.1f}"
            f" | {median / plain:.0%} | {median / put:.0%} |"
        )


def main() -> None:
    """Parse flags, run, print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=300, help="documents per phase and repeat")
    p.add_argument("--size", type=SIZES.__getitem__, default=SIZES["1m"], help="300k, 1m, 10m")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--clients", type=int, default=4)
    args = p.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {store_services.machine_load()}")
    print(f"# {args.docs} x {args.size / MIB:.2f} MiB per phase, {args.clients} clients")
    with services.scratch_dir() as tmp:
        rates = run(args, tmp)
    print()
    print_table(rates, args.size)
    print(f"# done {time.strftime('%H:%M')}, {store_services.machine_load()}")


if __name__ == "__main__":
    main()
