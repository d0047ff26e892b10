"""The pipeline against an engine of known capacity: how full ocrq keeps it, and idle latency.

    .venv/bin/python bench/bench_capacity.py --engines 4x0.5,32x4 --workers 1,2 --repeats 3

The fake vLLM runs C requests at once and spends L seconds per image, so it finishes at
most C / L pages per second: its capacity. For each engine and worker count, a private
Redis, one producer, the fake and N workers run two workloads, each submitted at once as raw
uploads: 200 one-page PNGs, and 20 ten-page text PDFs (text layer off: every page goes to the
engine). *of capacity* is pages per second (first submit to last finish, from the jobs'
own timestamps) over C / L. The figure counts the ramp-up and the last wave too; with
pages / C a whole number of waves, 1.00 is reachable. Then one one-page job at a time on an
idle stack: the latency a client sees (submit to done) minus the engine's own L.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import stack
from sample_documents import text_pdf, text_png

from ocrq.shared.schemas import TERMINAL

OPTIONS = {"dpi": "100", "text_layer": "off", "batch_size": "1"}
POLL_WAIT_S = 30


@dataclass(frozen=True)
class Engine:
    slots: int  # C: requests the engine runs at once
    latency_s: float  # L: seconds per image

    @property
    def pages_per_s(self) -> float:
        return self.slots / self.latency_s

    def __str__(self) -> str:
        return f"C={self.slots}, L={self.latency_s:g} s"


@dataclass(frozen=True)
class Workload:
    name: str
    documents: list[bytes]
    media_type: str
    pages: int


async def finish(client: httpx.AsyncClient, url: str, job_id: str) -> dict[str, Any]:
    """Long-poll one job until it is terminal."""
    while True:
        try:
            r = await client.get(f"{url}/v1/jobs/{job_id}", params={"wait": POLL_WAIT_S})
        except (httpx.RemoteProtocolError, httpx.ReadError):
            # A pooled connection reused just as uvicorn closed it for idling past its
            # keep-alive (5 s): the usual keep-alive race; a poll is safe to repeat.
            continue
        view: dict[str, Any] = r.json()
        if view["status"] in TERMINAL:
            return view


async def submit(client: httpx.AsyncClient, url: str, body: bytes, media_type: str) -> str:
    """One raw upload; its job id."""
    headers = {"content-type": media_type}
    r = await client.post(f"{url}/v1/jobs", content=body, params=OPTIONS, headers=headers)
    if r.status_code != 202:
        raise RuntimeError(f"submit answered {r.status_code}: {r.text[:200]}")
    job_id: str = r.json()["id"]
    return job_id


async def run_workload(url: str, work: Workload, timeout_s: float) -> float:
    """Submit every document at once; pages per second from the jobs' own timestamps."""
    limits = httpx.Limits(max_connections=len(work.documents) + 4)
    async with httpx.AsyncClient(timeout=POLL_WAIT_S + 30, limits=limits) as client:

        async def run_one(document: bytes) -> dict[str, Any]:
            # Poll right after the submit: a connection left idle past uvicorn's keep-alive
            # (5 s) while the other submits finish is closed under the next request.
            return await finish(client, url, await submit(client, url, document, work.media_type))

        views = await asyncio.wait_for(
            asyncio.gather(*(run_one(d) for d in work.documents)), timeout_s
        )
    failed = [v["id"] for v in views if v["status"] != "done"]
    if failed:
        raise RuntimeError(f"{len(failed)} jobs did not finish: {failed[:3]}")
    start = min(stack.epoch(v["created_at"]) for v in views)
    end = max(stack.epoch(v["finished_at"]) for v in views)
    return work.pages / (end - start)


async def lone_latency(url: str, body: bytes, rounds: int) -> list[float]:
    """Seconds from submit to done as a client sees them, one job at a time."""
    seconds = []
    async with httpx.AsyncClient(timeout=POLL_WAIT_S + 30) as client:
        for _ in range(rounds):
            started = time.perf_counter()
            view = await finish(client, url, await submit(client, url, body, "image/png"))
            if view["status"] != "done":
                raise RuntimeError(f"lone job ended {view['status']}")
            seconds.append(time.perf_counter() - started)
            await asyncio.sleep(0.5)  # idle again: no window is open when the next arrives
    return seconds


def spread(values: list[float], fmt: str) -> str:
    """median (min..max)."""
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}..{max(values):{fmt}})"


def measure(engine: Engine, workers: int, loads: list[Workload], args: argparse.Namespace) -> str:
    """One stack: each workload `repeats` times, then the lone-job latency; one table row."""
    cells = []
    with contextlib.ExitStack() as procs:
        tmp = procs.enter_context(stack.scratch_dir())
        redis_url = procs.enter_context(stack.private_redis(tmp))
        fake = procs.enter_context(stack.fake_vllm(engine.latency_s, engine.slots))
        url = procs.enter_context(stack.producer(redis_url, tmp))
        for n in range(workers):
            (tmp / f"w{n}").mkdir()
            procs.enter_context(stack.worker(redis_url, fake.url, tmp / f"w{n}"))
        asyncio.run(lone_latency(url, loads[0].documents[0], 1))  # warm-up: pools, connections
        for work in loads:
            ratios = [
                asyncio.run(run_workload(url, work, args.timeout)) / engine.pages_per_s
                for _ in range(args.repeats)
            ]
            cells.append(spread(ratios, ".2f"))
        overhead = asyncio.run(lone_latency(url, loads[0].documents[0], args.lone))
        cells.append(spread([(s - engine.latency_s) * 1000 for s in overhead], ".0f"))
    return f"{engine!s:<18}{workers:>8}  " + "".join(f"{c:>24}" for c in cells)


def main() -> int:
    """Build the workloads, then one row per engine and worker count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="4x0.5,32x4", help="CxL, comma-separated")
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lone", type=int, default=10, help="lone jobs for the idle latency")
    parser.add_argument("--timeout", type=float, default=600.0, help="per-workload deadline (s)")
    args = parser.parse_args()
    loads = [
        Workload("200 x 1-page PNG", [text_png(i) for i in range(200)], "image/png", 200),
        Workload("20 x 10-page PDF", [text_pdf(i, 10) for i in range(20)], "application/pdf", 200),
    ]
    print(f"of capacity: median of {args.repeats} (min..max); idle: ms over L, {args.lone} jobs")
    header = "".join(f"{w.name + ' of cap.':>24}" for w in loads) + f"{'idle overhead ms':>24}"
    print(f"{'engine':<18}{'workers':>8}  {header}")
    for spec in args.engines.split(","):
        slots, latency = spec.split("x")
        engine = Engine(int(slots), float(latency))
        for workers in (int(n) for n in args.workers.split(",")):
            print(measure(engine, workers, loads, args), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
