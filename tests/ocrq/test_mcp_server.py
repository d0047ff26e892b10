"""`ocrq mcp` as a real subprocess, driven by the MCP SDK's own client over the real protocol."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import pytest
from mcp import Client as McpClient
from mcp.types import TextResourceContents
from support.documents import png, sized_pdf
from support.invoices import invoice_pdf
from support.mcp_harness import http_mcp, listening, mcp_session, text_of
from support.personal import form_pdf
from support.stack import Stack

from ocrq.client import Client
from ocrq.mcp.inputs import InputError, decode_base64, parse_pages, select_pages
from ocrq.shared.schemas import Page, Result, Segment

MakeProducer = Callable[..., str]

PAGES = [(200, 300), (220, 310)]  # the fake vLLM reads a page as its pixel size: "200x300"
TOOLS = {"ocr_document", "submit_document", "get_job", "get_result", "cancel_job"}


def two_page_pdf(tmp_path: Path) -> Path:
    """A 2-page PDF on disk."""
    path = tmp_path / "two.pdf"
    path.write_bytes(sized_pdf(PAGES))
    return path


async def test_the_server_lists_its_tools_and_the_job_resource(
    api_url: str, tmp_path: Path
) -> None:
    async with mcp_session(api_url, tmp_path) as mcp:
        tools = (await mcp.list_tools()).tools
        templates = (await mcp.list_resource_templates()).resource_templates
    assert {tool.name for tool in tools} == TOOLS
    ocr = next(tool for tool in tools if tool.name == "ocr_document")
    assert {"path", "url", "content_base64", "pages", "dpi", "lane"} <= set(
        ocr.input_schema["properties"]
    )
    assert [t.uri_template for t in templates] == ["ocrq://jobs/{id}"]


async def test_ocr_document_reports_page_progress_and_returns_every_page(
    stack: Stack, tmp_path: Path
) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with mcp_session(stack.api, tmp_path) as mcp:
        arguments = {"path": str(two_page_pdf(tmp_path)), "dpi": 72}
        result = await mcp.call_tool("ocr_document", arguments, progress_callback=on_progress)
    assert not result.is_error, text_of(result)
    assert "200x300" in text_of(result) and "220x310" in text_of(result)
    assert progress and progress[-1][:2] == (2, 2), progress


async def test_ocr_document_with_a_schema_answers_the_fields_and_where_they_were_printed(
    stack: Stack, tmp_path: Path
) -> None:
    document = base64.b64encode(invoice_pdf()).decode()
    schema = {"type": "object", "properties": {"total": {"type": "number"}}}
    async with mcp_session(stack.api, tmp_path) as mcp:
        arguments = {"content_base64": document, "text_layer": "auto", "extract": schema}
        result = await mcp.call_tool("ocr_document", arguments)
    assert not result.is_error, text_of(result)
    fields = msgspec.json.decode(text_of(result))
    assert fields["values"] == {"total": 120.0}
    [total] = fields["sources"]
    assert total["grounded"] and total["page"] == 1 and total["text"] == "120.00"


async def test_ocr_document_with_redact_answers_the_markdown_masked(
    stack: Stack, tmp_path: Path
) -> None:
    document = base64.b64encode(form_pdf()).decode()
    async with mcp_session(stack.api, tmp_path) as mcp:
        arguments = {"content_base64": document, "text_layer": "auto", "redact": ["email"]}
        result = await mcp.call_tool("ocr_document", arguments)
    assert not result.is_error, text_of(result)
    assert "[EMAIL]" in text_of(result) and "jane.roe@example.org" not in text_of(result)


async def test_pages_returns_only_the_pages_asked_for(stack: Stack, tmp_path: Path) -> None:
    document = base64.b64encode(sized_pdf(PAGES)).decode()
    async with mcp_session(stack.api, tmp_path) as mcp:
        result = await mcp.call_tool(
            "ocr_document", {"content_base64": document, "dpi": 72, "pages": "2"}
        )
    assert not result.is_error, text_of(result)
    assert "220x310" in text_of(result) and "200x300" not in text_of(result)


async def test_a_text_file_is_a_tool_error_with_the_api_code(api_url: str, tmp_path: Path) -> None:
    text = base64.b64encode(b"just some words, not a document").decode()
    async with mcp_session(api_url, tmp_path) as mcp:
        result = await mcp.call_tool("ocr_document", {"content_base64": text})
    assert result.is_error and text_of(result).startswith("unsupported_media_type: ")


async def test_another_tenants_job_is_not_found(
    make_producer: MakeProducer, tmp_path: Path
) -> None:
    url = make_producer(api_keys="alpha:key-alpha,beta:key-beta")
    with Client(url, "key-alpha") as alpha:
        job = alpha.submit(png(20, 20))
    async with mcp_session(url, tmp_path, OCRQ_API_KEY="key-beta") as beta:
        hidden = await beta.call_tool("get_job", {"job_id": job.id})
    async with mcp_session(url, tmp_path, OCRQ_API_KEY="key-alpha") as owner:
        seen = await owner.call_tool("get_job", {"job_id": job.id})
    assert hidden.is_error and text_of(hidden).startswith("not_found: ")
    assert not seen.is_error and seen.structured_content["status"] == "queued"


async def test_the_job_resource_is_a_finished_jobs_markdown(stack: Stack, tmp_path: Path) -> None:
    with Client(stack.api) as client:
        job = client.submit(two_page_pdf(tmp_path), dpi=72)
        client.wait(job, timeout=60, raise_on_failure=True)
        markdown = client.markdown(job)
    async with mcp_session(stack.api, tmp_path) as mcp:
        read = await mcp.read_resource(f"ocrq://jobs/{job.id}")
        as_json = await mcp.call_tool("get_result", {"job_id": job.id, "format": "json"})
    content = read.contents[0]
    assert isinstance(content, TextResourceContents) and content.mime_type == "text/markdown"
    assert content.text == markdown and "220x310" in markdown
    assert msgspec.json.decode(text_of(as_json), type=Result).page_count == 2


async def test_ocr_document_gives_up_after_its_timeout_and_names_the_job(
    api_url: str, tmp_path: Path
) -> None:
    async with mcp_session(api_url, tmp_path) as mcp:  # no worker: the job stays queued
        arguments = {"content_base64": base64.b64encode(png(20, 20)).decode(), "timeout_s": 1}
        result = await mcp.call_tool("ocr_document", arguments)
    assert result.is_error and text_of(result).startswith("timeout: job ")
    job_id = text_of(result).split()[2]
    with Client(api_url) as client:
        assert client.status(job_id).status == "queued"  # it goes on


async def test_jobs_are_submitted_followed_and_cancelled_in_steps(
    api_url: str, tmp_path: Path
) -> None:
    async with mcp_session(api_url, tmp_path) as mcp:  # no worker: the job stays queued
        submitted = await mcp.call_tool("submit_document", {"path": str(two_page_pdf(tmp_path))})
        job_id = submitted.structured_content["id"]
        early = await mcp.call_tool("get_result", {"job_id": job_id})
        cancelled = await mcp.call_tool("cancel_job", {"job_id": job_id})
        view = await mcp.call_tool("get_job", {"job_id": job_id})
    assert submitted.structured_content["filename"] == "two.pdf"
    assert early.is_error and text_of(early).startswith("conflict: ")
    assert cancelled.structured_content == {"id": job_id, "status": "cancelled"}
    assert view.structured_content["error"]["code"] == "cancelled"


@contextmanager
def serving(body: bytes) -> Iterator[str]:
    """A local HTTP server answering every GET with ``body``; its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/scans/page.png"
    finally:
        server.shutdown()
        server.server_close()


async def test_urls_are_fetched_only_when_allowed(api_url: str, tmp_path: Path) -> None:
    with serving(png(30, 20)) as url:
        async with mcp_session(api_url, tmp_path) as mcp:
            refused = await mcp.call_tool("submit_document", {"url": url})
        allow = {"OCRQ_MCP_ALLOW_URLS": "true", "OCRQ_MCP_ALLOW_PRIVATE_URLS": "true"}
        async with mcp_session(api_url, tmp_path, **allow) as mcp:  # the server is on loopback
            fetched = await mcp.call_tool("submit_document", {"url": url})
    assert refused.is_error and "OCRQ_MCP_ALLOW_URLS" in text_of(refused)
    assert text_of(refused).startswith("invalid_request: ")
    assert not fetched.is_error, text_of(fetched)
    assert fetched.structured_content["filename"] == "page.png"
    assert fetched.structured_content["media_type"] == "image/png"


@pytest.fixture
def http_server(api_url: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`ocrq mcp --http` on a free port: its endpoint URL and process."""
    with http_mcp(api_url) as server:
        yield server


async def test_streamable_http_serves_the_same_tools(
    http_server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = http_server
    await listening(url, proc)
    async with McpClient(url) as mcp:
        tools = {tool.name for tool in (await mcp.list_tools()).tools}
        missing = await mcp.call_tool("get_job", {"job_id": "no-such-job"})
    assert tools == TOOLS
    assert missing.is_error and text_of(missing).startswith("not_found: ")


def test_without_the_sdk_ocrq_mcp_says_how_to_install_it() -> None:
    hide_sdk = (
        "import sys; sys.modules['mcp'] = None\n"  # as if the extra were not installed
        "from ocrq.cli.main import main; sys.exit(main(['mcp']))"
    )
    run = subprocess.run(
        [sys.executable, "-c", hide_sdk], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip() == "ocrq mcp needs the mcp extra: pip install 'ocrq[mcp]'"


def test_the_help_lists_the_options_but_never_the_api_key() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "ocrq.cli", "mcp", "--help"], capture_output=True, text=True,
        timeout=60, env={**os.environ, "OCRQ_API_KEY": "key-from-env", "OCRQ_URL": "http://h:1"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert all(flag in run.stdout for flag in ("--url", "--api-key", "--http", "--port"))
    assert "http://h:1" in run.stdout and "key-from-env" not in run.stdout


def test_page_selections_parse_ranges_and_refuse_nonsense() -> None:
    assert parse_pages(None) is None and parse_pages(" ") is None
    assert parse_pages("1-3, 5,8-") == [(1, 3), (5, 5), (8, None)]
    for bad in ("0", "3-1", "a", "1-x", "1,,2"):
        with pytest.raises(InputError, match=r"^invalid_request: pages"):
            parse_pages(bad)


def test_a_segment_comes_once_whole_when_any_of_its_pages_is_selected() -> None:
    pages = [Page(number=n, width=10, height=10) for n in (1, 2, 3)]
    pages[2] = Page(number=3, width=10, height=10, markdown="third")
    segment = Segment(first_page=1, last_page=2, markdown="one and two")
    result = Result(
        id="j", status="done", media_type="application/pdf", page_count=3,
        markdown="one and two\n\nthird\n", pages=pages, segments=[segment],
    )  # fmt: skip
    cut = select_pages(result, [(2, None)], "2-")
    assert cut.markdown == "one and two\n\nthird\n" and [p.number for p in cut.pages] == [2, 3]
    assert select_pages(result, [(3, 3)], "3").segments == []
    with pytest.raises(InputError, match="has 3 pages"):
        select_pages(result, [(7, 7)], "7")


def test_base64_is_read_as_the_api_reads_it() -> None:
    data = bytes(range(256))
    standard, urlsafe = base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode()
    assert decode_base64(f"data:application/pdf;base64,{standard[:50]}\n{standard[50:]}") == data
    assert decode_base64(urlsafe.rstrip("=")) == data
    with pytest.raises(InputError, match=r"^invalid_base64: "):
        decode_base64("not*base64")
