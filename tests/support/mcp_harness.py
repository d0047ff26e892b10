"""Driving `ocrq mcp` as a real subprocess with the MCP SDK's own client (stdio and HTTP)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx
from mcp import Client as McpClient
from mcp import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from ocrq.shared.embedded import free_port

from .processes import processes_with, start_ocrq, stop

MARK = "OCRQ_TEST_MCP_SERVER"  # in each server's environment, to find it after the session


@asynccontextmanager
async def mcp_session(
    url: str, tmp_path: Path, cwd: Path | None = None, **env: str
) -> AsyncIterator[McpClient]:
    """A session with `python -m ocrq.cli mcp` (stdio); the process has ended on exit.

    Paths are readable under ``tmp_path`` unless ``env`` says otherwise (OCRQ_MCP_ROOTS).
    """
    mark = os.urandom(6).hex()
    settings = {
        "OCRQ_URL": url,
        "OCRQ_API_KEY": "",
        "OCRQ_MCP_ROOTS": str(tmp_path),
        MARK: mark,
        **env,
    }
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ocrq.cli", "mcp"],
        env={**os.environ, **settings},
        cwd=cwd,
    )
    with (tmp_path / f"mcp-{mark}.log").open("w") as errlog:
        async with McpClient(stdio_client(params, errlog=errlog)) as client:
            yield client
    assert processes_with(mark, MARK) == []


def text_of(result: CallToolResult) -> str:
    """The text of a tool result's first content block."""
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def listening(url: str, proc: subprocess.Popen[bytes]) -> None:
    """Return once the server answers HTTP (it starts in about a second)."""
    async with httpx.AsyncClient() as http:
        for _ in range(150):
            assert proc.poll() is None, f"ocrq mcp --http exited with {proc.returncode}"
            try:
                await http.get(url, timeout=1)
                return
            except httpx.TransportError:
                await asyncio.sleep(0.1)
    raise TimeoutError(f"{url} did not answer")


@contextmanager
def http_mcp(api_url: str, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`ocrq mcp --http` on a free loopback port (env: OCRQ_* without the prefix): its
    endpoint URL and process, stopped on exit. Wait for it with ``listening``."""
    port = free_port()
    proc = start_ocrq("mcp", ["--http", "--port", str(port), "--url", api_url], env)
    try:
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        stop(proc)
