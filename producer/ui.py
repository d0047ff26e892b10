"""The web page: /ui (and / redirects to it), its static files, under a strict CSP.

The page is plain HTML, CSS and ES modules from ``static/`` (no build step), with pdf.js
vendored in ``static/pdfjs`` so a PDF's pages render in the browser with no network. Every
response of the page and its files carries a Content-Security-Policy that allows only this
origin: no inline script, no CDN. Swagger UI (/schema) keeps its own inline scripts, so the
policy is set on these routes only, not app-wide.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Any

from litestar import Response, Router, get
from litestar.datastructures import State
from litestar.enums import MediaType, ScopeType
from litestar.response import Redirect
from litestar.static_files import create_static_files_router
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from ocrq.producer.runtime import Runtime

STATIC_DIR = Path(__file__).parent / "static"
STATIC_PATH = "/static"

# pdf.js starts its worker from its own file (worker-src 'self'); blob: covers the browsers
# where it falls back to a blob URL. Page images are object URLs (blob:) of the user's files.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "worker-src 'self' blob:",
        "img-src 'self' blob: data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)

# A browser runs an ES module only when it is served as JavaScript; Python 3.11's own table
# does not know .mjs, and a slim image may have no /etc/mime.types to teach it.
mimetypes.add_type("text/javascript", ".mjs")


@get("/ui", include_in_schema=False)
async def ui_page() -> Response[bytes]:
    """The page itself; its scripts and styles come from /static."""
    page = (STATIC_DIR / "ui" / "index.html").read_bytes()
    return Response(page, media_type=MediaType.HTML)


@get("/", include_in_schema=False)
async def root() -> Redirect:
    """What a person opening the producer's address wants first: the page."""
    return Redirect("/ui")


@get("/ui/config", include_in_schema=False)
async def ui_config(state: State) -> dict[str, Any]:
    """What the page needs to know before it asks anything: whether to ask for a key."""
    rt: Runtime = state.runtime
    return {
        "api_keys": not rt.auth.open,
        "max_document_bytes": rt.settings.api.max_document_bytes,
    }


def ui_router() -> Router:
    """The page, its config and its static files."""
    static = create_static_files_router(
        path=STATIC_PATH, directories=[STATIC_DIR], name="ui-static", include_in_schema=False
    )
    return Router(path="/", route_handlers=[ui_page, root, ui_config, static])


def is_page_path(path: str) -> bool:
    """The paths of the page and its files (not the API, not Swagger UI)."""
    return path in ("/", "/ui") or path.startswith(("/ui/", f"{STATIC_PATH}/"))


def page_headers(app: ASGIApp) -> ASGIApp:
    """A middleware: the CSP and its companions on every response of the page's paths.

    A middleware rather than route headers: Litestar's static files answer without the
    headers of the router they are mounted in, and a 404 under /static needs them too.
    """

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or not is_page_path(scope["path"]):
            await app(scope, receive, send)
            return

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await app(scope, receive, send_wrapper)

    return middleware
