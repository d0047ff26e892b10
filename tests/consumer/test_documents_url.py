"""Jobs whose document is a URL: fetched by the worker with the webhooks' address checks."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec
import pytest
from support.documents import png, sized_pdf

from ocrq.shared.blobs.base import BlobStore
from ocrq.shared.blobs.paths import RESULT_JSON, result_key
from ocrq.shared.schemas import DocumentRef, Result, Status
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore

TENANT = "t"  # the tenant queue_ref queues for (tests/consumer/conftest.py)
Burst = Callable[[Settings], Awaitable[None]]
QueueRef = Callable[..., Awaitable[str]]
# path -> the answers, in turn (the last one repeats): (status, headers, body)
Answers = dict[str, list[tuple[int, dict[str, str], bytes]]]


class Origin:
    """A loopback HTTP server answering each path as told; it counts the requests."""

    def __init__(self) -> None:
        self.answers: Answers = {}
        self.requests: dict[str, int] = {}
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server calls it by this name
                seen = origin.requests.get(self.path, 0)
                origin.requests[self.path] = seen + 1
                turns = origin.answers.get(self.path, [(404, {}, b"no such file")])
                status, headers, body = turns[min(seen, len(turns) - 1)]
                self.send_response(status)
                for name, value in {"content-length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"


@pytest.fixture
def origin() -> Iterator[Origin]:
    found = Origin()
    found.thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()
    found.thread.join(5)


def url_ref(url: str) -> DocumentRef:
    return DocumentRef(kind="url", url=url, owned=False)


@pytest.fixture
def open_settings(settings: Settings) -> Settings:
    """Loopback sources allowed (as a test's webhooks are), quick retries of an outage."""
    return replace_settings(settings, webhook_allow_private=True, blob_outage_s=30.0)


async def test_a_url_source_is_fetched_sniffed_and_read(
    open_settings: Settings,
    tmp_path: Path,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    origin: Origin,
    opened: Callable[[Settings], BlobStore],
) -> None:
    on_file = replace_settings(open_settings, blob_url=f"file://{tmp_path / 'blobs'}")
    origin.answers["/scan.pdf"] = [(200, {}, sized_pdf([(300, 400), (400, 300)]))]
    origin.answers["/photo"] = [(200, {"content-type": "text/plain"}, png(320, 200))]
    pdf = await queue_ref(url_ref(origin.url("/scan.pdf")), media_type="")
    image = await queue_ref(url_ref(origin.url("/photo")), media_type="")
    await burst(on_file)
    blobs = opened(on_file)
    for job, media_type, pages in [(pdf, "application/pdf", 2), (image, "image/png", 1)]:
        record = await store.read(job)
        assert record.status is Status.DONE, record.error
        body = await blobs.get(result_key(TENANT, job, RESULT_JSON))
        result = msgspec.json.decode(body, type=Result)
        assert (result.media_type, result.page_count) == (media_type, pages)


async def test_url_sources_that_cannot_be_read_fail_with_a_clear_code(
    open_settings: Settings, store: JobStore, burst: Burst, queue_ref: QueueRef, origin: Origin
) -> None:
    limited = replace_settings(open_settings, max_source_bytes=4096)
    origin.answers["/big.pdf"] = [(200, {}, b"%PDF-1.7\n" + b"0" * 8192)]
    origin.answers["/private.pdf"] = [(403, {}, b"denied")]
    origin.answers["/moved.pdf"] = [(302, {"location": "http://10.0.0.1/x.pdf"}, b"")]
    origin.answers["/notes.txt"] = [(200, {}, b"just some text, no document")]
    expected = {
        "/big.pdf": "payload_too_large",
        "/missing.pdf": "not_found",
        "/private.pdf": "invalid_request",
        "/moved.pdf": "invalid_request",
        "/notes.txt": "unsupported_media_type",
    }
    jobs = {path: await queue_ref(url_ref(origin.url(path)), media_type="") for path in expected}
    await burst(limited)
    for path, code in expected.items():
        record = await store.read(jobs[path])
        assert record.status is Status.FAILED, path
        assert record.error is not None and record.error.code == code, (path, record.error)
    assert origin.requests["/moved.pdf"] == 1  # the redirect was not followed


async def test_a_url_source_on_a_private_address_is_refused_unless_allowed(
    settings: Settings, store: JobStore, burst: Burst, queue_ref: QueueRef, origin: Origin
) -> None:
    origin.answers["/scan.pdf"] = [(200, {}, sized_pdf([(300, 400)]))]
    job = await queue_ref(url_ref(origin.url("/scan.pdf")), media_type="")
    await burst(settings)  # OCRQ_WEBHOOK_ALLOW_PRIVATE off: loopback is private
    record = await store.read(job)
    assert record.error is not None and record.error.code == "invalid_request"
    assert "private" in record.error.message
    assert "/scan.pdf" not in origin.requests


async def test_an_origin_that_fails_for_a_while_is_waited_out(
    open_settings: Settings, store: JobStore, burst: Burst, queue_ref: QueueRef, origin: Origin
) -> None:
    document = sized_pdf([(300, 400)])
    origin.answers["/flaky.pdf"] = [(503, {}, b""), (500, {}, b""), (200, {}, document)]
    origin.answers["/down.pdf"] = [(503, {}, b"")]
    flaky = await queue_ref(url_ref(origin.url("/flaky.pdf")), media_type="")
    down = await queue_ref(url_ref(origin.url("/down.pdf")), media_type="")
    await burst(replace_settings(open_settings, blob_outage_s=3.0))
    assert (await store.read(flaky)).status is Status.DONE
    assert origin.requests["/flaky.pdf"] == 3
    record = await store.read(down)
    assert record.error is not None and record.error.code == "unavailable"
    assert origin.requests["/down.pdf"] >= 2
