"""Requests per minute per tenant (OCRQ_QUOTAS requests_per_minute), counted in Redis.

Counted before the route runs, for every /v1 request the tenant makes (polls included, as
peers' API limits do), in a fixed window per minute shared by every producer: INCR is atomic,
so exactly the limit passes in a window however the requests are spread over processes.
A request whose credential fails gets its 401 from the route, uncounted.
"""

from __future__ import annotations

from collections.abc import Callable

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from ocrq.producer.runtime import Runtime, identity_of
from ocrq.shared.errors import OcrqError

LIMITED_PREFIX = "/v1/"


def rate_limit() -> Callable[[ASGIApp], ASGIApp]:
    """A middleware factory: a tenant over its requests per minute gets 429 quota_exceeded."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == ScopeType.HTTP and scope["path"].startswith(LIMITED_PREFIX):
                await _count(scope)
            await app(scope, receive, send)

        return middleware

    return wrap


async def _count(scope: Scope) -> None:
    """Count the request against its tenant's minute; raise 429 past the limit."""
    runtime: Runtime | None = getattr(scope["app"].state, "runtime", None)
    if runtime is None:
        return
    quotas = runtime.store.quotas
    try:
        tenant = identity_of(runtime, scope).tenant
    except OcrqError:
        return  # the route answers 401
    if quotas.table.of(tenant).requests_per_minute > 0:
        await quotas.tick(tenant)
