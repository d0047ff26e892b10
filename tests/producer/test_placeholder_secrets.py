"""The shipped `change-me…` secrets: `ocrq producer` and `ocrq worker` refuse them, `ocrq up` not.

k8s/base/secrets.yaml ships placeholders so the manifests apply; a deployment that forgot to
replace them would run with a password the whole world has read. Each process checks before
it opens a port or a connection, and names the setting to fix (never the secret's value).
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.payloads import small_pdf
from support.processes import stop

from ocrq.shared.embedded import free_port
from ocrq.shared.schemas import TERMINAL
from ocrq.shared.settings import Settings, load_settings, refuse_placeholder_secrets

# As k8s/base/secrets.yaml ships them; the Redis URL points at a port nothing listens on.
PLACEHOLDERS = {
    "OCRQ_API_KEYS": "example-tenant:change-me-api-key",
    # Standard Webhooks form (whsec_ + base64): the placeholder is in the decoded key.
    "OCRQ_WEBHOOK_SECRETS": "example-tenant:whsec_"
    + base64.b64encode(b"change-me-webhook-secret").decode(),
    "OCRQ_REDIS_URL": "redis://:change-me-redis-password@127.0.0.1:1/0",
}


def ocrq(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ocrq.cli", *args],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("command", [["producer", "--port", "0"], ["worker"]])
@pytest.mark.parametrize("setting", sorted(PLACEHOLDERS))
def test_producer_and_worker_refuse_a_shipped_placeholder_naming_the_setting(
    command: list[str], setting: str
) -> None:
    done = ocrq(command, {setting: PLACEHOLDERS[setting], "OCRQ_METRICS_PORT": "0"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert setting in done.stderr and "placeholder" in done.stderr
    assert PLACEHOLDERS[setting].rpartition(":")[2] not in done.stderr  # the value stays secret


def test_a_real_secret_passes_and_the_laptop_flag_allows_a_placeholder() -> None:
    real = load_settings({"OCRQ_API_KEYS": "acme:9f86d081884c7d659a2feaa0c55ad015"})
    refuse_placeholder_secrets(real)
    shipped = load_settings({"OCRQ_API_KEYS": PLACEHOLDERS["OCRQ_API_KEYS"]})
    with pytest.raises(ValueError, match="OCRQ_API_KEYS"):
        refuse_placeholder_secrets(shipped)
    refuse_placeholder_secrets(shipped, allow_placeholders=True)


def wait_for_job(client: httpx.Client, job_id: str, timeout_s: float = 90) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = str(client.get(f"/v1/jobs/{job_id}", params={"wait": 5}).json()["status"])
        if status in TERMINAL:
            return status
    raise TimeoutError(job_id)


def test_ocrq_up_runs_a_job_with_the_shipped_placeholders(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    env = {**os.environ, "OCRQ_API_KEYS": PLACEHOLDERS["OCRQ_API_KEYS"],
           "OCRQ_WEBHOOK_SECRETS": PLACEHOLDERS["OCRQ_WEBHOOK_SECRETS"]}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "ocrq.cli", "up", "--port", str(port), "--workers", "1",
         "--engine", "local", "--redis-url", settings.store.redis_url,
         "--data-dir", str(tmp_path / "data")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    headers = {"X-API-Key": "change-me-api-key"}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as c:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    if c.get("/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            assert proc.poll() is None, "ocrq up exited: a child refused to start"
            job = c.post(
                "/v1/jobs", content=small_pdf(), headers={"Content-Type": "application/pdf"}
            )
            assert job.status_code == 202, job.text
            assert wait_for_job(c, job.json()["id"]) == "done"  # the worker runs too
    finally:
        proc.send_signal(signal.SIGINT)  # as Ctrl-C: the workers drain, then everything stops
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            stop(proc)
