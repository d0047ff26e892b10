"""The command line and the subprocess runner of the fake vLLM."""

from __future__ import annotations

import httpx
import pytest
from support.fakevllm_requests import chat_body

from ocrq.fakevllm.config import FakeConfig
from ocrq.fakevllm.runner import FakeVllm
from ocrq.fakevllm.server import parse_args
from ocrq.shared.errors import ErrorCode, OcrqError


def test_flags_and_their_short_aliases_set_the_config() -> None:
    argv = ["--port", "9123", "--model", "m/x", "--protocol", "deepseek-ocr", "--latency", "0.25"]
    argv += [
        "--max-concurrency",
        "4",
        "--fail-rate",
        "0.1",
        "--slow-start",
        "2",
        "--fail-next",
        "3",
    ]
    host, port, config = parse_args(argv)
    assert (host, port) == ("127.0.0.1", 9123)
    assert config == FakeConfig(
        model="m/x",
        protocol="deepseek-ocr",
        latency_s=0.25,
        max_concurrency=4,
        fail_rate=0.1,
        slow_start_s=2.0,
        fail_next=3,
    )


@pytest.mark.parametrize(
    "argv", [["--protocol", "generic"], ["--fail-rate", "1.5"], ["--max-concurrency", "0"]]
)
def test_invalid_flag_values_exit_with_usage_error(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2


def test_runner_rejects_unknown_config_fields() -> None:
    with pytest.raises(TypeError, match="no_such_field"):
        FakeVllm(no_such_field=1)


def test_runner_reports_a_server_that_cannot_start() -> None:
    with pytest.raises(OcrqError) as raised, FakeVllm(fail_rate=3.0):
        pass
    assert raised.value.code is ErrorCode.INTERNAL
    assert "fail_rate" in raised.value.message  # the server's own complaint, from its log


def test_runner_serves_its_config_and_stops_the_process_cleanly() -> None:
    with FakeVllm(model="custom/ocr", max_model_len=4096) as fake:
        process = fake.process
        assert fake.url.startswith("http://127.0.0.1:")
        models = httpx.get(f"{fake.url}/v1/models", timeout=10).json()
        assert models["data"][0]["id"] == "custom/ocr"
        response = httpx.post(
            f"{fake.url}/v1/chat/completions",
            json=chat_body(model="custom/ocr", max_tokens=4000),
            timeout=10,
        )
        assert "maximum context length is 4096" in response.json()["error"]["message"]
    assert process is not None
    assert process.returncode == 0  # SIGTERM is a clean stop


async def test_runner_works_as_an_async_context_manager() -> None:
    async with FakeVllm() as fake, httpx.AsyncClient(base_url=fake.url, timeout=10) as client:
        response = await client.post("/v1/chat/completions", json=chat_body())
        assert response.status_code == 200
        assert len(fake.requests()) == 1
