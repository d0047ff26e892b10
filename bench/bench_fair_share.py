"""Fair share: a lone job of tenant B behind tenant A's backlog, first come first served vs fair.

    .venv/bin/python -m bench.bench_fair_share --backlog 2000 --rounds fifo,fair

Per round, on a private Redis flushed in between: `ocrq producer` (two tenants' API keys,
OCRQ_FAIR_SHARE as the round says), one `ocrq worker` on the fake vLLM (a fixed latency per
image and a concurrency limit, like vLLM's max_num_seqs). Tenant A submits ``--backlog``
one-page images as fast as 8 clients can; the moment the last is accepted, tenant B submits
one. Reported: B's wait in the queue (its submit to its claim, the result's queued_ms) and
its latency (submit to done, as the client sees it), A's jobs still
waiting when B submitted, the round's throughput (jobs from the first submit to the last
done, read back from the jobs' own timestamps), and the time of one engine-full (the fake's
slots over the round's pages/s): the target is B's wait within one engine-full.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import time
from dataclasses import dataclass
from typing import Any

import httpx
import redis

from bench.sample_documents import text_png
from ocrq.shared.schemas import TERMINAL
from tests.support import services

KEYS = {"a": "key-a", "b": "key-b"}
POLL_WAIT_S = 30


@dataclass(frozen=True)
class Round:
    mode: str
    jobs: int
    waiting_at_b: int  # A's jobs not yet started when B submitted
    b_wait_s: float  # B's job in the queue: its submit to its claim (timings.queued_ms)
    b_latency_s: float  # B's submit to B's done, as its client saw it
    wall_s: float
    slots: int

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.wall_s

    @property
    def engine_full_s(self) -> float:
        return self.slots / self.jobs_per_s


async def submit(client: httpx.AsyncClient, url: str, tenant: str, body: dict[str, Any]) -> str:
    r = await client.post(f"{url}/v1/jobs", json=body, headers={"x-api-key": KEYS[tenant]})
    if r.status_code != 202:
        raise RuntimeError(f"submit answered {r.status_code}: {r.text[:200]}")
    job_id: str = r.json()["id"]
    return job_id


async def wait_done(
    client: httpx.AsyncClient, url: str, tenant: str, job_id: str
) -> dict[str, Any]:
    headers = {"x-api-key": KEYS[tenant]}
    while True:
        r = await client.get(f"{url}/v1/jobs/{job_id}?wait={POLL_WAIT_S}", headers=headers)
        view: dict[str, Any] = r.json()
        if view["status"] in TERMINAL:
            return view


async def flood(url: str, backlog: int, image: bytes, r: redis.Redis) -> tuple[float, float, int]:
    """A's backlog, then B's one job: (B's queue wait, its submit-to-done latency, in s; A's
    jobs still waiting at B's submit)."""
    body = {"document": base64.b64encode(image).decode()}
    limits = httpx.Limits(max_connections=16)
    async with httpx.AsyncClient(timeout=POLL_WAIT_S + 30, limits=limits) as client:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for n in range(backlog):
            queue.put_nowait(n)

        async def client_loop() -> None:
            while not queue.empty():
                queue.get_nowait()
                await submit(client, url, "a", body)

        await asyncio.gather(*(client_loop() for _ in range(8)))
        waiting = int(r.xlen("ocrq:{p0}:stream:interactive")) - pending(r)
        started = time.perf_counter()
        job_id = await submit(client, url, "b", body)
        view = await wait_done(client, url, "b", job_id)
        queued_s = view["result"]["timings"]["queued_ms"] / 1000
        return queued_s, time.perf_counter() - started, waiting


def pending(r: redis.Redis) -> int:
    try:
        return int(r.xpending("ocrq:{p0}:stream:interactive", "workers")["pending"])
    except redis.ResponseError:
        return 0


def wait_drained(r: redis.Redis, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while r.xlen("ocrq:{p0}:stream:interactive"):
        if time.monotonic() > deadline:
            raise TimeoutError("the lane did not drain")
        time.sleep(0.2)


def span_s(r: redis.Redis) -> tuple[int, float]:
    """(jobs, first created to last finished in s) from the jobs' hashes."""
    created, finished = [], []
    for key in r.scan_iter("ocrq:{p0}:job:*", count=1000):
        if key.count(b":") != 3:  # the job's pages and files hashes
            continue
        c, f = r.hmget(key, "created_at", "finished_at")
        created.append(int(c or 0))
        finished.append(int(f or 0))
    return len(created), (max(finished) - min(created)) / 1000


def run_round(mode: str, args: argparse.Namespace, tmp: Any, redis_url: str, fake: Any) -> Round:
    r = redis.Redis.from_url(redis_url)
    r.flushall()
    api_keys = ",".join(f"{tenant}:{key}" for tenant, key in KEYS.items())
    env = {"api_keys": api_keys, "fair_share": "true" if mode == "fair" else "false"}
    with (
        services.producer(redis_url, tmp, **env) as url,
        services.worker(redis_url, fake.url, tmp, max_jobs=str(args.max_jobs)),
    ):
        b_wait, b_latency, waiting = asyncio.run(flood(url, args.backlog, text_png(1), r))
        wait_drained(r, args.timeout)
    jobs, wall = span_s(r)
    r.close()
    return Round(mode, jobs, waiting, b_wait, b_latency, wall, args.max_concurrency)


def print_table(rounds: list[Round]) -> None:
    print(
        f"\n{'mode':>5} {'jobs':>5} {'A waiting':>9} {'B wait s':>8} {'B done s':>8} {'jobs/s':>7} "
        f"{'engine-full s':>13} {'B wait / engine-full':>20}"
    )
    for x in rounds:
        print(
            f"{x.mode:>5} {x.jobs:>5} {x.waiting_at_b:>9} {x.b_wait_s:>8.2f} {x.b_latency_s:>8.2f} "
            f"{x.jobs_per_s:>7.1f} {x.engine_full_s:>13.2f} {x.b_wait_s / x.engine_full_s:>20.2f}"
        )
    by = {x.mode: x for x in rounds}
    if "fifo" in by and "fair" in by:
        fifo, fair = by["fifo"], by["fair"]
        print(
            f"fair vs fifo: B's wait {fair.b_wait_s / fifo.b_wait_s:.3f}x, "
            f"throughput {fair.jobs_per_s / fifo.jobs_per_s:.2f}x"
        )


def main() -> int:
    """Parse flags, start Redis and the fake once, run the rounds in order, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=2000, help="tenant A's one-page jobs")
    parser.add_argument("--rounds", default="fifo,fair", help="modes, in this order")
    parser.add_argument("--latency-s", type=float, default=0.05, help="fake latency per image")
    parser.add_argument("--max-concurrency", type=int, default=16, help="fake's slots")
    parser.add_argument("--max-jobs", type=int, default=16, help="OCRQ_MAX_JOBS of the worker")
    parser.add_argument("--timeout", type=float, default=600.0, help="per-round drain deadline")
    args = parser.parse_args()
    rounds = []
    with services.scratch_dir() as tmp, services.private_redis(tmp) as redis_url:
        with services.fake_vllm(args.latency_s, args.max_concurrency) as fake:
            for mode in args.rounds.split(","):
                rounds.append(run_round(mode, args, tmp, redis_url, fake))
                print(f"{mode}: B waited {rounds[-1].b_wait_s:.2f} s")
    print_table(rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
