"""Two async S3 clients side by side on a real store: obstore (ocrq's) and aiobotocore.

    .venv/bin/python -m bench.bench_blob_clients --seconds 2 --rounds 2

Starts a private SeaweedFS (`weed mini`, tests/support/seaweed.py), then in interleaved
rounds (the clients alternate who goes first) measures for each client: PUT and GET rates of
256 KiB and 1 MiB objects at concurrency 1 and 16 (each cell a fixed time; the client
process's CPU per operation beside it, the store's own CPU not counted), the time to
presign a URL, and, each in a fresh interpreter, the import time and RSS after import and
after a first request. The store is the same for both, so the differences are the clients'.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.support.seaweed import REGION, Seaweed

KIB = 1024
SIZES = (256 * KIB, 1024 * KIB)
CONCURRENCY = (1, 16)
PRESIGNS = 2000
CLIENTS = ("obstore", "aiobotocore")

Op = Callable[[str], Awaitable[None]]


@dataclass
class Cell:
    """One measurement: operations per second and client CPU ms per operation, per round."""

    rates: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)


class ObstoreClient:
    """obstore's S3Store: put_async / get_async / sign_async."""

    name = "obstore"

    def __init__(self, weed: Seaweed) -> None:
        import obstore
        from obstore.store import S3Store

        self.obstore = obstore
        self.store = S3Store(
            weed.bucket,
            endpoint=weed.endpoint,
            region=REGION,
            access_key_id=weed.access_key,
            secret_access_key=weed.secret_key,
            client_options={"allow_http": True, "pool_max_idle_per_host": "32"},
        )

    async def put(self, key: str, data: bytes) -> None:
        await self.obstore.put_async(self.store, key, data)

    async def get(self, key: str) -> None:
        result = await self.obstore.get_async(self.store, key)
        await result.bytes_async()

    async def presign(self, key: str) -> str:
        return str(await self.obstore.sign_async(self.store, "GET", key, timedelta(seconds=300)))

    async def aclose(self) -> None:
        return None


class BotocoreClient:
    """aiobotocore's S3 client (path-style, SigV4, a pool as large as the concurrency)."""

    name = "aiobotocore"

    def __init__(self, weed: Seaweed) -> None:
        self.weed = weed
        self.client: Any = None
        self.context: Any = None

    async def open(self) -> BotocoreClient:
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session

        self.context = get_session().create_client(
            "s3",
            endpoint_url=self.weed.endpoint,
            region_name=REGION,
            aws_access_key_id=self.weed.access_key,
            aws_secret_access_key=self.weed.secret_key,
            config=AioConfig(
                max_pool_connections=32,
                signature_version="s3v4",
                s3={"addressing_style": "path"},
            ),
        )
        self.client = await self.context.__aenter__()
        return self

    async def put(self, key: str, data: bytes) -> None:
        await self.client.put_object(Bucket=self.weed.bucket, Key=key, Body=data)

    async def get(self, key: str) -> None:
        answer = await self.client.get_object(Bucket=self.weed.bucket, Key=key)
        async with answer["Body"] as body:
            await body.read()

    async def presign(self, key: str) -> str:
        return str(
            await self.client.generate_presigned_url(
                "get_object", Params={"Bucket": self.weed.bucket, "Key": key}, ExpiresIn=300
            )
        )

    async def aclose(self) -> None:
        await self.context.__aexit__(None, None, None)


async def timed_cell(
    op: Op, keys: list[str], concurrency: int, seconds: float
) -> tuple[float, float]:
    """Run ``op`` over ``keys`` (cycling) from ``concurrency`` tasks for ``seconds``:
    (operations per second, client CPU ms per operation)."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def lane(start: int) -> None:
        nonlocal done
        at = start
        while time.perf_counter() < deadline:
            await op(keys[at % len(keys)])
            done += 1
            at += concurrency

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(lane(n) for n in range(concurrency)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return done / wall, 1000 * cpu / max(done, 1)


async def one_round(
    clients: list[Any], cells: dict[tuple[str, ...], Cell], seconds: float, round_no: int
) -> None:
    """Every (op, size, concurrency) cell once per client, the clients alternating first."""
    order = clients if round_no % 2 == 0 else list(reversed(clients))
    for size in SIZES:
        data = os.urandom(size)
        keys = [f"bench/{size}/{n:04d}" for n in range(64)]
        for concurrency in CONCURRENCY:
            for client in order:
                own = [f"{client.name}/{key}" for key in keys]

                async def put(key: str, client: Any = client, data: bytes = data) -> None:
                    await client.put(key, data)

                rate, cpu = await timed_cell(put, own, concurrency, seconds)
                cell = cells.setdefault(("PUT", str(size), str(concurrency), client.name), Cell())
                cell.rates.append(rate)
                cell.cpu_ms.append(cpu)
            for client in order:
                own = [f"{client.name}/{key}" for key in keys]
                for key in own:  # every key exists, whatever the PUT cell reached
                    await client.put(key, data)
                rate, cpu = await timed_cell(client.get, own, concurrency, seconds)
                cell = cells.setdefault(("GET", str(size), str(concurrency), client.name), Cell())
                cell.rates.append(rate)
                cell.cpu_ms.append(cpu)


async def presign_us(client: Any) -> float:
    """Microseconds per presigned GET URL (no network: signing only)."""
    await client.presign("warm/up")
    start = time.perf_counter()
    for n in range(PRESIGNS):
        await client.presign(f"bench/key-{n}")
    return 1e6 * (time.perf_counter() - start) / PRESIGNS


IMPORT_PROBE = """
import json, sys, time
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
base = rss()
t = time.perf_counter()
if sys.argv[1] == 'obstore':
    import obstore
    from obstore.store import S3Store
else:
    from aiobotocore.session import get_session
    from aiobotocore.config import AioConfig
imported = time.perf_counter() - t
after_import = rss()
endpoint, bucket, access, secret = sys.argv[2:6]
import asyncio
async def first_request():
    if sys.argv[1] == 'obstore':
        store = S3Store(bucket, endpoint=endpoint, region='us-east-1', access_key_id=access,
                        secret_access_key=secret, client_options={'allow_http': True})
        await obstore.put_async(store, 'probe/' + sys.argv[1], b'x')
    else:
        async with get_session().create_client(
            's3', endpoint_url=endpoint, region_name='us-east-1', aws_access_key_id=access,
            aws_secret_access_key=secret,
            config=AioConfig(s3={'addressing_style': 'path'})) as client:
            await client.put_object(Bucket=bucket, Key='probe/' + sys.argv[1], Body=b'x')
asyncio.run(first_request())
print(json.dumps({'import_s': imported, 'base_mb': base, 'import_mb': after_import,
                  'request_mb': rss()}))
"""


def import_costs(name: str, weed: Seaweed, runs: int) -> dict[str, float]:
    """Median import time and RSS of ``runs`` fresh interpreters importing the client."""
    samples = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", IMPORT_PROBE, name, weed.endpoint, weed.bucket,
             weed.access_key, weed.secret_key],
            check=True, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        samples.append(json.loads(out.stdout))
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


def print_table(cells: dict[tuple[str, ...], Cell]) -> None:
    """One line per (op, size, concurrency): both clients' rates, MiB/s and CPU per op."""
    print(f"\n{'op':4} {'size':>6} {'conc':>4}  " + "  ".join(
        f"{c + ' ops/s':>18} {'MiB/s':>7} {'cpu ms/op':>9}" for c in CLIENTS
    ) + f"  {'obstore/boto':>12}")  # fmt: skip
    for op in ("PUT", "GET"):
        for size in SIZES:
            for concurrency in CONCURRENCY:
                row = [f"{op:4} {size // KIB:>5}K {concurrency:>4}  "]
                medians = []
                for client in CLIENTS:
                    cell = cells[(op, str(size), str(concurrency), client)]
                    rate = statistics.median(cell.rates)
                    medians.append(rate)
                    spread = f"±{(max(cell.rates) - min(cell.rates)) / 2:.0f}"
                    row.append(
                        f"{rate:>12.0f} {spread:>5} {rate * size / KIB / KIB:>7.1f} "
                        f"{statistics.median(cell.cpu_ms):>9.2f}  "
                    )
                row.append(f"{medians[0] / medians[1]:>12.2f}")
                print("".join(row))


async def measure(weed: Seaweed, seconds: float, rounds: int) -> None:
    """The interleaved rate rounds and the presign timings."""
    clients: list[Any] = [ObstoreClient(weed), await BotocoreClient(weed).open()]
    cells: dict[tuple[str, ...], Cell] = {}
    try:
        for round_no in range(rounds):
            started = time.perf_counter()
            await one_round(clients, cells, seconds, round_no)
            print(f"round {round_no + 1}/{rounds}: {time.perf_counter() - started:.0f} s")
        print_table(cells)
        print("\npresign (GET, SigV4, µs per URL):")
        for client in clients:
            times = [await presign_us(client) for _ in range(3)]
            print(f"  {client.name:12} {statistics.median(times):8.1f}")
    finally:
        for client in clients:
            await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per cell per round")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--import-runs", type=int, default=3, help="fresh interpreters each")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="bench-blob-clients-") as tmp,
        Seaweed(Path(tmp)) as weed,
    ):
        print(f"SeaweedFS at {weed.endpoint}; {os.cpu_count()} CPUs")
        asyncio.run(measure(weed, args.seconds, args.rounds))
        print("\nimport (fresh interpreter; RSS in MiB):")
        print(f"  {'client':12} {'import s':>9} {'RSS before':>11} {'after import':>13} "
              f"{'after 1st PUT':>14}")  # fmt: skip
        for name in CLIENTS:
            c = import_costs(name, weed, args.import_runs)
            print(f"  {name:12} {c['import_s']:>9.3f} {c['base_mb']:>11.1f} "
                  f"{c['import_mb']:>13.1f} {c['request_mb']:>14.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
