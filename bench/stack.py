"""Processes for the benchmarks: a private Redis, `ocrq producer`, `ocrq worker`, the fake vLLM.

Everything binds 127.0.0.1 on a free port and is stopped by the ExitStack that started it;
the Redis on 6379 is never touched.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.embedded import free_port, start_server
from ocrq.shared.schemas import TERMINAL

STOP_TIMEOUT_S = 15.0
POLL_WAIT_S = 30


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


def names_of(known: Collection[str]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated list of names, each one of ``known``."""

    def parse(text: str) -> list[str]:
        names = text.split(",")
        if unknown := [n for n in names if n not in known]:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {sorted(known)}")
        return names

    return parse


def raw_job_fields(job_id: str, data: bytes) -> dict[str, Any]:
    """A queued job's hash as the producer writes it: the raw-Redis ceilings write the same."""
    return {
        "id": job_id, "status": "queued", "tenant": "public", "filename": "",
        "media_type": "application/pdf", "size": len(data), "lane": "interactive",
        "options": "{}", "created_at": 0, "attempts": 0, "pages_total": 0,
        "pages_done": 0, "payload": data, "worker": "", "batch": "",
    }  # fmt: skip


def wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 30.0) -> None:
    """Poll url until it answers 200; fail with the log's tail if the process dies or stalls."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"process exited with {proc.returncode}:\n{tail}")
            with contextlib.suppress(httpx.TransportError):
                if client.get(url).status_code == 200:
                    return
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout_s} s")


@contextlib.contextmanager
def ocrq_process(
    command: str,
    args: list[str],
    env: Mapping[str, str],
    health_url: str,
    log: Path,
    health_timeout_s: float = 30.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `ocrq COMMAND ARGS` with OCRQ_* env until the block ends (SIGTERM, then SIGKILL)."""
    full_env = {**os.environ, **{f"OCRQ_{k.upper()}": v for k, v in env.items()}}
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ocrq.cli", command, *args],
            env=full_env, stdout=subprocess.DEVNULL, stderr=log_file,
        )  # fmt: skip
    try:
        wait_http(health_url, proc, log, health_timeout_s)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)


@contextlib.contextmanager
def private_redis(tmp: Path) -> Iterator[str]:
    """A Redis-compatible server of our own on a free port, no persistence; yields its URL."""
    server = start_server(tmp / "redis", aof=False)
    try:
        yield server.url
    finally:
        server.stop()


@contextlib.contextmanager
def producer(redis_url: str, tmp: Path, workers: int = 1, **env: str) -> Iterator[str]:
    """`ocrq producer` (uvicorn, `workers` processes) on a free port; yields its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    values = {"redis_url": redis_url, "log_format": "json", "log_level": "warning", **env}
    args = ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    with ocrq_process("producer", args, values, f"{url}/healthz", tmp / "producer.log"):
        yield url


@contextlib.contextmanager
def worker(
    redis_url: str, vllm_url: str | None, tmp: Path, health_timeout_s: float = 30.0, **env: str
) -> Iterator[None]:
    """One `ocrq worker` on the vLLM engine (the local CPU engine when vllm_url is None)."""
    with worker_process(redis_url, vllm_url, tmp, health_timeout_s, **env):
        yield


@contextlib.contextmanager
def worker_process(
    redis_url: str, vllm_url: str | None, tmp: Path, health_timeout_s: float = 30.0, **env: str
) -> Iterator[subprocess.Popen[bytes]]:
    """worker(), yielding the process (to read its CPU time); pages go to ``tmp``/shm."""
    port = free_port()
    shm = tmp / "shm"
    shm.mkdir(exist_ok=True)
    engine = {"engine": "local"} if vllm_url is None else {"engine": "vllm", "vllm_url": vllm_url}
    values = {
        "redis_url": redis_url, **engine, "shm_dir": str(shm),
        "metrics_port": str(port), "log_format": "json", "log_level": "warning",
        "redis_block_ms": "500", "drain_grace_s": "10", **env,
    }  # fmt: skip
    health = f"http://127.0.0.1:{port}/healthz"
    log = tmp / "worker.log"
    with ocrq_process("worker", [], values, health, log, health_timeout_s) as proc:
        yield proc


@contextlib.contextmanager
def fake_vllm(latency_s: float, max_concurrency: int) -> Iterator[FakeVllm]:
    """The fake vLLM with a per-image latency, recording no request bodies (long runs)."""
    with FakeVllm(latency_s=latency_s, max_concurrency=max_concurrency, max_recorded=0) as fake:
        fake.wait_ready()
        yield fake


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    """A temporary folder for logs, Redis data and rendered pages."""
    with tempfile.TemporaryDirectory(prefix="ocrq-bench-") as name:
        yield Path(name)


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
