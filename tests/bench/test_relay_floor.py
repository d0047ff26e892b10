"""The floor relay that bench_enqueue measures ocrq against stores what it is sent: a raw
body as it is, a multipart body's ``file`` part alone, byte for byte (a floor that stored
less would flatter itself)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import redis

from bench.bench_enqueue import relay_floor

# A boundary-like run inside the file: the parser must not cut the part there.
DOCUMENT = os.urandom(200_000) + b"\r\n--not-the-boundary\r\n" + os.urandom(100_000)


@pytest.fixture
def floor(clean_redis: str, tmp_path: Path) -> Iterator[tuple[str, redis.Redis]]:
    """The relay on the suite's Redis, and a client of that Redis."""
    where = urlsplit(clean_redis)
    if os.environ.get("OCRQ_TEST_TOPOLOGY", "single") != "single" or where.hostname not in (
        "127.0.0.1",
        "localhost",
    ):
        pytest.skip("the floor relay writes to one local Redis on database 0")
    client = redis.Redis(host="127.0.0.1", port=where.port or 6379)
    with relay_floor(where.port or 6379, tmp_path / "floor.log") as url:
        yield url, client
    client.close()


def stored(client: redis.Redis, response: httpx.Response) -> bytes | None:
    """The payload the floor wrote for the job it answered with."""
    assert response.status_code == 202, response.text
    payload = client.hget(f"floor:job:{response.json()['id']}", "payload")
    return payload if isinstance(payload, bytes) else None


def test_a_multipart_upload_stores_only_its_file_part(floor: tuple[str, redis.Redis]) -> None:
    url, client = floor
    files = {"file": ("d.pdf", DOCUMENT, "application/pdf")}
    response = httpx.post(f"{url}/v1/jobs", files=files, data={"lang": "eng"}, timeout=30)
    assert stored(client, response) == DOCUMENT


def test_a_raw_upload_is_stored_as_sent(floor: tuple[str, redis.Redis]) -> None:
    url, client = floor
    headers = {"content-type": "application/pdf"}
    response = httpx.post(f"{url}/v1/jobs", content=DOCUMENT, headers=headers, timeout=30)
    assert stored(client, response) == DOCUMENT
