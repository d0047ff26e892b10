"""`ocrq mcp`: a Model Context Protocol server (stdio, or streamable HTTP) for ocrq.

Every tool goes through the producer's HTTP API with ``ocrq.client``, never to Redis, so API
keys, tenancy and limits stay in one place. A failure is a tool error whose text starts with
the API's catalogue code (``unsupported_media_type: …``, ``not_found: …``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from ocrq.client import ApiError, AsyncClient, JobFailed, NotFound, Unavailable, WaitTimeout
from ocrq.mcp.http_auth import TOKEN_ENV, check_listen, serve_http, token_from_env
from ocrq.mcp.inputs import McpConfig, config_from_env, load_document, parse_pages, select_pages
from ocrq.shared.errors import OcrqError
from ocrq.shared.schemas import TERMINAL, JobView, Result, Status

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_HTTP_PORT = 8765  # not the producer's 8000
DEFAULT_TIMEOUT_S = 600.0
WAIT_HELP = "long-poll: answer as soon as the job changes, waiting at most this many seconds"
RESUBSCRIBE_S = 1.0  # pause before following a job again after its event stream broke off

INSTRUCTIONS = (
    "OCR for PDFs and scans (PNG, JPEG, WebP, TIFF, BMP) into Markdown. ocr_document waits and "
    "returns the text; submit_document, get_job and get_result do the same in steps for long "
    "documents. A finished job's Markdown is also the resource ocrq://jobs/{id}."
)

# Argument descriptions, shared by the tools that take them.
JobId = Annotated[str, Field(description="a job id, as submit_document returned it")]
LocalPath = Annotated[
    str | None,
    Field(description="a file on the MCP server's machine, under its allowed roots"),
]
Url = Annotated[
    str | None,
    Field(description="an http(s) URL to fetch (only when the server allows it)"),
]
Base64 = Annotated[
    str | None,
    Field(description="the document itself as base64 (a data: URI is fine)"),
]
Filename = Annotated[str | None, Field(description="a name for the document (a label only)")]
Dpi = Annotated[int | None, Field(description="rasterisation DPI, 50-400 (server: 150)")]
MaxPages = Annotated[int | None, Field(description="fail documents with more pages")]
TextLayer = Annotated[
    Literal["auto", "off"] | None,
    Field(description="use a PDF's own text where it is good (auto) or always OCR (off)"),
]
Languages = Annotated[
    str | None,
    Field(description="local engine only: Tesseract codes joined by +, from eng, fra, deu"),
]
Lane = Annotated[Literal["interactive", "batch"] | None, Field(description="queue lane")]
Redact = Annotated[
    list[str] | None,
    Field(
        description="personal data to mask in the answer: email, phone, iban, credit_card, "
        "national_id, date_of_birth"
    ),
]
Extract = Annotated[
    dict[str, Any] | None,
    Field(
        description="a JSON Schema (an object) of fields to read; then the answer is the "
        "fields as JSON (values, and for each its page, boxes, source text and confidence)"
    ),
]
Profile = Annotated[
    str | None,
    Field(description="vLLM engine only: unlimited-ocr or deepseek-ocr, as the server serves"),
]
Pages = Annotated[
    str | None,
    Field(description='only these pages, e.g. "1-3,5" or "4-" (default: every page)'),
]


def coded_errors(tool: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T | CallToolResult]]:
    """The tool, its API and input failures as tool errors: ``code: message``, code first.

    Returned rather than raised: the SDK prefixes a raised ToolError with its own words.
    """

    @functools.wraps(tool)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T | CallToolResult:
        try:
            return await tool(*args, **kwargs)
        except OcrqError as e:
            text = f"{e.code.value}: {e.message}"
            return CallToolResult(
                content=[TextContent(type="text", text=text)],
                structured_content={"code": e.code.value, "message": e.message},
                is_error=True,
            )

    return call


def job_json(view: JobView) -> dict[str, Any]:
    """A job's view without its result (get_result has it), as plain JSON values."""
    data: dict[str, Any] = msgspec.to_builtins(view)
    data.pop("result", None)
    return data


def render(result: Result, pages: str | None, fmt: str) -> str:
    """The result (cut to ``pages`` when given) as Markdown or JSON text."""
    ranges = parse_pages(pages)
    if ranges is not None:
        result = select_pages(result, ranges, pages or "")
    if fmt == "json":
        return msgspec.json.encode(result).decode()
    return result.markdown


class Tools:
    """The tools and the resource, each one call (or a few) of the producer's API."""

    def __init__(self, config: McpConfig) -> None:
        self.config = config

    def client(self) -> AsyncClient:
        """A client of the producer with the configured URL and key."""
        return AsyncClient(self.config.url, self.config.api_key)

    async def submit(
        self,
        client: AsyncClient,
        given: tuple[str | None, str | None, str | None],
        filename: str | None,
        **options: Any,
    ) -> str:
        """Upload the document given as (path, url, content_base64); the job id."""
        source, name = await load_document(self.config, *given)
        job = await client.submit(source, filename=filename or name, **options)
        return job.id

    @coded_errors
    async def ocr_document(
        self,
        ctx: Context[Any, Any],
        path: LocalPath = None,
        url: Url = None,
        content_base64: Base64 = None,
        filename: Filename = None,
        pages: Pages = None,
        dpi: Dpi = None,
        max_pages: MaxPages = None,
        text_layer: TextLayer = None,
        languages: Languages = None,
        lane: Lane = None,
        profile: Profile = None,
        extract: Extract = None,
        redact: Redact = None,
        timeout_s: Annotated[float, Field(description="seconds to wait", gt=0)] = DEFAULT_TIMEOUT_S,
    ) -> str:
        """OCR one document (path, url or content_base64), waiting; its Markdown (pages: a
        part), or with ``extract`` the fields the schema names, as JSON."""
        parse_pages(pages)  # a bad selection fails before anything is uploaded
        async with self.client() as client:
            job_id = await self.submit(
                client,
                (path, url, content_base64),
                filename,
                dpi=dpi,
                max_pages=max_pages,
                text_layer=text_layer,
                languages=languages,
                lane=lane,
                profile=profile,
                extract=extract,
                redact=redact,
            )
            view = await follow(client, job_id, ctx, timeout_s)
            if view.status != Status.DONE:
                raise JobFailed.of(view)
            result = view.result or await client.result(job_id)
        if extract is not None and result.fields is not None:
            return msgspec.json.encode(result.fields).decode()
        return render(result, pages, "markdown")

    @coded_errors
    async def submit_document(
        self,
        path: LocalPath = None,
        url: Url = None,
        content_base64: Base64 = None,
        filename: Filename = None,
        dpi: Dpi = None,
        max_pages: MaxPages = None,
        text_layer: TextLayer = None,
        languages: Languages = None,
        lane: Lane = None,
        profile: Profile = None,
    ) -> dict[str, Any]:
        """Queue one document (give path, url or content_base64); its job id, at once."""
        async with self.client() as client:
            job_id = await self.submit(
                client,
                (path, url, content_base64),
                filename,
                dpi=dpi,
                max_pages=max_pages,
                text_layer=text_layer,
                languages=languages,
                lane=lane,
                profile=profile,
            )
            return job_json(await client.status(job_id))

    @coded_errors
    async def get_job(
        self,
        job_id: JobId,
        wait_s: Annotated[int, Field(description=WAIT_HELP, ge=0, le=60)] = 0,
    ) -> dict[str, Any]:
        """A job's status, progress (pages done of total), timestamps and error."""
        async with self.client() as client:
            return job_json(await client.status(job_id, wait=wait_s))

    @coded_errors
    async def get_result(
        self, job_id: JobId, format: Literal["markdown", "json"] = "markdown", pages: Pages = None
    ) -> str:
        """A finished job's result: Markdown, or JSON with pages, blocks and boxes."""
        parse_pages(pages)
        async with self.client() as client:
            if format == "markdown" and pages is None:
                return await client.markdown(job_id)
            return render(await client.result(job_id), pages, format)

    @coded_errors
    async def cancel_job(self, job_id: JobId) -> dict[str, Any]:
        """Cancel a queued or processing job (it stays, as cancelled)."""
        async with self.client() as client:
            return {"id": job_id, "status": await client.cancel(job_id)}

    async def job_markdown(self, id: str) -> str:
        """A finished job's Markdown."""
        try:
            async with self.client() as client:
                return await client.markdown(id)
        except NotFound as e:
            raise ResourceNotFoundError(str(e)) from e
        except ApiError as e:
            raise ResourceError(str(e)) from e


async def follow(
    client: AsyncClient, job_id: str, ctx: Context[Any, Any], timeout_s: float
) -> JobView:
    """Wait for the job to end, reporting its pages as progress from its live events."""
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    async for event in client.events(job_id):
                        await report(ctx, event.data)
                except Unavailable:  # the producer restarting: follow the job again
                    await asyncio.sleep(RESUBSCRIBE_S)
                    continue
                view = await client.status(job_id)
                if view.status in TERMINAL:
                    return view
                await asyncio.sleep(RESUBSCRIBE_S)  # the stream broke off early: follow again
    except TimeoutError:
        view = await client.status(job_id)
        message = f"job {job_id} still {view.status} after {timeout_s:g} s; it goes on: "
        raise WaitTimeout(message + "get_job and get_result take its id", view) from None


async def report(ctx: Context[Any, Any], summary: dict[str, Any]) -> None:
    """One job event as a progress notification: pages done of total, and the status."""
    progress = summary.get("progress") or {}
    done, total = int(progress.get("pages_done", 0)), int(progress.get("pages_total", 0))
    status = str(summary.get("status", ""))
    message = f"{status}: {done}/{total} pages" if total else status
    await ctx.report_progress(done, total or None, message)


def build_server(config: McpConfig) -> MCPServer[Any]:
    """The MCP server with ocrq's tools and the job resource."""
    tools = Tools(config)
    server: MCPServer[Any] = MCPServer("ocrq", instructions=INSTRUCTIONS, log_level="WARNING")
    server.add_tool(tools.ocr_document, structured_output=False)
    server.add_tool(tools.submit_document)
    server.add_tool(tools.get_job)
    server.add_tool(tools.get_result, structured_output=False)
    server.add_tool(tools.cancel_job)
    server.resource(
        "ocrq://jobs/{id}",
        name="job_markdown",
        mime_type="text/markdown",
        description="a finished job's Markdown",
    )(tools.job_markdown)
    return server


def build_parser() -> argparse.ArgumentParser:
    """The options of `ocrq mcp`."""
    parser = argparse.ArgumentParser(
        prog="ocrq mcp",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Serve ocrq to MCP clients (stdio by default) through the producer's API.",
    )
    url = os.environ.get("OCRQ_URL") or McpConfig.url
    parser.add_argument("--url", default=url, help="the producer's URL (env OCRQ_URL)")
    # No default shown: --help must not print the key from the environment.
    parser.add_argument("--api-key", help="API key for the producer (env OCRQ_API_KEY)")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP, not stdio")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help=f"--http: address to listen on (off loopback: {TOKEN_ENV} required)",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT, help="--http: port")
    return parser


def main(argv: list[str]) -> int:
    """`ocrq mcp`: serve until stdin closes (stdio) or until interrupted (HTTP)."""
    args = build_parser().parse_args(argv)
    token = token_from_env()
    try:
        config = config_from_env()
        if args.http:
            check_listen(args.host, token)  # before anything is bound
    except ValueError as e:
        print(f"ocrq mcp: {e}", file=sys.stderr)
        return 2
    config = dataclasses.replace(config, url=args.url, api_key=args.api_key or config.api_key)
    server = build_server(config)
    if args.http:
        serve_http(server, args.host, args.port, token)
    else:
        server.run("stdio")
    return 0
