"""Event streams of a real producer: a burst of changes is coalesced without losing the last
state; a job or batch deleted while followed ends its stream with a final `deleted` event,
whole, and the producer logs no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from httpx_sse import connect_sse
from support.payloads import b64, small_pdf
from support.processes import stop, wait_http
from support.services import redis_env
from support.topology import sync_client

from ocrq.producer.live import COALESCE_S
from ocrq.shared.embedded import free_port
from ocrq.shared.keys import Keys
from ocrq.shared.settings import Settings

pytestmark = pytest.mark.slow


class Producer:
    """`ocrq producer` as a real process whose log the test reads."""

    def __init__(self, url: str, log_path: Path) -> None:
        self.url, self.log_path = url, log_path

    def log(self) -> str:
        """What the producer logged so far."""
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def producer(settings: Settings, tmp_path: Path) -> Iterator[Producer]:
    """A producer logging to a file of the test's own."""
    port, log_path = free_port(), tmp_path / "producer.log"
    env = {**redis_env(settings), "LOG_FORMAT": "json", "PRODUCER_WORKERS": "1"}
    full_env = {**os.environ, **{f"OCRQ_{k}": v for k, v in env.items()}}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ocrq.cli", "producer", "--port", str(port)],
        env=full_env, stdout=subprocess.DEVNULL, stderr=log_path.open("wb"),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", proc)
        yield Producer(url, log_path)
    finally:
        stop(proc)


def follow(url: str, first_seen: threading.Event, out: list[tuple[str, str, Any]]) -> None:
    """Read an SSE stream to its end: (event, id, data) of each event."""
    with httpx.Client(timeout=30) as client, connect_sse(client, "GET", url) as source:
        for event in source.iter_sse():
            out.append((event.event, event.id, json.loads(event.data)))
            first_seen.set()


def follow_while(url: str, action: Any) -> list[tuple[str, str, Any]]:
    """Follow url in a thread, run action once the first event is in, return every event."""
    seen, events = threading.Event(), list[tuple[str, str, Any]]()
    reader = threading.Thread(target=follow, args=(url, seen, events), daemon=True)
    reader.start()
    assert seen.wait(20), "no first event"
    action()
    reader.join(20)
    assert not reader.is_alive(), f"the stream did not end: {events}"
    return events


def test_deleting_a_followed_job_ends_its_stream_with_a_deleted_event(producer: Producer) -> None:
    api = httpx.Client(base_url=producer.url, timeout=30)
    job_id = api.post("/v1/jobs", json={"document": b64(small_pdf())}).json()["id"]
    events = follow_while(
        f"{producer.url}/v1/jobs/{job_id}/events",
        lambda: api.delete(f"/v1/jobs/{job_id}").raise_for_status(),
    )
    assert events[0][2]["status"] == "queued"
    kind, _, data = events[-1]
    assert (kind, data) == ("job", {"id": job_id, "status": "deleted"}), events
    assert api.get(f"/v1/jobs/{job_id}").status_code == 404
    assert "Traceback" not in producer.log() and "Exception in ASGI" not in producer.log()


def test_deleting_a_followed_batch_ends_its_stream_with_a_deleted_event(
    producer: Producer,
) -> None:
    api = httpx.Client(base_url=producer.url, timeout=30)
    documents = [{"document": b64(small_pdf()), "filename": "a.pdf"}]
    batch_id = api.post("/v1/batches", json={"documents": documents}).json()["id"]
    events = follow_while(
        f"{producer.url}/v1/batches/{batch_id}/events",
        lambda: api.delete(f"/v1/batches/{batch_id}").raise_for_status(),
    )
    kind, _, data = events[-1]
    assert (kind, data) == ("batch", {"id": batch_id, "status": "deleted"}), events
    assert "Traceback" not in producer.log() and "Exception in ASGI" not in producer.log()


def test_a_burst_of_changes_is_coalesced_and_its_last_state_is_sent(
    producer: Producer, settings: Settings
) -> None:
    api = httpx.Client(base_url=producer.url, timeout=30)
    job_id = api.post("/v1/jobs", json={"document": b64(small_pdf())}).json()["id"]
    keys, r = Keys(settings.store.prefix), sync_client(settings)
    took: list[float] = []

    def publish(fields: dict[str, Any]) -> None:  # what a worker's progress does
        r.hset(keys.job(job_id), mapping=fields)
        r.publish(keys.events, msgspec.json.encode({"id": job_id, **fields}))

    def burst() -> None:
        started = time.monotonic()
        for done in range(1, 41):
            publish({"status": "queued", "pages_done": done})
        took.append(time.monotonic() - started)
        time.sleep(5 * COALESCE_S)  # the burst's last event goes out before the stream ends
        publish({"status": "cancelled"})

    try:
        events = follow_while(f"{producer.url}/v1/jobs/{job_id}/events", burst)
    finally:
        r.close()
    progress = [data["progress"]["pages_done"] for _, _, data in events[1:-1]]
    assert progress and progress[-1] == 40, events
    # At most one event per window the burst spanned, plus the one that opened it.
    assert len(progress) <= 2 + took[0] / COALESCE_S, (progress, took)
    assert events[-1][2]["status"] == "cancelled"
