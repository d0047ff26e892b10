"""Traces are off unless OTEL_* names an OTLP endpoint, and off they cost nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ocrq.shared.tracing import current_traceparent, span, tracing_active, tracing_on

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        (ENDPOINT, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, False),  # no endpoint named: nowhere to send
    ],
)
def test_tracing_is_on_only_when_the_standard_variables_name_an_endpoint(
    env: dict[str, str], on: bool
) -> None:
    assert tracing_on(env) is on


def test_off_a_span_is_nothing_and_no_context_travels() -> None:
    assert not tracing_active()
    with span("ocrq.job", {"ocrq.job_id": "j"}) as s:
        assert s is None and current_traceparent() == ""


def test_off_neither_the_sdk_nor_the_exporter_is_loaded() -> None:
    code = (
        "import sys, ocrq.producer.app, ocrq.consumer.main\n"
        "from ocrq.shared.tracing import configure_tracing\n"
        "assert configure_tracing('x', {}) is False\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk.trace',"
        " 'opentelemetry.exporter'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
