"""`ocrq mcp --http`: streamable HTTP, behind a bearer token (OCRQ_MCP_TOKEN) when one is set.

Whoever reaches the endpoint acts with the server's API key and reads files under its roots,
so listening anywhere but loopback requires a token, and with a token set every request
carries it (``Authorization: Bearer <token>``), loopback included.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ocrq.shared.errors import ErrorCode

TOKEN_ENV = "OCRQ_MCP_TOKEN"
CHALLENGE = 'Bearer realm="ocrq mcp"'


def is_loopback(host: str) -> bool:
    """Whether a listen address reaches this machine only (a name other than localhost: no)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def token_from_env() -> str | None:
    """OCRQ_MCP_TOKEN; unset or blank: none."""
    return os.environ.get(TOKEN_ENV, "").strip() or None


def check_listen(host: str, token: str | None) -> None:
    """Raise ValueError when `--http` must not listen on ``host``: off loopback, no token."""
    if not token and not is_loopback(host):
        raise ValueError(
            f"--host {host} is not a loopback address: set {TOKEN_ENV}, a bearer token every "
            "client must send (Authorization: Bearer …), or listen on 127.0.0.1"
        )


class BearerGuard:
    """ASGI middleware: a request without ``Authorization: Bearer <token>`` is a 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    def admits(self, scope: Scope) -> bool:
        """Whether the request carries exactly one Authorization header with the token."""
        given = [value for name, value in scope.get("headers", []) if name == b"authorization"]
        if len(given) != 1:
            return False
        scheme, _, credentials = given[0].partition(b" ")
        # compare_digest: the time taken must not tell how much of a guess was right.
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self.admits(scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            body = {
                "code": ErrorCode.UNAUTHORIZED.value,
                "message": f"send Authorization: Bearer <the server's {TOKEN_ENV}>",
            }
            headers = {"WWW-Authenticate": CHALLENGE}
            await JSONResponse(body, status_code=401, headers=headers)(scope, receive, send)
        else:  # a websocket: refused before it is accepted
            await send({"type": "websocket.close", "code": 1008})


def serve_http(server: MCPServer[Any], host: str, port: int, token: str | None) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted."""
    app: ASGIApp = server.streamable_http_app(host=host)  # loopback: the SDK checks Host too
    if token:
        app = BearerGuard(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)
