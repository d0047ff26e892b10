"""The whole pipeline: producer → Redis → worker → fake vLLM → result, and every failure path."""

from __future__ import annotations

import base64
import re
import signal
import subprocess
import time
from typing import Any

import httpx
import pymupdf
import pytest
from support.documents import (
    bomb_png,
    encrypted_pdf,
    multipage_tiff,
    png,
    sized_pdf,
    truncated_pdf,
    zero_page_pdf,
)
from support.stack import Stack, WorkerProc, jobs_done_by
from support.topology import sync_client

pytestmark = pytest.mark.slow

SIZES = [(200 + 10 * i, 300 + 5 * i) for i in range(12)]  # points = pixels at 72 dpi


def image_sizes(body: dict[str, Any]) -> list[tuple[int, int]]:
    """Pixel sizes of the images in a recorded chat-completions request."""
    sizes = []
    for part in body["messages"][0]["content"]:
        if part["type"] == "image_url":
            url = part["image_url"]["url"]
            assert url.startswith("data:image/png;base64,")
            pix = pymupdf.Pixmap(base64.b64decode(url.split(",", 1)[1]))
            sizes.append((pix.width, pix.height))
    return sizes


def without_images(body: dict[str, Any]) -> dict[str, Any]:
    """The request with image URLs blanked, for an exact comparison."""
    content = [
        {"type": "image_url", "image_url": {"url": "…"}} if p["type"] == "image_url" else p
        for p in body["messages"][0]["content"]
    ]
    return {**body, "messages": [{**body["messages"][0], "content": content}]}


def expected_request(prompt: str, images: int, window: int, max_tokens: int) -> dict[str, Any]:
    """The exact Unlimited-OCR request DESIGN.md prescribes."""
    content = [{"type": "text", "text": prompt}]
    content += [{"type": "image_url", "image_url": {"url": "…"}}] * images
    return {
        "model": "baidu/Unlimited-OCR",
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": max_tokens,
        "skip_special_tokens": False,
        "vllm_xargs": {"ngram_size": 35, "window_size": window},
    }


@pytest.mark.smoke
@pytest.mark.topology
def test_a_single_image_is_recognised(stack: Stack) -> None:
    stack.start_worker()
    view = stack.wait(stack.submit(png(320, 200)))
    assert view["status"] == "done", view
    result = view["result"]
    assert result["page_count"] == 1 and result["pages"][0]["width"] == 320
    assert "320x200" in result["markdown"] and "<|ref|>" not in result["markdown"]
    assert result["engine"] == {"name": "vllm", "model": "baidu/Unlimited-OCR",
                                "profile": "unlimited-ocr"}  # fmt: skip
    assert view["progress"] == {"pages_done": 1, "pages_total": 1}
    stack.assert_clean()


def test_12_page_pdf_at_batch_size_1_sends_one_exact_request_per_page(stack: Stack) -> None:
    stack.start_worker()
    view = stack.wait(stack.submit(sized_pdf(SIZES), dpi=72, batch_size=1))
    assert view["status"] == "done", view
    bodies = stack.fake.requests()
    assert len(bodies) == 12
    for body in bodies:
        assert without_images(body) == expected_request("<image>document parsing.", 1, 128, 8192)
    assert sorted(s for b in bodies for s in image_sizes(b)) == sorted(SIZES)
    pages = view["result"]["pages"]
    assert [p["number"] for p in pages] == list(range(1, 13))
    for page, (w, h) in zip(pages, SIZES, strict=True):
        assert (page["width"], page["height"]) == (w, h) and f"{w}x{h}" in page["markdown"]
    named = [m.group(0) for m in re.finditer(r"\d+x\d+", view["result"]["markdown"])]
    assert list(dict.fromkeys(named)) == [f"{w}x{h}" for w, h in SIZES]  # in page order
    assert view["result"]["segments"] == []
    stack.assert_clean()


@pytest.mark.topology
def test_12_page_pdf_at_batch_size_4_sends_three_multi_page_requests(stack: Stack) -> None:
    stack.start_worker()
    view = stack.wait(stack.submit(sized_pdf(SIZES), dpi=72, batch_size=4))
    assert view["status"] == "done", view
    bodies = stack.fake.requests()
    assert len(bodies) == 3
    for body in bodies:
        assert without_images(body) == expected_request(
            "<image>Multi page parsing.", 4, 1024, 16384
        )
    batches = sorted(image_sizes(b) for b in bodies)
    assert batches == [SIZES[0:4], SIZES[4:8], SIZES[8:12]]
    result = view["result"]
    spans = [(s["first_page"], s["last_page"]) for s in result["segments"]]
    assert spans == [(1, 4), (5, 8), (9, 12)]
    assert all(p.get("markdown") is None for p in result["pages"])  # never copied per page
    for seg, sizes in zip(result["segments"], batches, strict=True):
        assert all(f"{w}x{h}" in seg["markdown"] for w, h in sizes)
    stack.assert_clean()


@pytest.mark.parametrize(
    ("document", "code"),
    [
        (encrypted_pdf(), "encrypted_document"),
        (truncated_pdf(), "corrupt_document"),
        (zero_page_pdf(), "corrupt_document"),
        (bomb_png(), "image_too_large"),
    ],
    ids=["encrypted", "truncated", "zero-page", "image-bomb"],
)
def test_bad_documents_fail_with_their_code_and_never_reach_the_engine(
    stack: Stack, document: bytes, code: str
) -> None:
    stack.start_worker()
    view = stack.wait(stack.submit(document))
    assert view["status"] == "failed" and view["error"]["code"] == code, view
    assert stack.fake.requests() == []
    stack.assert_clean()


def test_a_pdf_over_max_pages_fails_before_rendering(stack: Stack) -> None:
    stack.start_worker()
    view = stack.wait(stack.submit(sized_pdf(SIZES), max_pages=5))
    assert view["error"]["code"] == "too_many_pages" and "12" in view["error"]["message"]
    assert stack.fake.requests() == []
    stack.assert_clean()


@pytest.mark.topology
def test_an_idempotency_key_makes_one_job_however_often_it_is_sent(stack: Stack) -> None:
    stack.start_worker()
    body = {"document": base64.b64encode(png(240, 120)).decode()}
    headers = {"Idempotency-Key": "scan-2026-12-01"}
    answers = [httpx.post(f"{stack.api}/v1/jobs", json=body, headers=headers) for _ in range(3)]
    assert [a.status_code for a in answers] == [202, 200, 200]
    assert len({a.json()["id"] for a in answers}) == 1
    assert stack.wait(answers[0].json()["id"])["status"] == "done"
    assert len(stack.fake.requests()) == 1  # recognised once
    stack.assert_clean()


@pytest.mark.smoke
@pytest.mark.topology
def test_a_job_cancelled_while_queued_is_skipped(stack: Stack) -> None:
    job_id = stack.submit(png(100, 100))
    assert httpx.post(f"{stack.api}/v1/jobs/{job_id}/cancel").json()["status"] == "cancelled"
    worker = stack.start_worker()
    later = stack.wait(stack.submit(png(120, 100)))  # processed after the skipped one
    assert later["status"] == "done"
    assert stack.wait(job_id)["status"] == "cancelled"
    assert len(stack.fake.requests()) == 1
    worker.wait_for_log('"reason": "skip:cancelled"')
    stack.assert_clean()


@pytest.mark.topology
def test_a_job_cancelled_while_processing_stops(stack: Stack) -> None:
    stack.fake.configure(latency_s=3.0)
    stack.start_worker()
    job_id = stack.submit(sized_pdf(SIZES[:4]), dpi=72)
    stack.wait_for_status(job_id, "processing")
    assert httpx.post(f"{stack.api}/v1/jobs/{job_id}/cancel").json()["status"] == "cancelled"
    time.sleep(2.0)  # the worker notices within its heartbeat and lets go
    assert stack.wait(job_id)["status"] == "cancelled"
    stack.assert_clean()


def test_an_engine_outage_that_recovers_is_retried_to_success(stack: Stack) -> None:
    stack.fake.configure(fail_next=2)
    stack.start_worker()
    view = stack.wait(stack.submit(png(300, 200)))
    assert view["status"] == "done", view
    assert stack.fake.config()["fail_next"] == 0  # both injected failures were consumed
    stack.assert_clean()


def test_an_engine_outage_that_lasts_fails_with_engine_unavailable(stack: Stack) -> None:
    stack.fake.configure(fail_next=1000)
    stack.start_worker(engine_retries=2)
    view = stack.wait(stack.submit(png(300, 200)))
    assert view["status"] == "failed" and view["error"]["code"] == "engine_unavailable", view
    stack.assert_clean()


@pytest.mark.smoke
@pytest.mark.topology
def test_a_worker_killed_mid_job_is_replaced_and_the_job_finishes_once(stack: Stack) -> None:
    stack.fake.configure(latency_s=2.0)
    doomed = stack.start_worker()
    job_id = stack.submit(png(222, 111))
    stack.wait_for_status(job_id, "processing")
    doomed.signal(signal.SIGKILL)
    doomed.wait(10)
    rescuer = stack.start_worker()
    view = stack.wait(job_id, timeout_s=60)
    assert view["status"] == "done" and view["attempts"] == 2, view
    log = rescuer.wait_for_log('"outcome": "done"')
    assert log.count('"outcome": "done"') == 1 and "reclaimed" in log
    stack.assert_clean()


def test_a_multipage_tiff_is_recognised_page_by_page(stack: Stack) -> None:
    stack.start_worker()
    view = stack.wait(stack.submit(multipage_tiff([(320, 200), (200, 320), (250, 250)])))
    assert view["status"] == "done", view
    pages = view["result"]["pages"]
    assert [(p["number"], p["width"], p["height"]) for p in pages] == [
        (1, 320, 200), (2, 200, 320), (3, 250, 250)
    ]  # fmt: skip
    assert "200x320" in view["result"]["markdown"]
    stack.assert_clean()


@pytest.mark.topology
def test_a_job_that_keeps_killing_workers_is_poisoned_and_sent_to_dead(stack: Stack) -> None:
    stack.fake.configure(latency_s=3.0)
    doomed = stack.start_worker(max_deliveries=1)
    job_id = stack.submit(png(230, 110))
    stack.wait_for_status(job_id, "processing")
    doomed.signal(signal.SIGKILL)
    doomed.wait(10)
    stack.start_worker(max_deliveries=1)
    view = stack.wait(job_id, timeout_s=60)
    assert view["status"] == "failed" and view["error"]["code"] == "poisoned", view
    r = sync_client(stack.settings)
    keys = stack.keys
    dead = [fields for tag in keys.tags for _, fields in r.xrange(keys.dead(tag))]
    r.close()
    assert [d[b"id"].decode() for d in dead] == [job_id] and dead[0][b"deliveries"] == b"2"
    stack.assert_clean()


def test_engine_requests_stay_under_the_global_concurrency_limit(stack: Stack) -> None:
    # Each engine call outlasts rendering the next pages even on a loaded box, so the
    # worker has pages waiting for every slot: the peak shows the limit, not the renderer.
    stack.fake.configure(latency_s=1.0)
    stack.start_worker(engine_concurrency=3)
    jobs = [stack.submit(sized_pdf(SIZES[:2]), dpi=72) for _ in range(3)]
    assert all(stack.wait(j)["status"] == "done" for j in jobs)
    assert stack.fake.stats()["peak_running"] == 3  # full, and never over
    stack.assert_clean()


def test_two_workers_share_a_burst_rather_than_the_first_taking_it_all(stack: Stack) -> None:
    stack.fake.configure(latency_s=0.5, max_concurrency=4)
    jobs = [stack.submit(png(120 + i, 80)) for i in range(20)]  # queued before any worker
    # Two slots each: a worker holds at most two engine-fulls (4 one-page jobs) at a time,
    # where a first window used to take OCRQ_MAX_JOBS (16) of the 20 at once.
    workers = stack.start_workers(2, engine_concurrency=2)
    assert all(stack.wait(j)["status"] == "done" for j in jobs)
    shares = jobs_done_by(workers, total=20)
    print(f"burst shares: {shares}")
    assert sum(shares) == 20 and min(shares) >= 5, shares
    stack.assert_clean()


@pytest.mark.topology
def test_sigterm_drains_in_flight_jobs_and_exits_0(stack: Stack) -> None:
    stack.fake.configure(latency_s=2.0)
    worker = stack.start_worker()
    job_id = stack.submit(png(240, 120))
    stack.wait_for_status(job_id, "processing")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert stack.wait(job_id, timeout_s=5)["status"] == "done"
    queued = stack.submit(png(250, 120))  # nobody reads it now: it stays queued, not lost
    time.sleep(1.0)
    assert httpx.get(f"{stack.api}/v1/jobs/{queued}").json()["status"] == "queued"
    stack.assert_clean()


def test_a_job_still_running_when_the_drain_grace_ends_is_handed_back_at_once(
    stack: Stack,
) -> None:
    stack.fake.configure(latency_s=4.0)
    slow_visibility = {"visibility_timeout_ms": 60_000}  # only the hand-back can be quick
    leaving = stack.start_worker(drain_grace_s=0.5, **slow_visibility)
    job_id = stack.submit(png(260, 130))
    stack.wait_for_status(job_id, "processing")
    leaving.signal(signal.SIGTERM)
    assert exit_code(leaving, 15) == 0, leaving.log()
    assert httpx.get(f"{stack.api}/v1/jobs/{job_id}").json()["status"] == "queued"
    started = time.monotonic()
    stack.start_worker(**slow_visibility)
    view = stack.wait(job_id, timeout_s=30)
    assert view["status"] == "done" and view["attempts"] == 2, view
    assert time.monotonic() - started < 30  # far below the 60 s visibility timeout
    stack.assert_clean()


def test_worker_metrics_count_jobs_pages_and_stages(stack: Stack) -> None:
    worker = stack.start_worker()
    stack.wait(stack.submit(sized_pdf(SIZES[:3]), dpi=72))
    deadline, text = time.monotonic() + 10, ""
    while 'ocrq_jobs_total{outcome="done"} 1.0' not in text and time.monotonic() < deadline:
        text = httpx.get(worker.metrics_url).text  # counted just after the result is written
        time.sleep(0.05)
    assert 'ocrq_jobs_total{outcome="done"} 1.0' in text
    assert "ocrq_pages_total 3.0" in text
    assert 'ocrq_stage_seconds_count{stage="inference"} 3.0' in text
    assert "ocrq_window_fill_count 1.0" in text


def exit_code(worker: WorkerProc, timeout_s: float) -> int | None:
    """The worker's exit code, or None if it is still running after timeout_s."""
    try:
        return worker.wait(timeout_s)
    except subprocess.TimeoutExpired:
        return None
