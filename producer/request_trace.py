"""The producer's request span (OpenTelemetry): the root of a job's trace, or the child of
the caller's when it sent a ``traceparent``. A pass-through, reading nothing, while tracing
is off."""

from __future__ import annotations

from collections.abc import Callable

from litestar.datastructures import Headers
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from ocrq.shared.tracing import span, traceparent_of, tracing_active


def trace_requests() -> Callable[[ASGIApp], ASGIApp]:
    """A middleware factory: each HTTP request under a route is one server span, named
    after its method and route template (never the path: ids would explode the names)."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP or not tracing_active():
                await app(scope, receive, send)
                return
            route = scope.get("path_template") or "unmatched"
            method = str(scope.get("method") or "GET")
            parent = traceparent_of(Headers.from_scope(scope))
            attributes = {"http.request.method": method, "http.route": route}
            with span(f"{method} {route}", attributes, parent=parent, kind="server") as s:

                async def send_wrapper(message: Message) -> None:
                    if s is not None and message["type"] == "http.response.start":
                        s.set_attribute("http.response.status_code", message["status"])
                    await send(message)

                await app(scope, receive, send_wrapper)

        return middleware

    return wrap
