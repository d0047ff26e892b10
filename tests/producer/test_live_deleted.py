"""A job or batch deleted while its event stream is followed: the stream ends with a final
`deleted` event, whole, and the producer logs no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from support.payloads import b64, small_pdf
from support.processes import stop, wait_http
from support.services import redis_env

from ocrq.shared.embedded import free_port
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
