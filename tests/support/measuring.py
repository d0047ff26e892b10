"""Measuring a running stack: jobs long-polled to the end, their timestamps, paced probes.

What the benchmarks time with; they start the stack itself through services.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx

from ocrq.shared.schemas import TERMINAL

POLL_WAIT_S = 30  # a long poll's ?wait=: the client's timeout must be longer


def epoch(stamp: str) -> float:
    """Seconds since the epoch of a job view's ISO timestamp."""
    return datetime.fromisoformat(stamp).timestamp()


async def finish_job(client: httpx.AsyncClient, url: str, job_id: str) -> dict[str, Any]:
    """Long-poll one job until it is terminal; its final view."""
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


def raw_job_fields(job_id: str, data: bytes) -> dict[str, Any]:
    """A queued job's hash as the producer writes it: the raw-Redis ceilings write the same."""
    return {
        "id": job_id,
        "status": "queued",
        "tenant": "public",
        "filename": "",
        "media_type": "application/pdf",
        "size": len(data),
        "lane": "interactive",
        "options": "{}",
        "created_at": 0,
        "attempts": 0,
        "pages_total": 0,
        "pages_done": 0,
        "payload": data,
        "worker": "",
        "batch": "",
    }


def paced_probes(
    client: httpx.Client, url: str, rate_hz: float, keep_going: Callable[[], bool]
) -> tuple[list[float], int]:
    """GET url at rate_hz while keep_going(): (latencies of the 200s in s, failures)."""
    latencies: list[float] = []
    failures = 0
    interval = 1.0 / rate_hz
    next_at = time.perf_counter()
    while keep_going():
        delay = next_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        if not keep_going():
            break
        started = time.perf_counter()
        try:
            ok = client.get(url).status_code == 200
        except httpx.HTTPError:
            ok = False
        if ok:
            latencies.append(time.perf_counter() - started)
        else:
            failures += 1
        # A late probe does not trigger a burst to catch up: the schedule slips instead.
        next_at = max(next_at + interval, time.perf_counter())
    return latencies, failures
