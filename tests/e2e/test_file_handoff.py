"""OCRQ_PAGE_HANDOFF=file end to end: vLLM reads the rendered pages from the worker's shm.

The fake vLLM runs as vLLM started with ``--allowed-local-media-path <shm>/ocrq``: it reads
and decodes each file:// page itself, so a page deleted too early fails the request. Every
exit path (done, cancelled, drained, SIGKILLed then swept) must leave no page behind.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.documents import png, sized_pdf
from support.processes import wait_until
from support.stack import Stack, WorkerProc

pytestmark = pytest.mark.slow

SIZES = [(200 + 10 * i, 300 + 5 * i) for i in range(4)]  # points = pixels at 72 dpi
FILE = {"page_handoff": "file"}


@pytest.fixture
def file_stack(stack: Stack) -> Stack:
    """The stack, its fake vLLM allowed to read the workers' page folders."""
    stack.fake.configure(allowed_local_media_path=str(stack.shm / "ocrq"))
    return stack


def image_urls(body: dict[str, Any]) -> list[str]:
    """The image URLs of one recorded chat-completion request."""
    return [
        part["image_url"]["url"]
        for part in body["messages"][0]["content"]
        if part["type"] == "image_url"
    ]


def page_files(stack: Stack) -> list[Path]:
    """Rendered pages (and probe pages) on disk now, in any worker's folder."""
    return sorted(p for p in stack.shm.rglob("*") if p.is_file() and p.name != "owner")


def engine_reading(stack: Stack) -> None:
    """Wait until a page request is running in the fake: its file must be on disk meanwhile."""
    wait_until(lambda: stack.fake.stats()["running"] >= 1, 20, "no request ran in the engine")
    assert page_files(stack), "the page file is gone while the engine still works on it"


def test_a_pdf_is_read_by_the_engine_from_file_urls_and_leaves_no_page(
    file_stack: Stack,
) -> None:
    stack = file_stack
    stack.start_worker(**FILE)
    view = stack.wait(stack.submit(sized_pdf(SIZES), dpi=72, batch_size=1))
    assert view["status"] == "done", view
    probe, *pages = stack.fake.requests()
    assert probe["max_tokens"] == 1 and image_urls(probe)[0].endswith("/probe.png")
    urls = [url for body in pages for url in image_urls(body)]
    assert len(urls) == len(SIZES)
    assert all(url.startswith((stack.shm / "ocrq").as_uri() + "/") for url in urls)
    result = view["result"]
    for page, (w, h) in zip(result["pages"], SIZES, strict=True):  # the fake decoded each file
        assert (page["width"], page["height"]) == (w, h) and f"{w}x{h}" in page["markdown"]
    stack.assert_clean()


def test_data_and_file_workers_read_the_same_page_alike(file_stack: Stack) -> None:
    stack = file_stack
    data_worker = stack.start_worker()
    by_data = stack.wait(stack.submit(png(320, 200)))
    data_worker.signal(signal.SIGTERM)
    assert data_worker.wait(30) == 0
    stack.start_worker(**FILE)
    by_file = stack.wait(stack.submit(png(320, 200)))
    assert by_data["status"] == by_file["status"] == "done"
    assert by_file["result"]["markdown"] == by_data["result"]["markdown"]
    first, *_, last = stack.fake.requests()
    assert image_urls(first)[0].startswith("data:image/png;base64,")
    assert image_urls(last)[0].startswith("file://")
    stack.assert_clean()


def test_a_job_cancelled_while_the_engine_reads_its_pages_leaves_no_page(
    file_stack: Stack,
) -> None:
    stack = file_stack
    stack.fake.configure(latency_s=3.0)
    stack.start_worker(**FILE)
    job_id = stack.submit(sized_pdf(SIZES), dpi=72, batch_size=2)
    engine_reading(stack)
    cancelled = httpx.post(f"{stack.api}/v1/jobs/{job_id}/cancel", timeout=10).json()
    assert cancelled["status"] == "cancelled"
    wait_until(lambda: not page_files(stack), 10, "the cancelled job's pages stayed")
    assert stack.wait(job_id)["status"] == "cancelled"
    stack.assert_clean()


def test_sigterm_drains_the_job_the_engine_reads_and_leaves_no_file(file_stack: Stack) -> None:
    stack = file_stack
    stack.fake.configure(latency_s=2.0)
    worker = stack.start_worker(**FILE)
    job_id = stack.submit(png(240, 120))
    engine_reading(stack)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    view = stack.wait(job_id, timeout_s=5)
    assert view["status"] == "done" and "240x120" in view["result"]["markdown"], view
    assert [p for p in stack.shm.rglob("*") if p.is_file()] == []  # its owner file too


def test_a_sigkilled_workers_pages_are_swept_by_the_next_worker(file_stack: Stack) -> None:
    stack = file_stack
    stack.fake.configure(latency_s=2.0)
    doomed = stack.start_worker(**FILE)
    job_id = stack.submit(png(222, 111))
    engine_reading(stack)
    doomed.signal(signal.SIGKILL)
    doomed.wait(10)
    orphans = page_files(stack)
    assert orphans, "a SIGKILL runs no cleanup: the page stays until a sweep"
    stack.fake.configure(latency_s=0.0)
    rescuer = stack.start_worker(**FILE)
    assert not any(p.exists() for p in orphans)  # swept before the rescuer reported healthy
    assert "swept_stale_folders" in rescuer.log()
    view = stack.wait(job_id, timeout_s=60)
    assert view["status"] == "done" and view["attempts"] == 2, view
    stack.assert_clean()


def failed_start(stack: Stack) -> WorkerProc:
    """Start a file-handoff worker that must refuse to start; the refused process."""
    with pytest.raises(RuntimeError, match="exited"):
        stack.start_worker(**FILE)
    worker = stack.workers[-1]
    try:
        worker.wait(10)
    except subprocess.TimeoutExpired:
        pytest.fail("the worker neither started nor exited")
    return worker


@pytest.mark.parametrize(
    ("allowed", "refusal"),
    [
        (None, "Cannot load local files without `--allowed-local-media-path`"),
        ("elsewhere", "must be a subpath of `--allowed-local-media-path`"),
    ],
    ids=["vllm-without-allowed-path", "vllm-allowing-another-folder"],
)
def test_the_worker_refuses_to_start_when_vllm_cannot_read_its_pages(
    stack: Stack, tmp_path: Path, allowed: str | None, refusal: str
) -> None:
    if allowed is not None:
        (tmp_path / allowed).mkdir()
        stack.fake.configure(allowed_local_media_path=str(tmp_path / allowed))
    worker = failed_start(stack)
    assert worker.proc.returncode == 2
    last_line = worker.log().strip().splitlines()[-1]
    assert last_line.startswith("ocrq worker: OCRQ_PAGE_HANDOFF=file, but vLLM at "), last_line
    assert refusal in last_line
    assert f"--allowed-local-media-path {stack.shm / 'ocrq'};" in last_line
    assert "Traceback" not in worker.log()
    assert [p for p in stack.shm.rglob("*") if p.is_file()] == []  # probe and folder removed
    assert len(stack.fake.requests()) == 1  # refused once, never retried
