"""The OpenAPI document tells the truth: schemathesis, every check, passes against the producer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import stop
from support.services import start_producer

from ocrq.shared.settings import Settings

CONFIG = Path(__file__).with_name("schemathesis.toml")
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


@pytest.mark.slow
@pytest.mark.parametrize("keys", ["", "acme:key-acme"], ids=["open", "with-keys"])
def test_schemathesis_finds_nothing_with_every_check(
    settings: Settings, keys: str, tmp_path: Path
) -> None:
    # Long-polls are capped at 2 s so that a run stays short (the schema says so too). The
    # caller is an admin, so that GET /v1/audit is reached too (not only its 403).
    admin = "acme" if keys else "public"
    proc, url = start_producer(
        settings.store.redis_url, api_keys=keys, max_wait_s="2", admin_tenants=admin
    )
    auth = ["-H", "Authorization: Bearer key-acme"] if keys else []
    try:
        done = subprocess.run(
            [str(SCHEMATHESIS), "--config-file", str(CONFIG), "run",
             f"{url}/schema/openapi.json", "--checks", "all", "--max-examples", "25",
             "--request-timeout", "10", "--seed", "1", "--exclude-path-regex", "/events$", *auth],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip
    finally:
        stop(proc)
    report = done.stdout[-6000:]
    assert done.returncode == 0, report
    assert " passed" in report and "failed" not in report.split("SUMMARY")[-1], report
