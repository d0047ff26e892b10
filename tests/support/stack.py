"""A running pipeline for one end-to-end test: its producer, fake vLLM and worker processes."""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.embedded import free_port
from ocrq.shared.keys import Keys
from ocrq.shared.schemas import TERMINAL
from ocrq.shared.settings import Settings

from .processes import start_ocrq, stop, wait_http, wait_until
from .services import services_env, start_producer
from .topology import sync_client

# A worker imports PyMuPDF and its engine client before /healthz answers: seconds on an idle
# machine, over 20 s on a loaded 2-core CI box. A healthy worker is waited for no longer.
WORKER_START_TIMEOUT_S = 60.0


def jobs_done_by(workers: list[WorkerProc], total: int, timeout_s: float = 10) -> list[int]:
    """Each worker's count of `done` job lines, once they add up to total (lines lag Redis)."""

    def counts() -> list[int]:
        return [sum(w.jobs_done().values()) for w in workers]

    wait_until(lambda: sum(counts()) >= total, timeout_s, f"{total} jobs never logged done")
    return counts()


@dataclass
class WorkerProc:
    """One `ocrq worker` subprocess."""

    proc: subprocess.Popen[bytes]
    metrics_url: str
    log_path: Path

    @property
    def health_url(self) -> str:
        """The worker's /healthz, beside its /metrics."""
        return self.metrics_url.removesuffix("/metrics") + "/healthz"

    def signal(self, sig: int) -> None:
        """Send a signal to the worker."""
        self.proc.send_signal(sig)

    def wait(self, timeout_s: float) -> int:
        """Exit code, waiting up to timeout_s."""
        return self.proc.wait(timeout_s)

    def log(self) -> str:
        """What the worker logged so far."""
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout_s: float = 10) -> str:
        """The log once it holds text: a job's line follows its Redis write, so may lag it."""
        wait_until(lambda: text in self.log(), timeout_s, f"{text!r} never logged")
        return self.log()

    def jobs_done(self) -> Counter[str]:
        """How many times the worker logged each job `done` (its canonical job lines)."""
        counts: Counter[str] = Counter()
        for line in self.log().splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                if event.get("event") == "job" and event.get("outcome") == "done":
                    counts[event["job_id"]] += 1
        return counts


@dataclass
class Stack:
    """A running pipeline for one test."""

    settings: Settings
    api: str
    fake: FakeVllm
    shm: Path
    tmp: Path
    workers: list[WorkerProc] = field(default_factory=list)

    def start_worker(self, *, new_session: bool = False, **env: Any) -> WorkerProc:
        """Start one worker (env overrides as OCRQ_* names without prefix) and wait for it.

        ``new_session``: the worker leads its own process group, as a command in a terminal.
        """
        worker = self._launch_worker(new_session, env)
        wait_http(worker.health_url, worker.proc, WORKER_START_TIMEOUT_S, worker.log_path)
        return worker

    def launch_worker(self, **env: Any) -> WorkerProc:
        """Start one worker and return at once: a chaos run does not wait for its /healthz."""
        return self._launch_worker(False, env)

    def start_workers(self, count: int, **env: Any) -> list[WorkerProc]:
        """Start ``count`` workers at once, then wait for them all: they read the queue together."""
        workers = [self._launch_worker(False, env) for _ in range(count)]
        for worker in workers:
            wait_http(worker.health_url, worker.proc, WORKER_START_TIMEOUT_S, worker.log_path)
        return workers

    def _launch_worker(self, new_session: bool, env: dict[str, Any]) -> WorkerProc:
        port = free_port()
        values = {
            "REDIS_URL": self.settings.store.redis_url,
            "ENGINE": "vllm",
            "VLLM_URL": self.fake.url,
            "SHM_DIR": str(self.shm),
            "METRICS_PORT": str(port),
            "LOG_FORMAT": "json",
            "ENGINE_BACKOFF_S": "0.05",
            "ENGINE_BACKOFF_MAX_S": "0.2",
            "ENGINE_RETRIES": "3",
            "VISIBILITY_TIMEOUT_MS": "3000",
            "ENGINE_TIMEOUT_S": "10",
            "RASTER_WORKERS": "1",
            "DRAIN_GRACE_S": "20",
            "REDIS_BLOCK_MS": "500",
            **services_env(self.settings),
            **{k.upper(): str(v) for k, v in env.items()},
        }
        log_path = self.tmp / f"worker-{len(self.workers)}.log"
        proc = start_ocrq("worker", [], values, log_path, new_session=new_session)
        worker = WorkerProc(proc, f"http://127.0.0.1:{port}/metrics", log_path)
        self.workers.append(worker)
        return worker

    def submit(self, data: bytes, **options: Any) -> str:
        """Submit a document as JSON; its job id."""
        body = {"document": base64.b64encode(data).decode(), "options": options}
        r = httpx.post(f"{self.api}/v1/jobs", json=body, timeout=30)
        assert r.status_code == 202, r.text
        job_id: str = r.json()["id"]
        return job_id

    def status(self, job_id: str) -> str:
        """The job's status as a poll shows it."""
        status: str = httpx.get(f"{self.api}/v1/jobs/{job_id}", timeout=30).json()["status"]
        return status

    def wait_for_status(self, job_id: str, status: str, timeout_s: float = 20) -> None:
        """Poll until the job shows status (a running step, say "processing")."""
        wait_until(lambda: self.status(job_id) == status, timeout_s, f"{job_id} never {status}")

    def wait(self, job_id: str, timeout_s: float = 60) -> dict[str, Any]:
        """Long-poll until the job is terminal."""
        deadline = time.monotonic() + timeout_s
        view: dict[str, Any] = {}
        while time.monotonic() < deadline:
            r = httpx.get(f"{self.api}/v1/jobs/{job_id}?wait=5", timeout=30)
            if r.status_code == 503:  # Redis is away (a fault test): ask again shortly
                time.sleep(0.5)
                continue
            view = r.json()
            if view["status"] in TERMINAL:
                return view
        raise TimeoutError(f"job {job_id} not terminal after {timeout_s}s: {view}")

    def wait_for_batch(self, batch_id: str, timeout_s: float = 120) -> dict[str, Any]:
        """Poll the batch until it has finished; its view, with up to 1000 jobs."""
        view: dict[str, Any] = {}

        def finished() -> bool:
            nonlocal view
            view = httpx.get(f"{self.api}/v1/batches/{batch_id}?limit=1000", timeout=30).json()
            return view["status"] == "finished"

        try:
            wait_until(finished, timeout_s, f"batch {batch_id} never finished")
        except TimeoutError as e:
            raise TimeoutError(f"{e}; last seen: {view}") from e
        return view

    def assert_clean(self) -> None:
        """Nothing of any job left in /dev/shm, nothing pending in any lane."""
        # A running worker's folder holds its owner file, and nothing else between jobs. A
        # worker lets go of a cancelled job at its next heartbeat (a second): wait that long.
        deadline = time.monotonic() + 5
        while leftovers := [p for p in self.shm.rglob("*") if p.is_file() and p.name != "owner"]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert not leftovers, leftovers
        r = sync_client(self.settings)
        for stream in self.streams():
            # A held entry of a cancelled job is acked when the worker next has a free slot.
            while (pending := r.xpending(stream, "workers"))["pending"]:
                assert time.monotonic() < deadline, (stream, pending)
                time.sleep(0.1)
        r.close()

    @property
    def keys(self) -> Keys:
        """The key layout the stack's settings give."""
        return Keys(self.settings.store.prefix, self.settings.store.partitions)

    def streams(self) -> list[str]:
        """Every lane's stream in every partition."""
        return [stream for lane in self.keys.lanes for stream in self.keys.streams(lane)]

    def stop(self) -> None:
        """Stop every worker still running."""
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.send_signal(signal.SIGTERM)
        for w in self.workers:
            try:
                w.proc.wait(30)
            except subprocess.TimeoutExpired:
                w.proc.kill()


@contextlib.contextmanager
def stack_on(settings: Settings, producer_url: str, tmp: Path) -> Iterator[Stack]:
    """A fake vLLM and a Stack around a running producer; the stack's workers stop on exit."""
    with FakeVllm() as fake:
        stack = Stack(settings, producer_url, fake, tmp / "shm", tmp)
        try:
            yield stack
        finally:
            stack.stop()


@contextlib.contextmanager
def running_stack(settings: Settings, tmp: Path, **producer_env: str) -> Iterator[Stack]:
    """A producer and a fake vLLM on the settings' Redis; the test starts the workers."""
    proc, url = start_producer(
        settings.store.redis_url, **{**services_env(settings), **producer_env}
    )
    try:
        with stack_on(settings, url, tmp) as stack:
            yield stack
    finally:
        stop(proc)
