"""The Python client against the real producer (and real workers where jobs must finish)."""

from __future__ import annotations

import pickle
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import redis
from support.documents import encrypted_pdf, png, sized_pdf
from support.invoices import EXPECTED, INVOICE_SCHEMA, invoice_pdf
from support.personal import form_pdf
from support.stack import Stack

from ocrq.client import (
    ApiError,
    AsyncClient,
    Client,
    Conflict,
    InvalidRequest,
    Job,
    JobFailed,
    NotFound,
    PayloadTooLarge,
    QueueFull,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    WaitTimeout,
    error_from_response,
)
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import JobOptions, JobView, Progress

MakeProducer = Callable[..., str]

PAGES = [(200, 300), (220, 310)]


@pytest.mark.smoke
def test_submitted_bytes_become_a_queued_job_with_the_given_options(api_url: str) -> None:
    with Client(api_url) as client:
        job = client.submit(png(64, 48), dpi=100, lane="batch", batch_size=2)
        assert isinstance(job, Job) and job.status == "queued" and job.created_at
        view = client.status(job)
    assert view.id == job.id and view.media_type == "image/png" and view.lane == "batch"
    assert (view.options.dpi, view.options.batch_size) == (100, 2)
    assert view.filename is None


def test_a_submitted_path_streams_with_its_name_and_a_sniffed_type(
    api_url: str, tmp_path: Path
) -> None:
    doc = tmp_path / "scan.bin"  # the extension says nothing; the bytes say PDF
    doc.write_bytes(sized_pdf(PAGES))
    with Client(api_url) as client:
        view = client.status(client.submit(doc).id)
    assert view.filename == "scan.bin" and view.media_type == "application/pdf"
    assert view.size == doc.stat().st_size


def test_an_explicit_filename_overrides_the_path_name(api_url: str, tmp_path: Path) -> None:
    doc = tmp_path / "a.pdf"
    doc.write_bytes(sized_pdf(PAGES))
    with Client(api_url) as client:
        assert client.status(client.submit(doc, filename="invoice.pdf")).filename == "invoice.pdf"


def test_text_bytes_raise_unsupported_media_type(api_url: str) -> None:
    with Client(api_url) as client, pytest.raises(UnsupportedMediaType) as caught:
        client.submit(b"just some text, not a document")
    assert caught.value.code is ErrorCode.UNSUPPORTED_MEDIA_TYPE and caught.value.status == 415
    assert isinstance(caught.value, ApiError) and isinstance(caught.value, OcrqError)


def test_an_out_of_range_option_raises_invalid_request(api_url: str) -> None:
    with Client(api_url) as client, pytest.raises(InvalidRequest) as caught:
        client.submit(png(10, 10), dpi=10)
    assert caught.value.status == 400 and "dpi" in caught.value.message


def test_a_document_over_the_limit_raises_payload_too_large(api_url: str, tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    big.write_bytes(png(10, 10) + b"\0" * (10 * 1024 * 1024 + 1))  # the default limit is 10 MiB
    with Client(api_url) as client, pytest.raises(PayloadTooLarge) as caught:
        client.submit(big)
    assert caught.value.status == 413


def test_an_unknown_job_raises_not_found_everywhere(api_url: str) -> None:
    with Client(api_url) as client:
        calls = (client.status, client.result, client.markdown, client.cancel, client.delete)
        for call in (*calls, client.wait):
            with pytest.raises(NotFound) as caught:
                call("no-such-job")
            assert caught.value.code is ErrorCode.NOT_FOUND and caught.value.status == 404


def test_a_job_id_cannot_address_another_route(api_url: str) -> None:
    with Client(api_url) as client:
        job = client.submit(png(10, 10))
        with pytest.raises(NotFound):
            client.status(f"../jobs/{job.id}")  # quoted, so not normalised into a real path


def test_the_result_of_a_queued_job_is_a_conflict(api_url: str) -> None:
    with Client(api_url) as client:
        job = client.submit(png(10, 10))
        with pytest.raises(Conflict) as caught:
            client.result(job)
    assert caught.value.status == 409 and not isinstance(caught.value, JobFailed)


def test_a_cancelled_job_fails_result_and_wait_with_code_cancelled(api_url: str) -> None:
    with Client(api_url) as client:
        job = client.submit(png(10, 10))
        assert client.cancel(job) == "cancelled"
        with pytest.raises(JobFailed) as from_result:
            client.result(job)
        with pytest.raises(JobFailed) as from_wait:
            client.wait(job, timeout=5, raise_on_failure=True)
        assert client.wait(job, timeout=5).status == "cancelled"  # no raise unless asked
    for caught in (from_result, from_wait):
        assert caught.value.code is ErrorCode.CANCELLED
        assert caught.value.view is not None and caught.value.view.id == job.id


def test_waiting_past_the_timeout_raises_wait_timeout(api_url: str) -> None:
    with Client(api_url) as client:
        job = client.submit(png(10, 10))  # no worker runs: it stays queued
        started = time.monotonic()
        with pytest.raises(WaitTimeout) as caught:
            client.wait(job, timeout=1.5)
    assert caught.value.view.status == "queued" and caught.value.code is ErrorCode.TIMEOUT
    assert time.monotonic() - started < 20  # a generous bound: the wait did end


def test_an_idempotency_key_replays_the_first_job(api_url: str) -> None:
    with Client(api_url) as client:
        first = client.submit(png(10, 10), idempotency_key="order-17")
        again = client.submit(png(20, 20), idempotency_key="order-17")
        other = client.submit(png(10, 10), idempotency_key="order-18")
    assert again.id == first.id and other.id != first.id


def test_api_keys_are_sent_as_bearer_and_a_missing_one_is_unauthorized(
    make_producer: MakeProducer,
) -> None:
    url = make_producer(api_keys="acme:key-acme")
    with Client(url) as anonymous, pytest.raises(Unauthorized) as caught:
        anonymous.submit(png(10, 10))
    assert caught.value.status == 401
    with Client(url, api_key="wrong") as wrong, pytest.raises(Unauthorized):
        wrong.submit(png(10, 10))
    with Client(url, api_key="key-acme") as acme:
        assert acme.status(acme.submit(png(10, 10))).status == "queued"


def http_503_count(url: str) -> float:
    """How many 503s the producer answered on /v1/jobs, from its metrics."""
    text = httpx.get(f"{url}/metrics", timeout=5).text
    found = re.search(r'ocrq_http_requests_total\{route="/v1/jobs",status="503"\} (\S+)', text)
    return float(found.group(1)) if found else 0.0


def test_queue_full_raises_with_retry_after_and_is_retried_until_there_is_room(
    make_producer: MakeProducer, clean_redis: str
) -> None:
    url = make_producer(max_backlog="1")
    with Client(url, submit_retries=0) as client:
        client.submit(png(10, 10))
        with pytest.raises(QueueFull) as caught:
            client.submit(png(10, 10))
    assert caught.value.status == 503 and caught.value.retry_after == 5
    with (
        Client(url, submit_retries=200, retry_sleep_max_s=0.05) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        pending = pool.submit(client.submit, png(12, 12))
        deadline = time.monotonic() + 10
        while http_503_count(url) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pending.done()  # still retrying
        store = redis.Redis.from_url(clean_redis)
        store.xtrim("ocrq:{p0}:stream:interactive", maxlen=0)  # make room, as a worker would
        store.close()
        job = pending.result(timeout=30)
    assert job.status == "queued" and http_503_count(url) >= 3


def test_an_unreachable_server_raises_unavailable_without_status() -> None:
    with Client("http://127.0.0.1:1", timeout=2) as client, pytest.raises(Unavailable) as caught:
        client.status("x")
    assert caught.value.status is None and caught.value.code is ErrorCode.UNAVAILABLE


def test_a_missing_file_is_a_file_not_found_error(api_url: str, tmp_path: Path) -> None:
    with Client(api_url) as client, pytest.raises(FileNotFoundError):
        client.submit(tmp_path / "absent.pdf")


@pytest.mark.slow
def test_wait_returns_the_finished_view_and_result_and_markdown_agree(
    stack: Stack, tmp_path: Path
) -> None:
    doc = tmp_path / "two.pdf"
    doc.write_bytes(sized_pdf(PAGES))
    with Client(stack.api) as client:
        job = client.submit(doc, dpi=72)
        view = client.wait(job, timeout=60, raise_on_failure=True)
        result, markdown = client.result(job), client.markdown(job)
    assert view.status == "done" and view.progress.pages_done == 2
    assert view.result is not None and view.result == result
    assert result.page_count == 2 and [p.width for p in result.pages] == [200, 220]
    assert markdown == result.markdown and "200x300" in markdown and "220x310" in markdown


@pytest.mark.slow
def test_a_schema_goes_with_the_upload_and_the_fields_come_back_typed(stack: Stack) -> None:
    with Client(stack.api) as client:
        job = client.submit(invoice_pdf(), extract=INVOICE_SCHEMA, text_layer="auto")
        client.wait(job, timeout=60, raise_on_failure=True)
        fields = client.fields(job)
    assert fields.values == EXPECTED and fields.error is None
    assert {s.path for s in fields.sources if s.grounded} == set(EXPECTED)


@pytest.mark.slow
def test_redact_kinds_and_a_pattern_go_as_options_and_come_back_masked(stack: Stack) -> None:
    with Client(stack.api) as client:
        redact = ["email", {"pattern": r"EMP-\d+", "name": "employee"}]
        job = client.submit(form_pdf(), redact=redact, text_layer="auto")
        client.wait(job, timeout=60, raise_on_failure=True)
        result = client.result(job)
    assert "[EMAIL]" in result.markdown and "jane.roe@example.org" not in result.markdown
    assert result.redacted == 1 and result.searchable_pdf


@pytest.mark.slow
def test_a_failed_job_raises_job_failed_with_the_job_error_code(stack: Stack) -> None:
    with Client(stack.api) as client:
        job = client.submit(encrypted_pdf())
        with pytest.raises(JobFailed) as from_wait:
            client.wait(job, timeout=60, raise_on_failure=True)
        with pytest.raises(JobFailed) as from_result:
            client.result(job)
        with pytest.raises(JobFailed):
            client.markdown(job)
    assert from_wait.value.code is ErrorCode.ENCRYPTED_DOCUMENT and from_wait.value.status is None
    assert from_result.value.code is ErrorCode.ENCRYPTED_DOCUMENT
    assert from_result.value.status == 409


async def test_async_client_reports_typed_errors(api_url: str) -> None:
    async with AsyncClient(api_url) as client:
        with pytest.raises(NotFound):
            await client.status("no-such-job")
        with pytest.raises(UnsupportedMediaType):
            await client.submit(b"plain text")
        job = await client.submit(png(10, 10))
        with pytest.raises(WaitTimeout):
            await client.wait(job, timeout=1)
        assert await client.cancel(job) == "cancelled"


async def test_async_submit_many_returns_jobs_and_errors_in_order(
    api_url: str, tmp_path: Path
) -> None:
    good = tmp_path / "good.png"
    good.write_bytes(png(30, 20))
    async with AsyncClient(api_url) as client:
        submitted = await client.submit_many(
            [good, b"not a document", png(40, 20)], concurrency=2, lane="batch"
        )
    assert isinstance(submitted[0], Job) and isinstance(submitted[2], Job)
    assert isinstance(submitted[1], UnsupportedMediaType)


@pytest.mark.slow
async def test_async_submit_many_and_wait_many_finish_three_files(
    stack: Stack, tmp_path: Path
) -> None:
    paths = []
    for i, width in enumerate((100, 120, 140)):
        paths.append(tmp_path / f"page{i}.png")
        paths[-1].write_bytes(png(width, 80))
    async with AsyncClient(stack.api) as client:
        jobs = await client.submit_many(paths, concurrency=3)
        assert all(isinstance(j, Job) for j in jobs)
        views = await client.wait_many([j for j in jobs if isinstance(j, Job)], timeout=60)
    assert [v.status for v in views] == ["done"] * 3
    assert [v.filename for v in views] == ["page0.png", "page1.png", "page2.png"]
    assert [v.result.pages[0].width for v in views if v.result] == [100, 120, 140]


@pytest.mark.slow
def test_sync_submit_many_and_wait_many_keep_the_order(stack: Stack) -> None:
    with Client(stack.api) as client:
        jobs = client.submit_many([png(50, 40), png(60, 40)], concurrency=2)
        views = client.wait_many([j for j in jobs if isinstance(j, Job)], timeout=60)
    assert [v.result.pages[0].width for v in views if v.result] == [50, 60]


def test_sync_submit_many_returns_jobs_and_errors_in_order(api_url: str) -> None:
    documents = [png(10, 10), b"not a document", png(30, 30)]
    with Client(api_url) as client:
        submitted = client.submit_many(documents, concurrency=3)
        assert isinstance(submitted[1], UnsupportedMediaType)
        sizes = [client.status(j).size for j in submitted if isinstance(j, Job)]
    assert sizes == [len(documents[0]), len(documents[2])]


def test_a_body_that_is_not_ours_maps_to_a_code_by_status() -> None:
    proxy_page = httpx.Response(502, text="<html>Bad Gateway</html>")
    error = error_from_response(proxy_page)
    assert isinstance(error, Unavailable) and error.status == 502 and "Bad Gateway" in error.message


def test_an_unknown_code_keeps_its_name_and_the_retry_after() -> None:
    body = b'{"code": "brand_new", "message": "from a newer server"}'
    response = httpx.Response(503, content=body, headers={"Retry-After": "7"})
    error = error_from_response(response)
    assert type(error) is ApiError and error.code is ErrorCode.INTERNAL
    assert "brand_new" in str(error) and error.retry_after == 7 and error.status == 503


def test_errors_survive_pickling_with_their_fields() -> None:
    view = JobView(
        id="j1", status="queued", filename=None, media_type="image/png", size=1,
        lane="interactive", options=JobOptions(), progress=Progress(), attempts=0,
        created_at=None, started_at=None, finished_at=None,
    )  # fmt: skip
    timeout = pickle.loads(pickle.dumps(WaitTimeout("still queued", view)))
    assert type(timeout) is WaitTimeout and timeout.view == view
    assert timeout.code is ErrorCode.TIMEOUT and timeout.message == "still queued"
    full = pickle.loads(pickle.dumps(QueueFull("queue_full", "full", status=503, retry_after=5)))
    assert (type(full), full.code, full.status, full.retry_after) == (
        QueueFull,
        "queue_full",
        503,
        5,
    )


@pytest.mark.slow
def test_the_client_submits_follows_and_reads_a_batch(stack: Stack, tmp_path: Path) -> None:
    paths = []
    for i in range(3):
        path = tmp_path / f"{i}.png"
        path.write_bytes(png(90 + i, 60))
        paths.append(path)
    with Client(stack.api) as client:
        answer = client.submit_batch([*paths, b"not a document"], dpi=100)
        assert [f.index for f in answer.accepted] == [0, 1, 2]
        assert answer.rejected[0].code == "unsupported_media_type"
        kinds = [e.data["status"] for e in client.events(answer.id, batch=True)]
        assert kinds[-1] == "finished"
        view = client.batch_status(answer.id)
        assert view.counts.done == 3 and view.options.dpi == 100
        rows = list(client.iter_batch_results(answer.id))
        assert [r["filename"] for r in rows] == ["0.png", "1.png", "2.png"]
        assert all("91x60" in r["result"]["markdown"] for r in rows[1:2])
