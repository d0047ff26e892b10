"""What bench_ingest watches while uploads run: /healthz probed from its own process, one
job's Server-Sent Events followed from another (its changes made as a worker makes them),
and the producer's RSS sampled from a thread. bench/ only."""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import httpx
import msgspec
import psutil
import redis

from bench import relay_floor as floor_relay
from bench.ingest_decode import fake_png
from ocrq.shared.keys import Keys
from tests.support import measuring

PROBE_TIMEOUT_S = 10.0
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
