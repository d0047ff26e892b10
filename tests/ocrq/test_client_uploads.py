"""The clients' upload path: over the inline limit a file goes to the producer's object store
(POST /v1/uploads, one PUT), under it inline; the limits are checked before a byte is sent."""

from __future__ import annotations

import http.server
import re
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import msgspec
import pytest
import redis
from support.documents import png

from ocrq.client import NO_STORE, AsyncClient, Client, InvalidRequest, PayloadTooLarge
from ocrq.shared.embedded import free_port
from ocrq.shared.schemas import DocumentRef

MakeProducer = Callable[..., str]
INLINE_MAX = 4096


def document(tmp_path: Path, extra: int, name: str = "scan.png") -> Path:
    """A PNG padded to past ``extra`` bytes (the producer sniffs only its head)."""
    path = tmp_path / name
    path.write_bytes(png(10, 10) + b"\0" * extra)
    return path


def job_hash(redis_url: str, job_id: str) -> dict[bytes, bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        key = next(client.scan_iter(f"*:job:{job_id}"))
        return {k: v for k, v in client.hgetall(key).items()}
    finally:
        client.close()


def requests_to(url: str, route: str) -> float:
    """How many requests the producer answered on ``route`` (its metrics), any status."""
    text = httpx.get(f"{url}/metrics", timeout=5).text
    pattern = rf'ocrq_http_requests_total\{{route="{re.escape(route)}",status="\d+"\}} (\S+)'
    return sum(float(n) for n in re.findall(pattern, text))


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "blobs"
    folder.mkdir()
    return folder


@pytest.fixture
def store_url(make_producer: MakeProducer, store_dir: Path) -> str:
    """A producer with a file:// store and a small inline limit."""
    return make_producer(blob_url=store_dir.as_uri(), inline_max_bytes=str(INLINE_MAX))


def test_a_file_over_the_inline_limit_goes_by_upload_and_its_job_holds_a_reference(
    store_url: str, store_dir: Path, clean_redis: str, tmp_path: Path
) -> None:
    doc = document(tmp_path, 600_000)
    seen: list[tuple[int, int]] = []
    with Client(store_url) as client:
        assert client.capabilities().uploads
        job = client.submit(doc, dpi=100, progress=lambda sent, total: seen.append((sent, total)))
        view = client.status(job)
    assert view.filename == "scan.png" and view.size == doc.stat().st_size
    assert view.options.dpi == 100 and view.media_type == "image/png"
    fields = job_hash(clean_redis, job.id)
    assert b"payload" not in fields
    ref = msgspec.json.decode(fields[b"document"], type=DocumentRef)
    assert ref.kind == "blob" and ref.size == doc.stat().st_size
    stored = store_dir / ref.key
    assert ref.key.startswith("uploads/") and ref.key.endswith(job.id)
    assert stored.read_bytes() == doc.read_bytes()
    sent = [s for s, _ in seen]
    assert sent == sorted(sent) and seen[-1] == (doc.stat().st_size, doc.stat().st_size)
    assert len(seen) >= 3  # chunk by chunk, not at the end only


def test_a_file_under_the_inline_limit_stays_inline(
    store_url: str, store_dir: Path, clean_redis: str
) -> None:
    small = png(10, 10)
    assert len(small) <= INLINE_MAX
    seen: list[tuple[int, int]] = []
    with Client(store_url) as client:
        job = client.submit(small, progress=lambda sent, total: seen.append((sent, total)))
    fields = job_hash(clean_redis, job.id)
    assert fields[b"payload"] == small and b"document" not in fields
    assert not list(store_dir.rglob("uploads/*"))
    assert seen[-1] == (len(small), len(small))


def test_capabilities_are_read_once_per_client(store_url: str, tmp_path: Path) -> None:
    before = requests_to(store_url, "/v1/capabilities")
    with Client(store_url) as client:
        for i in range(3):
            client.submit(document(tmp_path, 10_000 * (i + 1), f"d{i}.png"))
        client.submit(png(10, 10))
    assert requests_to(store_url, "/v1/capabilities") - before == 1


async def test_the_async_client_uploads_with_progress_too(
    store_url: str, clean_redis: str, tmp_path: Path
) -> None:
    doc = document(tmp_path, 300_000)
    seen: list[int] = []
    async with AsyncClient(store_url) as client:
        jobs = await client.submit_many([doc, doc], concurrency=2)
        one = await client.submit(doc, progress=lambda sent, _total: seen.append(sent))
    assert all(not isinstance(j, Exception) for j in jobs)
    for job in [*jobs, one]:
        assert not isinstance(job, Exception)
        assert b"document" in job_hash(clean_redis, job.id)
    assert seen[-1] == doc.stat().st_size


def test_an_upload_streams_from_disk_without_holding_the_file(
    store_url: str, tmp_path: Path
) -> None:
    size = 24 * 1024 * 1024
    doc = document(tmp_path, size)
    with Client(store_url, timeout=120) as client:
        client.capabilities()
        tracemalloc.start()
        try:
            client.submit(doc)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < size / 4, f"the client held {peak} bytes for a {size}-byte upload"


def test_a_document_over_the_source_limit_is_refused_before_a_byte_is_sent(
    make_producer: MakeProducer, store_dir: Path, tmp_path: Path
) -> None:
    url = make_producer(
        blob_url=store_dir.as_uri(), inline_max_bytes="4096", max_source_bytes="100000"
    )
    with Client(url) as client, pytest.raises(PayloadTooLarge) as caught:
        client.submit(document(tmp_path, 200_000))
    assert caught.value.status == 413 and "OCRQ_MAX_SOURCE_BYTES" in caught.value.message
    assert requests_to(url, "/v1/uploads") == 0 and not list(store_dir.rglob("uploads/*"))


def test_without_a_store_a_file_over_the_document_limit_is_refused_here(
    make_producer: MakeProducer, tmp_path: Path
) -> None:
    url = make_producer(max_document_bytes="50000")
    with Client(url) as client, pytest.raises(PayloadTooLarge) as caught:
        client.submit(document(tmp_path, 60_000))
    assert caught.value.status == 413 and "OCRQ_BLOB_URL" in caught.value.message
    assert requests_to(url, "/v1/jobs") == 0


def test_an_option_typo_is_refused_before_the_upload(
    store_url: str, store_dir: Path, tmp_path: Path
) -> None:
    with Client(store_url) as client, pytest.raises(InvalidRequest) as caught:
        client.submit(document(tmp_path, 50_000), dpy=100)
    assert "dpy" in caught.value.message
    assert requests_to(store_url, "/v1/uploads") == 0


def test_an_upload_id_queues_as_its_own_job_once(store_url: str, tmp_path: Path) -> None:
    with Client(store_url) as client:
        upload_id = client.upload(document(tmp_path, 20_000))
        job = client.submit_source(upload_id=upload_id, filename="named.png", lane="batch")
        view = client.status(job)
        assert job.id == upload_id and view.filename == "named.png" and view.lane == "batch"
        with pytest.raises(InvalidRequest):
            client.submit_source(key="s3://b/k", url="https://example.com/a.pdf")
        with pytest.raises(InvalidRequest):
            client.submit_source(key="tenants/x/a.pdf")  # not an s3:// key


@pytest.fixture
def older_producer() -> Iterator[str]:
    """A loopback server that, like a producer from before the store, has no capabilities."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"code":"not_found","message":"no such route"}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_an_older_producer_without_capabilities_reads_as_one_without_a_store(
    older_producer: str,
) -> None:
    with Client(older_producer) as client:
        assert client.capabilities() == NO_STORE
