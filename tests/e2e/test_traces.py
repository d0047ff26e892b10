"""OpenTelemetry: one trace follows a job from the producer's request through a worker,
received over OTLP/HTTP by a real receiver from real producer and worker processes."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.documents import sized_pdf
from support.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from support.stack import running_stack

from ocrq.shared.settings import Settings

SECRET = "whsec_" + base64.b64encode(b"trace-test-key-0123456789abcd").decode()
HOOKS = {"webhook_secrets": f"public:{SECRET}", "webhook_allow_private": "true"}
EXPECTED = {"POST /v1/jobs", "ocrq.enqueue", "ocrq.job", "ocrq.page.render",
            "ocrq.engine.call", "ocrq.webhook.deliver"}  # fmt: skip


class Hook(BaseHTTPRequestHandler):
    """A webhook receiver that keeps each delivery's headers."""

    headers_seen: list[dict[str, str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        type(self).headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook_url() -> Iterator[str]:
    Hook.headers_seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """A receiver, and the standard variables that point every process started to it."""
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # ms: spans leave at once
        monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
        monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
        yield receiver


def spans_of_trace(otlp: OtlpReceiver, job_id: str, timeout_s: float = 20) -> list[ReceivedSpan]:
    """Every span of the job's trace once all the expected names have arrived."""
    deadline = time.monotonic() + timeout_s
    while True:
        spans = otlp.spans()
        jobs = [s for s in spans if s.attributes.get("ocrq.job_id") == job_id]
        if jobs:
            ours = [s for s in spans if s.trace_id == jobs[0].trace_id]
            if EXPECTED <= {s.name for s in ours}:
                return ours
        assert time.monotonic() < deadline, sorted({s.name for s in spans})
        time.sleep(0.1)


def one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    (found,) = [s for s in spans if s.name == name]
    return found


def test_one_trace_spans_the_request_the_enqueue_and_the_workers_job_pages_engine_and_webhook(
    settings: Settings, tmp_path: Path, otlp: OtlpReceiver, hook_url: str
) -> None:
    with running_stack(settings, tmp_path, **HOOKS) as stack:
        stack.start_worker(**HOOKS)
        job_id = stack.submit(sized_pdf([(300, 200), (200, 300)]), callback_url=hook_url)
        assert stack.wait(job_id)["status"] == "done"
        spans = spans_of_trace(otlp, job_id)
    request, enqueue = one(spans, "POST /v1/jobs"), one(spans, "ocrq.enqueue")
    job, webhook = one(spans, "ocrq.job"), one(spans, "ocrq.webhook.deliver")
    assert request.parent_id == "" and request.service == "ocrq-producer"
    assert request.attributes["http.response.status_code"] == 202
    assert enqueue.parent_id == request.span_id and enqueue.service == "ocrq-producer"
    assert job.parent_id == enqueue.span_id and job.service == "ocrq-worker"
    assert job.attributes["ocrq.outcome"] == "done"
    renders = [s for s in spans if s.name == "ocrq.page.render"]
    assert sorted(s.attributes["ocrq.page"] for s in renders) == [1, 2]
    engine_calls = [s for s in spans if s.name == "ocrq.engine.call"]
    assert {s.parent_id for s in renders + engine_calls} == {job.span_id}
    assert sorted(p for s in engine_calls for p in s.attributes["ocrq.pages"]) == [1, 2]
    # The delivery may be made later by any worker: it hangs off the enqueue, beside the job.
    assert webhook.parent_id == enqueue.span_id and webhook.service == "ocrq-worker"
    (delivered,) = Hook.headers_seen
    assert delivered["traceparent"].split("-")[1:3] == [webhook.trace_id, webhook.span_id]


def test_a_callers_traceparent_makes_the_request_span_its_child(
    settings: Settings, tmp_path: Path, otlp: OtlpReceiver
) -> None:
    trace_id, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with running_stack(settings, tmp_path) as stack:
        r = httpx.get(f"{stack.api}/v1/jobs", headers={"traceparent": f"00-{trace_id}-{caller}-01"})
        assert r.status_code == 200
        deadline = time.monotonic() + 10
        while not [s for s in otlp.spans() if s.trace_id == trace_id]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    (listed,) = [s for s in otlp.spans() if s.trace_id == trace_id]
    assert listed.name == "GET /v1/jobs" and listed.parent_id == caller
