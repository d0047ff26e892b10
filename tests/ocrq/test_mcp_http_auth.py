"""`ocrq mcp --http`: a bearer token (OCRQ_MCP_TOKEN) guards it, and is required off loopback.

Whoever reaches the HTTP endpoint acts with the server's API key and reads its files, so an
endpoint on a network interface must not be open to everyone on that network.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support.mcp_harness import http_mcp, listening, text_of

from ocrq.shared.embedded import free_port

TOKEN = "t0ken-" + "x" * 32
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}  # fmt: skip
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


def mcp_command(*args: str) -> list[str]:
    """`python -m ocrq.cli mcp --http …`."""
    return [sys.executable, "-m", "ocrq.cli", "mcp", "--http", *args]


def env_with(**settings: str) -> dict[str, str]:
    """This process's environment without any MCP token, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if k != "OCRQ_MCP_TOKEN"}
    return {**env, **settings}


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_binding_off_loopback_without_a_token_refuses_to_start(host: str) -> None:
    run = subprocess.run(
        mcp_command("--host", host, "--port", str(free_port())), capture_output=True,
        text=True, timeout=30, env=env_with(OCRQ_MCP_TOKEN=""), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip() == (
        f"ocrq mcp: --host {host} is not a loopback address: set OCRQ_MCP_TOKEN, a bearer token "
        "every client must send (Authorization: Bearer …), or listen on 127.0.0.1"
    )


@pytest.fixture
def guarded_server(api_url: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`ocrq mcp --http` on 127.0.0.1 with OCRQ_MCP_TOKEN set: its endpoint URL and process."""
    with http_mcp(api_url, MCP_TOKEN=TOKEN) as server:
        yield server


async def test_with_a_token_set_a_request_without_it_is_401(
    guarded_server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = guarded_server
    await listening(url, proc)
    wrong = {"Authorization": f"Bearer {TOKEN[:-1]}y", **MCP_ACCEPT}
    async with httpx.AsyncClient(timeout=10) as http:
        none = await http.post(url, json=INITIALIZE, headers=MCP_ACCEPT)
        bad = await http.post(url, json=INITIALIZE, headers=wrong)
        basic = await http.post(url, json=INITIALIZE, headers={"Authorization": f"Basic {TOKEN}"})
        good = await http.post(
            url, json=INITIALIZE, headers={"Authorization": f"Bearer {TOKEN}", **MCP_ACCEPT}
        )
    for refused in (none, bad, basic):
        assert refused.status_code == 401, refused.text
        assert refused.headers["www-authenticate"] == 'Bearer realm="ocrq mcp"'
        assert refused.json()["code"] == "unauthorized"  # the API's error body
    assert good.status_code == 200, good.text


async def test_a_client_sending_the_token_gets_the_tools(
    guarded_server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = guarded_server
    await listening(url, proc)
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with http, McpClient(streamable_http_client(url, http_client=http)) as mcp:
        tools = {tool.name for tool in (await mcp.list_tools()).tools}
        missing = await mcp.call_tool("get_job", {"job_id": "no-such-job"})
    assert "ocr_document" in tools
    assert missing.is_error and text_of(missing).startswith("not_found: ")
