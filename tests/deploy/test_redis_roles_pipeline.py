"""The whole pipeline, a real producer and a real worker, runs as their own Redis users."""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.documents import png
from support.processes import stop, wait_http, wait_until
from support.role_servers import PARTITIONS, RoleServer
from support.stack import Stack

from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.embedded import free_port


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver on loopback: keeps every body, answers 204."""

    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        type(self).bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


def hook_env() -> dict[str, str]:
    """Callbacks to the loopback receiver, signed with a Standard Webhooks secret."""
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    return {"WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_SECRETS": f"public:{secret}"}


def start_producer_as(
    url: str, log: Path, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    """`ocrq producer` on this Redis URL, logging to ``log``; the process and its URL."""
    port = free_port()
    values = {
        "REDIS_URL": url, "REDIS_MODE": "single", "PARTITIONS": str(PARTITIONS),
        "REDIS_SENTINELS": "", "LOG_FORMAT": "json", "LOG_LEVEL": "info",
        "PRODUCER_WORKERS": "1", **env,
    }  # fmt: skip
    full_env = {**os.environ, **{f"OCRQ_{k}": v for k, v in values.items()}}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ocrq.cli", "producer", "--port", str(port)],
        env=full_env, stdout=subprocess.DEVNULL, stderr=log.open("wb"),
    )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)
    except BaseException:
        stop(proc)
        raise
    return proc, f"http://127.0.0.1:{port}"


def received(kind: str, some_id: str) -> bool:
    return any(b["type"] == kind and b["id"] == some_id for b in Receiver.bodies)


@pytest.mark.slow
def test_the_whole_pipeline_runs_as_the_producer_and_worker_users(
    roles: RoleServer, receiver: str, tmp_path: Path
) -> None:
    env = hook_env()
    proc, api = start_producer_as(roles.url("producer"), tmp_path / "producer.log", env)
    (tmp_path / "shm").mkdir()
    settings = roles.settings("worker", shm_dir=str(tmp_path / "shm"))
    try:
        with FakeVllm() as fake:
            stack = Stack(settings, api, fake, tmp_path / "shm", tmp_path)
            try:
                run_the_pipeline(stack, receiver, env)
            finally:
                stack.stop()
        assert [w.proc.returncode for w in stack.workers] == [0]  # drained, then exited 0
    finally:
        stop(proc)
    logs = [tmp_path / "producer.log", *(w.log_path for w in stack.workers)]
    for log in logs:
        assert "noperm" not in log.read_text(errors="replace").lower(), log
    assert roles.refusals() == []


def run_the_pipeline(stack: Stack, receiver: str, env: dict[str, str]) -> None:
    """Cancel and delete queued jobs, then jobs and a batch with callbacks, end to end."""
    api = stack.api
    queued = stack.submit(png(60, 40))
    assert httpx.post(f"{api}/v1/jobs/{queued}/cancel").json()["status"] == "cancelled"
    doomed = stack.submit(png(61, 40))
    assert httpx.delete(f"{api}/v1/jobs/{doomed}").status_code == 200
    assert httpx.get(f"{api}/v1/jobs/{doomed}").status_code == 404
    stack.start_worker(**env)
    body = {"document": base64.b64encode(png(90, 60)).decode(),
            "options": {"callback_url": receiver}}  # fmt: skip
    first = httpx.post(f"{api}/v1/jobs", json=body, headers={"Idempotency-Key": "k1"}).json()
    again = httpx.post(f"{api}/v1/jobs", json=body, headers={"Idempotency-Key": "k1"}).json()
    assert first["id"] == again["id"]
    assert stack.wait(first["id"])["status"] == "done"
    assert httpx.get(f"{api}/v1/jobs/{first['id']}/result").status_code == 200
    files = [("file", (f"{i}.png", png(70 + i, 50), "image/png")) for i in range(3)]
    batch = httpx.post(f"{api}/v1/batches?callback_url={receiver}", files=files, timeout=60)
    assert batch.status_code == 202, batch.text
    batch_id = batch.json()["id"]
    assert stack.wait_for_batch(batch_id, timeout_s=60)["counts"]["done"] == 3
    lines = httpx.get(f"{api}/v1/batches/{batch_id}/results", timeout=30).text.splitlines()
    assert len(lines) == 3
    wait_until(lambda: received("job.finished", first["id"]), 30, "the job's webhook")
    wait_until(lambda: received("batch.finished", batch_id), 30, "the batch's webhook")
    assert first["id"] in {j["id"] for j in httpx.get(f"{api}/v1/jobs").json()["jobs"]}
    assert httpx.get(f"{api}/readyz").json()["status"] == "ready"
    assert metric(httpx.get(f"{api}/metrics").text, "ocrq_redis_memory_used_bytes") > 0
    assert httpx.delete(f"{api}/v1/batches/{batch_id}").status_code == 200
    assert httpx.get(f"{api}/v1/batches/{batch_id}").status_code == 404
    time.sleep(1.5)  # a reclaim turn and a webhook turn more, as the worker's user


def metric(text: str, name: str) -> float:
    """A sample's value in Prometheus text (INFO and XINFO read it at scrape time)."""
    (line,) = (line for line in text.splitlines() if line.startswith(f"{name} "))
    return float(line.split()[1])
