"""The pipeline against an engine of known capacity: how full ocrq keeps it, and idle latency.

    .venv/bin/python -m bench.bench_capacity --engines 4x0.5,32x4 --workers 1,2 --repeats 3

The fake vLLM runs C requests at once and spends L seconds per image, so it finishes at
most C / L pages per second: its capacity. For each engine and worker count, a private
Redis, one producer, the fake and N workers run two workloads, each submitted at once as raw
uploads: 200 one-page PNGs, and 20 ten-page text PDFs (text layer off: every page goes to the
engine). *of capacity* is pages per second (first submit to last finish, from the jobs'
own timestamps) over C / L. The figure counts the ramp-up and the last wave too: the fake
runs each page for exactly L, so N pages take at least ceil(N / C) waves of L, and 200 pages
on 32 slots can reach 6.25 / 7 = 0.89 at best. *of best* is that floor, ceil(N / C) x L,
over the time taken: how close to a full engine the run was in steady state (1.00: every
wave started the moment the one before ended). *steady* is the share of the engine's slots
busy while the engine has work for all of them: the fake's running requests, sampled every
50 ms, averaged from L after the first submit to L before the last finish (the first wave
fills while pages render; the last is partial). *peak* is the most requests the fake ever
ran at once. Then one one-page job at a time on an idle stack: the latency a client sees
(submit to done) minus the engine's own L, in ms and as a ratio to L.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.sample_documents import text_pdf, text_png
from tests.support import measuring, services

OPTIONS = {"dpi": "100", "text_layer": "off", "batch_size": "1"}
SAMPLE_S = 0.05  # how often the fake's running requests are sampled


@dataclass(frozen=True)
class Engine:
    slots: int  # C: requests the engine runs at once
    latency_s: float  # L: seconds per image

    @property
    def pages_per_s(self) -> float:
        return self.slots / self.latency_s

    def best_s(self, pages: int) -> float:
        """The shortest time the engine can take for ``pages``: whole waves of L."""
        return math.ceil(pages / self.slots) * self.latency_s

    def __str__(self) -> str:
        return f"C={self.slots}, L={self.latency_s:g} s"


@dataclass(frozen=True)
class Run:
    took_s: float  # first submit to last finish, from the jobs' own timestamps
    steady: float  # mean share of the engine's slots running, first and last wave left out


@dataclass(frozen=True)
class Workload:
    name: str
    documents: list[bytes]
    media_type: str
    pages: int


async def submit(client: httpx.AsyncClient, url: str, body: bytes, media_type: str) -> str:
    """One raw upload; its job id."""
    headers = {"content-type": media_type}
    r = await client.post(f"{url}/v1/jobs", content=body, params=OPTIONS, headers=headers)
    if r.status_code != 202:
        raise RuntimeError(f"submit answered {r.status_code}: {r.text[:200]}")
    job_id: str = r.json()["id"]
    return job_id


async def sample_running(fake_url: str, samples: list[tuple[float, int]]) -> None:
    """(monotonic time, requests running) from the fake, until cancelled."""
    async with httpx.AsyncClient(timeout=5) as client:
        while True:
            r = await client.get(f"{fake_url}/_stats")
            samples.append((time.monotonic(), int(r.json()["running"])))
            await asyncio.sleep(SAMPLE_S)


def steady_share(samples: list[tuple[float, int]], engine: Engine, t0: float, t1: float) -> float:
    """Mean running / C from L after the start to L before the end (all samples if too short)."""
    inner = [n for t, n in samples if t0 + engine.latency_s <= t <= t1 - engine.latency_s]
    counts = inner or [n for _, n in samples]
    return statistics.fmean(counts) / engine.slots if counts else 0.0


async def run_workload(url: str, fake_url: str, engine: Engine, work: Workload, args: Any) -> Run:
    """Submit every document at once; how long they took, and how full the engine was."""
    limits = httpx.Limits(max_connections=len(work.documents) + 4)
    samples: list[tuple[float, int]] = []
    sampler = asyncio.create_task(sample_running(fake_url, samples))
    t0 = time.monotonic()
    async with httpx.AsyncClient(timeout=measuring.POLL_WAIT_S + 30, limits=limits) as client:

        async def run_one(document: bytes) -> dict[str, Any]:
            # Poll right after the submit: a connection left idle past uvicorn's keep-alive
            # (5 s) while the other submits finish is closed under the next request.
            return await measuring.finish_job(
                client, url, await submit(client, url, document, work.media_type)
            )

        views = await asyncio.wait_for(
            asyncio.gather(*(run_one(d) for d in work.documents)), args.timeout
        )
    t1 = time.monotonic()
    sampler.cancel()
    await asyncio.gather(sampler, return_exceptions=True)
    failed = [v["id"] for v in views if v["status"] != "done"]
    if failed:
        raise RuntimeError(f"{len(failed)} jobs did not finish: {failed[:3]}")
    start = min(measuring.epoch(v["created_at"]) for v in views)
    end = max(measuring.epoch(v["finished_at"]) for v in views)
    return Run(end - start, steady_share(samples, engine, t0, t1))


async def lone_latency(url: str, body: bytes, rounds: int) -> list[float]:
    """Seconds from submit to done as a client sees them, one job at a time.

    The worker's own stage timings go to stderr (median ms): where the overhead goes.
    """
    seconds, stages = [], list[dict[str, int]]()
    async with httpx.AsyncClient(timeout=measuring.POLL_WAIT_S + 30) as client:
        for _ in range(rounds):
            started = time.perf_counter()
            view = await measuring.finish_job(
                client, url, await submit(client, url, body, "image/png")
            )
            if view["status"] != "done":
                raise RuntimeError(f"lone job ended {view['status']}")
            seconds.append(time.perf_counter() - started)
            stages.append(view["result"]["timings"])
            await asyncio.sleep(0.5)  # idle again: no window is open when the next arrives
    if rounds > 1:
        medians = {k: statistics.median(t[k] for t in stages) for k in stages[0]}
        print(f"  lone job stages, median ms: {medians}", file=sys.stderr, flush=True)
    return seconds


def spread(values: list[float], fmt: str) -> str:
    """median (min..max)."""
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}..{max(values):{fmt}})"


def workload_cells(engine: Engine, fake: Any, url: str, work: Workload, args: Any) -> list[str]:
    """`repeats` runs of one workload: of capacity, of best, steady, peak in flight."""
    capacity, best, steady, peaks = [], [], [], []
    for _ in range(args.repeats):
        fake.reset_stats()
        run = asyncio.run(run_workload(url, fake.url, engine, work, args))
        capacity.append(work.pages / run.took_s / engine.pages_per_s)
        best.append(engine.best_s(work.pages) / run.took_s)
        steady.append(run.steady)
        peaks.append(float(fake.stats()["peak_running"]))
    cells = [spread(capacity, ".2f"), spread(best, ".2f"), spread(steady, ".2f")]
    return [*cells, f"{max(peaks):.0f}"]


def idle_cells(engine: Engine, url: str, body: bytes, rounds: int) -> list[str]:
    """The lone job's latency over L: in ms, and as a ratio to L."""
    seconds = asyncio.run(lone_latency(url, body, rounds))
    over_ms = [(s - engine.latency_s) * 1000 for s in seconds]
    return [spread(over_ms, ".0f"), f"{statistics.median(seconds) / engine.latency_s:.3f}"]


def measure(engine: Engine, workers: int, loads: list[Workload], args: argparse.Namespace) -> str:
    """One stack: each workload `repeats` times, then the lone-job latency; one table row."""
    cells = []
    env = dict(pair.split("=", 1) for pair in args.worker_env)
    with contextlib.ExitStack() as procs:
        tmp = procs.enter_context(services.scratch_dir())
        redis_url = procs.enter_context(services.private_redis(tmp))
        fake = procs.enter_context(services.fake_vllm(engine.latency_s, engine.slots))
        url = procs.enter_context(services.producer(redis_url, tmp))
        for n in range(workers):
            (tmp / f"w{n}").mkdir()
            procs.enter_context(services.worker(redis_url, fake.url, tmp / f"w{n}", **env))
        asyncio.run(lone_latency(url, loads[0].documents[0], 1))  # warm-up: pools, connections
        for work in loads if args.repeats else []:  # --repeats 0: the idle latency alone
            cells += workload_cells(engine, fake, url, work, args)
        cells += idle_cells(engine, url, loads[0].documents[0], args.lone)
    return " | ".join([str(engine), str(workers), *cells])


def main() -> int:
    """Build the workloads, then one row per engine and worker count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="4x0.5,32x4", help="CxL, comma-separated")
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lone", type=int, default=10, help="lone jobs for the idle latency")
    parser.add_argument("--timeout", type=float, default=600.0, help="per-workload deadline (s)")
    parser.add_argument(
        "--worker-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a worker setting without the OCRQ_ prefix (e.g. max_jobs=16); repeatable",
    )
    args = parser.parse_args()
    loads = [
        Workload("200 x 1-page PNG", [text_png(i) for i in range(200)], "image/png", 200),
        Workload("20 x 10-page PDF", [text_pdf(i, 10) for i in range(20)], "application/pdf", 200),
    ]
    print(f"of capacity, of best, steady: median of {args.repeats} (min..max); peak: most requests")
    print(f"the engine ran at once; idle: the lone job's ms over L ({args.lone} jobs), /L ratio")
    columns = ["engine", "workers"]
    for w in loads:
        columns += [f"{w.name} of cap.", "of best", "steady", "peak"]
    print(" | ".join([*columns, "idle ms over L", "idle / L"]))
    for spec in args.engines.split(","):
        slots, latency = spec.split("x")
        engine = Engine(int(slots), float(latency))
        for workers in (int(n) for n in args.workers.split(",")):
            print(measure(engine, workers, loads, args), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
