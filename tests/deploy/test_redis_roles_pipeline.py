"""The whole pipeline, a real producer and a real worker, runs as their own Redis users."""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.documents import png
from support.loopback_receivers import Receiver, answer, receiving
from support.processes import stop, wait_until
from support.role_servers import PARTITIONS, RoleServer
from support.services import producer_process
from support.stack import Stack, stack_on


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver on loopback that answers 204 and keeps every request."""
    with receiving(answer(204)) as found:
        yield found


def hook_env() -> dict[str, str]:
    """Callbacks to the loopback receiver, signed with a Standard Webhooks secret."""
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    return {"WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_SECRETS": f"public:{secret}"}


def start_producer_as(
    url: str, log: Path, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    """`ocrq producer` on this Redis URL, logging to ``log``; the process and its URL."""
    values = {"REDIS_MODE": "single", "PARTITIONS": str(PARTITIONS), "REDIS_SENTINELS": ""}
    return producer_process(url, {**values, "LOG_LEVEL": "info", **env}, log)


def received(receiver: Receiver, kind: str, some_id: str) -> bool:
    """Whether the receiver got the callback of that kind for that job or batch."""
    bodies = [json.loads(request.body) for request in receiver.requests]
    return any(b["type"] == kind and b["id"] == some_id for b in bodies)


@pytest.mark.slow
def test_the_whole_pipeline_runs_as_the_producer_and_worker_users(
    roles: RoleServer, receiver: Receiver, tmp_path: Path
) -> None:
    env = hook_env()
    proc, api = start_producer_as(roles.url("producer"), tmp_path / "producer.log", env)
    (tmp_path / "shm").mkdir()
    settings = roles.settings("worker", shm_dir=str(tmp_path / "shm"))
    try:
        with stack_on(settings, api, tmp_path) as stack:
            run_the_pipeline(stack, receiver, env)
        assert [w.proc.returncode for w in stack.workers] == [0]  # drained, then exited 0
    finally:
        stop(proc)
    logs = [tmp_path / "producer.log", *(w.log_path for w in stack.workers)]
    for log in logs:
        assert "noperm" not in log.read_text(errors="replace").lower(), log
    assert roles.refusals() == []


def run_the_pipeline(stack: Stack, receiver: Receiver, env: dict[str, str]) -> None:
    """Cancel and delete queued jobs, then jobs and a batch with callbacks, end to end."""
    api, hook = stack.api, receiver.url()
    queued = stack.submit(png(60, 40))
    assert httpx.post(f"{api}/v1/jobs/{queued}/cancel").json()["status"] == "cancelled"
    doomed = stack.submit(png(61, 40))
    assert httpx.delete(f"{api}/v1/jobs/{doomed}").status_code == 200
    assert httpx.get(f"{api}/v1/jobs/{doomed}").status_code == 404
    stack.start_worker(**env)
    body = {"document": base64.b64encode(png(90, 60)).decode(),
            "options": {"callback_url": hook}}  # fmt: skip
    first = httpx.post(f"{api}/v1/jobs", json=body, headers={"Idempotency-Key": "k1"}).json()
    again = httpx.post(f"{api}/v1/jobs", json=body, headers={"Idempotency-Key": "k1"}).json()
    assert first["id"] == again["id"]
    assert stack.wait(first["id"])["status"] == "done"
    assert httpx.get(f"{api}/v1/jobs/{first['id']}/result").status_code == 200
    files = [("file", (f"{i}.png", png(70 + i, 50), "image/png")) for i in range(3)]
    batch = httpx.post(f"{api}/v1/batches?callback_url={hook}", files=files, timeout=60)
    assert batch.status_code == 202, batch.text
    batch_id = batch.json()["id"]
    assert stack.wait_for_batch(batch_id, timeout_s=60)["counts"]["done"] == 3
    lines = httpx.get(f"{api}/v1/batches/{batch_id}/results", timeout=30).text.splitlines()
    assert len(lines) == 3
    wait_until(lambda: received(receiver, "job.finished", first["id"]), 30, "the job's webhook")
    wait_until(lambda: received(receiver, "batch.finished", batch_id), 30, "the batch's webhook")
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
