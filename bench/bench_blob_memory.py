"""Redis memory per queued document, with the object store and without, side by side.

    .venv/bin/python -m bench.bench_blob_memory --docs 50 --size 10m --queued 10000 --queued-size 1m

One private Redis and one SeaweedFS (tests/support/seaweed.py); two producers on that Redis,
one without a store (every byte in Redis, as before issue 26) and one with OCRQ_BLOB_URL (a
document over OCRQ_INLINE_MAX_BYTES, 256 KiB, goes to the store and the job hash holds its
key, size and checksum). No worker runs: every job stays queued. Per phase, Redis is flushed,
its used_memory read, the documents queued as raw POST /v1/jobs bodies (4 clients, in a
separate process: bench_enqueue's client), and used_memory read again:

- --docs documents of --size through each producer: bytes of Redis per queued document;
- --queued documents of --queued-size through the store's producer: Redis in all.

Also the MEMORY USAGE of one job hash of each kind, and what the store holds afterwards.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import redis

from bench import bench_enqueue, store_services
from ocrq.shared.embedded import start_server
from tests.support import services

KIB = 1024
MIB = 1024 * KIB
SIZES = {"300k": 300 * KIB, "1m": MIB, "10m": 10 * MIB - 4096}
CLIENTS = 4
# Neither backlog limit may refuse a job here: every one stays queued on purpose.
NO_LIMITS = {"max_backlog": "100000000", "max_tenant_backlog": "0", "log_level": "warning"}
PER_DOC_TARGET = 2 * KIB
QUEUED_TARGET = 50 * MIB


def one_job_hash_bytes(client: redis.Redis) -> int:
    """MEMORY USAGE of one job hash in Redis (0 if none is found)."""
    for key in client.scan_iter(match="*:job:*", count=1000):
        if client.type(key) == b"hash":
            return int(client.memory_usage(key, samples=0) or 0)
    return 0


def queue_phase(label: str, url: str, redis_url: str, size: int, count: int) -> dict[str, Any]:
    """Flush Redis, queue ``count`` documents of ``size`` through the producer at url."""
    client = redis.Redis.from_url(redis_url)
    try:
        store_services.flush_redis(client)
        before = store_services.settled_memory(client)
        started = time.perf_counter()
        rate = bench_enqueue.http_load(url, "raw", size, count, CLIENTS)
        seconds = time.perf_counter() - started
        after = store_services.settled_memory(client)
        queued = sum(client.xlen(k) for k in client.scan_iter(match="*:stream:*"))
        job_hash = one_job_hash_bytes(client)
    finally:
        client.close()
    return {
        "label": label,
        "size": size,
        "count": count,
        "queued": queued,
        "delta": after["used_memory"] - before["used_memory"],
        "per_doc": (after["used_memory"] - before["used_memory"]) / count,
        "dataset_per_doc": (after["used_memory_dataset"] - before["used_memory_dataset"]) / count,
        "job_hash": job_hash,
        "rate": rate,
        "seconds": seconds,
    }


def print_rows(rows: list[dict[str, Any]]) -> None:
    """The table of every phase."""
    print(
        "| phase | documents | queued | Redis used_memory added | per document"
        " | of it dataset | one job hash (MEMORY USAGE) | ingest jobs/s |"
        "\n|---|---|---|---|---|---|---|---|"
    )
    for row in rows:
        print(
            f"| {row['label']} | {row['count']:,} x {row['size'] / MIB:.2f} MiB"
            f" | {row['queued']:,} | {row['delta'] / MIB:,.1f} MiB | {readable(row['per_doc'])}"
            f" | {readable(row['dataset_per_doc'])} | {readable(row['job_hash'])}"
            f" | {row['rate']:,.1f} |",
            flush=True,
        )


def readable(nbytes: float) -> str:
    """KiB below 64 KiB, MiB above."""
    return f"{nbytes / MIB:,.2f} MiB" if nbytes > 64 * KIB else f"{nbytes / KIB:,.2f} KiB"


def run(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    """Every phase, on one Redis and one store."""
    server = start_server(tmp / "redis", aof=False)
    rows = []
    try:
        with store_services.seaweed_store(tmp) as store:
            settings = store_services.store_settings(store, server.url, "bench-memory")
            blobs = services.blob_env(settings)
            for name in ("plain", "stored"):
                (tmp / name).mkdir()
            with (
                services.producer(server.url, tmp / "plain", **NO_LIMITS) as plain,
                services.producer(server.url, tmp / "stored", **NO_LIMITS, **blobs) as stored,
            ):
                for label, url in (("no store", plain), ("with the store", stored)):
                    rows.append(queue_phase(label, url, server.url, args.size, args.docs))
                if args.queued:
                    label = "with the store, many queued"
                    rows.append(
                        queue_phase(label, stored, server.url, args.queued_size, args.queued)
                    )
            objects, nbytes = store_services.store_bytes(settings)
            print(f"\nthe store holds {objects:,} objects, {nbytes / MIB:,.0f} MiB")
    finally:
        server.stop()
    return rows


def main() -> None:
    """Parse flags, run the phases, print the table and the targets."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=50, help="documents per side-by-side phase")
    p.add_argument("--size", type=SIZES.__getitem__, default=SIZES["10m"], help="300k, 1m, 10m")
    p.add_argument("--queued", type=int, default=10_000, help="0: skip the many-queued phase")
    p.add_argument("--queued-size", type=SIZES.__getitem__, default=SIZES["1m"])
    args = p.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {store_services.machine_load()}")
    with services.scratch_dir() as tmp:
        rows = run(args, tmp)
    print()
    print_rows(rows)
    plain, stored = rows[0], rows[1]
    print(
        f"\nper queued document: {plain['per_doc'] / stored['per_doc']:,.0f}x less Redis with"
        f" the store ({stored['per_doc'] / KIB:.2f} KiB, target <= {PER_DOC_TARGET / KIB:.0f} KiB)"
    )
    if len(rows) > 2:
        many = rows[2]
        print(
            f"{many['queued']:,} queued with the store: {many['delta'] / MIB:.1f} MiB of Redis"
            f" (target < {QUEUED_TARGET / MIB:.0f} MiB)"
        )
    print(f"# done {time.strftime('%H:%M')}, {store_services.machine_load()}")


if __name__ == "__main__":
    main()
