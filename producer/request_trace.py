"""The producer's request span (OpenTelemetry); a pass-through while tracing is off."""

from __future__ import annotations

from collections.abc import Callable

from litestar.types import ASGIApp


def trace_requests() -> Callable[[ASGIApp], ASGIApp]:
    """A middleware factory: each HTTP request becomes the root (or a child) span."""

    def wrap(app: ASGIApp) -> ASGIApp:
        return app

    return wrap
