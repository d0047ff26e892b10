"""Live progress (SSE) and signed webhooks, against a running producer and worker."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from httpx_sse import connect_sse
from standardwebhooks.webhooks import Webhook
from support.documents import png, sized_pdf
from support.processes import stop
from support.services import start_producer
from support.stack import Stack

from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.settings import Settings

pytestmark = pytest.mark.slow
# A Standard Webhooks secret: whsec_ + base64 of the HMAC key.
SECRET = "whsec_" + base64.b64encode(b"e2e-test-key-0123456789abcdef").decode()


def events(url: str, headers: dict[str, str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Every event of an SSE stream until the server closes it: (id, data)."""
    with (
        httpx.Client(timeout=60) as client,
        connect_sse(client, "GET", url, headers=headers or {}) as s,
    ):
        return [(e.id, json.loads(e.data)) for e in s.iter_sse()]


@pytest.mark.topology
def test_job_events_start_with_the_state_and_end_after_done(stack: Stack) -> None:
    stack.fake.configure(latency_s=0.5)
    stack.start_worker(engine_concurrency=1)
    job_id = stack.submit(sized_pdf([(200, 300)] * 3), dpi=72)
    seen = events(f"{stack.api}/v1/jobs/{job_id}/events")
    statuses = [data["status"] for _, data in seen]
    assert statuses[0] in ("queued", "processing") and statuses[-1] == "done"
    pages = [data["progress"]["pages_done"] for _, data in seen]
    assert pages == sorted(pages) and pages[-1] == 3 and len(set(pages)) >= 2
    # A reconnect after the end gets the final state once more only if it differs.
    assert events(f"{stack.api}/v1/jobs/{job_id}/events", {"last-event-id": seen[-1][0]}) == []
    assert len(events(f"{stack.api}/v1/jobs/{job_id}/events")) == 1


def test_batch_events_count_up_to_finished(stack: Stack) -> None:
    stack.fake.configure(latency_s=0.2)
    stack.start_worker(max_jobs=2)
    files = [("file", (f"{i}.png", png(80 + i, 50), "image/png")) for i in range(6)]
    batch_id = httpx.post(f"{stack.api}/v1/batches", files=files).json()["id"]
    seen = [data for _, data in events(f"{stack.api}/v1/batches/{batch_id}/events")]
    assert seen[-1]["status"] == "finished" and seen[-1]["counts"]["done"] == 6
    ended = [e["counts"]["done"] for e in seen]
    assert ended == sorted(ended)


def redis_clients(url: str) -> int:
    r = redis.Redis.from_url(url)
    count = len(r.client_list())
    r.close()
    return count


def test_200_listeners_on_one_process_share_its_redis_connections(stack: Stack) -> None:
    stack.fake.configure(latency_s=3.0)
    stack.start_worker()
    job_id = stack.submit(png(100, 60))
    before = redis_clients(stack.settings.store.redis_url)
    results: list[list[tuple[str, dict[str, Any]]]] = []
    url = f"{stack.api}/v1/jobs/{job_id}/events"
    threads = [threading.Thread(target=lambda: results.append(events(url))) for _ in range(200)]
    for t in threads:
        t.start()
    time.sleep(1.5)  # every listener connected and waiting
    during = redis_clients(stack.settings.store.redis_url)
    for t in threads:
        t.join(60)
    assert len(results) == 200 and all(r[-1][1]["status"] == "done" for r in results)
    assert during - before < 20, (before, during)  # not one connection per listener


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver that answers 500 to the first two deliveries, then checks them."""

    received: list[tuple[dict[str, str], bytes]] = []
    fail_first = 2

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        type(self).received.append((dict(self.headers), body))
        status = 500 if len(type(self).received) <= type(self).fail_first else 204
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


def verified(headers: dict[str, str], body: bytes) -> bool:
    """The check a receiver runs (as the README shows): the key is the secret's base64 part."""
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    return any(
        hmac.compare_digest(expected.decode(), sig.split(",", 1)[1])
        for sig in headers["webhook-signature"].split()
    )


@pytest.fixture
def hooked_stack(settings: Settings, tmp_path: Path) -> Iterator[Stack]:
    env = {"webhook_secrets": f"public:{SECRET}", "webhook_allow_private": "true"}
    proc, url = start_producer(settings.store.redis_url, **env)
    with FakeVllm() as fake:
        s = Stack(settings, url, fake, tmp_path / "shm", tmp_path)
        s.start_worker(**env)
        try:
            yield s
        finally:
            s.stop()
            stop(proc)


@pytest.mark.topology
def test_a_webhook_is_signed_retried_and_its_attempts_shown(
    hooked_stack: Stack, receiver: str
) -> None:
    job_id = hooked_stack.submit(png(90, 60), callback_url=receiver)
    assert hooked_stack.wait(job_id)["status"] == "done"
    deadline = time.monotonic() + 30
    while len(Receiver.received) < 3:
        assert time.monotonic() < deadline, Receiver.received
        time.sleep(0.1)
    headers, body = Receiver.received[-1]
    assert verified({k.lower(): v for k, v in headers.items()}, body)
    Webhook(SECRET).verify(body, {k.lower(): v for k, v in headers.items()})  # the spec's own
    summary = json.loads(body)
    assert summary["type"] == "job.finished" and summary["id"] == job_id
    assert summary["status"] == "done"
    time.sleep(0.5)
    view = httpx.get(f"{hooked_stack.api}/v1/jobs/{job_id}").json()
    assert view["webhook"]["status"] == "delivered" and view["webhook"]["attempts"] == 3
    assert len(Receiver.received) == 3  # delivered once, after two failures


def test_a_batch_webhook_arrives_once_when_every_job_has_ended(
    hooked_stack: Stack, receiver: str
) -> None:
    Receiver.fail_first = 0
    try:
        files = [("file", (f"{i}.png", png(80 + i, 50), "image/png")) for i in range(4)]
        url = f"{hooked_stack.api}/v1/batches?callback_url={receiver}"
        batch_id = httpx.post(url, files=files).json()["id"]
        deadline = time.monotonic() + 60
        while not any(json.loads(b)["type"] == "batch.finished" for _, b in Receiver.received):
            assert time.monotonic() < deadline, Receiver.received
            time.sleep(0.1)
        batch = [json.loads(b) for _, b in Receiver.received if b"batch.finished" in b]
        assert len(batch) == 1 and batch[0]["id"] == batch_id and batch[0]["done"] == 4
    finally:
        Receiver.fail_first = 2


def test_a_callback_to_a_private_address_is_refused_by_default(stack: Stack) -> None:
    r = httpx.post(f"{stack.api}/v1/jobs?callback_url=http://127.0.0.1:9/hook", content=png(50, 50))
    assert r.status_code == 400 and "callback_url" in r.json()["message"]
