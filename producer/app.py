"""The Litestar app factory: lifespan owns the clients, one mapper turns errors into responses."""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import structlog
from litestar import Litestar, Request, Response
from litestar.datastructures import Headers
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException, ValidationException
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from ocrq.producer.audit import AUDIT_HANDLERS, audit_trail
from ocrq.producer.auth import Authenticator, presented_key
from ocrq.producer.batches.results import batch_results
from ocrq.producer.batches.routes import BATCH_HANDLERS
from ocrq.producer.batches.sweeper import batch_sweeper
from ocrq.producer.events import EventHub
from ocrq.producer.guard import host_guard
from ocrq.producer.health import HEALTH_HANDLERS
from ocrq.producer.heap import keep_freed_bodies
from ocrq.producer.jobs.capabilities import CAPABILITY_HANDLERS
from ocrq.producer.jobs.files import FILE_HANDLERS
from ocrq.producer.jobs.routes import JOB_HANDLERS
from ocrq.producer.jobs.uploads import UPLOAD_HANDLERS
from ocrq.producer.live import LIVE_HANDLERS
from ocrq.producer.metrics import ProducerMetrics
from ocrq.producer.openapi import openapi_config, swagger_assets
from ocrq.producer.rate_limit import rate_limit
from ocrq.producer.request_trace import trace_requests
from ocrq.producer.runtime import Runtime
from ocrq.producer.tokens import TokenVerifier, looks_like_jwt
from ocrq.producer.ui import page_headers, ui_router
from ocrq.producer.usage import USAGE_HANDLERS
from ocrq.shared.audit_store import AuditTrail
from ocrq.shared.batch_store import BatchStore
from ocrq.shared.blobs import BlobError
from ocrq.shared.blobs.opening import open_blob_store
from ocrq.shared.enqueue import store_full
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.logging import configure_logging, renders_json
from ocrq.shared.schemas import ErrorBody
from ocrq.shared.settings import Settings, load_settings
from ocrq.shared.store import REDIS_DOWN, JobStore, is_oom, make_redis
from ocrq.shared.tracing import configure_tracing, shutdown_tracing

log = structlog.get_logger("ocrq.producer")

_STATUS_CODES: dict[int, ErrorCode] = {
    401: ErrorCode.UNAUTHORIZED,
    404: ErrorCode.NOT_FOUND,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
    415: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
    503: ErrorCode.UNAVAILABLE,
}


def error_response(request: Request[Any, Any, Any], exc: Exception) -> Response[ErrorBody]:
    """The one exception → response mapper: a catalogue code, never a bare 500 page."""
    if isinstance(exc, OcrqError):
        err = exc
    elif isinstance(exc, ValidationException):
        err = OcrqError(ErrorCode.INVALID_REQUEST, validation_message(exc))
    elif isinstance(exc, HTTPException):
        code = _STATUS_CODES.get(exc.status_code, ErrorCode.INVALID_REQUEST)
        err = OcrqError(code, exc.detail)
        if exc.status_code not in _STATUS_CODES and exc.status_code < 500:
            return _render(err, exc.status_code, exc.headers)  # 405 keeps its Allow header
    elif isinstance(exc, REDIS_DOWN):
        err = OcrqError(ErrorCode.UNAVAILABLE, "the job store is unreachable", retry_after=5)
    elif isinstance(exc, BlobError):  # a route that did not say more about the store's failure
        log.warning("blob_store_error", error=str(exc))
        err = OcrqError(ErrorCode.UNAVAILABLE, "the object store is unreachable", retry_after=5)
    elif is_oom(exc):
        err = store_full()
    elif isinstance(exc, RecursionError):  # msgspec's decoder, on JSON nested thousands deep
        log.warning("request_nested_too_deeply", path=request.url.path)
        err = OcrqError(ErrorCode.INVALID_REQUEST, "the request's JSON is nested too deeply")
    else:
        log.exception("unhandled_error", error=repr(exc))
        err = OcrqError(ErrorCode.INTERNAL, "internal error")
    return _render(err, err.http_status)


def validation_message(exc: ValidationException) -> str:
    """A validation failure in words: each bad parameter with what is wrong with it."""
    problems = exc.extra if isinstance(exc.extra, list) else []
    parts = [
        f"{p.get('key') or 'body'}: {p.get('message', 'invalid')}"
        for p in problems
        if isinstance(p, dict)
    ]
    return "; ".join(parts) or str(exc.detail)


def _render(
    err: OcrqError, status: int, extra: Mapping[str, str] | None = None
) -> Response[ErrorBody]:
    headers = dict(extra or {})
    if err.retry_after:
        headers["Retry-After"] = str(err.retry_after)
    body = ErrorBody(code=err.code.value, message=err.message)
    return Response(body, status_code=status, headers=headers)


_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}")


def safe_request_id(raw: bytes) -> str:
    """A client's X-Request-ID when it is a plain token (it goes into logs and a header)."""
    return raw.decode("ascii") if _REQUEST_ID.fullmatch(raw) else ""


def access_log(level: int) -> Callable[[ASGIApp], ASGIApp]:
    """A middleware factory: one log line per request at ``level``, and request metrics."""
    return lambda app: access_logged(app, level)


def access_logged(app: ASGIApp, level: int) -> ASGIApp:
    """One structlog line per request with request id, tenant and job id; request metrics."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        structlog.contextvars.clear_contextvars()
        headers = dict(scope["headers"])
        request_id = safe_request_id(headers.get(b"x-request-id", b"")) or secrets.token_hex(8)
        structlog.contextvars.bind_contextvars(request_id=request_id)
        status, started = 500, time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-request-id", request_id.encode()),
                ]
            await send(message)

        try:
            await app(scope, receive, send_wrapper)
        finally:
            route = scope.get("path_template") or "unmatched"
            runtime: Runtime | None = getattr(scope["app"].state, "runtime", None)
            if runtime is not None:
                runtime.metrics.requests.labels(route, str(status)).inc()
            log.log(
                level,
                "request",
                method=scope.get("method"),
                path=scope["path"],
                route=route,
                status=status,
                duration_ms=round((time.perf_counter() - started) * 1000, 2),
            )

    return middleware


def token_prefetch(tokens: TokenVerifier | None) -> Callable[[ASGIApp], ASGIApp]:
    """A middleware factory: a request's bearer JWT gets its issuer's keys fetched first
    (async, cached), so the route's own check of the token needs no I/O."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if tokens is not None and scope["type"] == ScopeType.HTTP:
                presented = presented_key(Headers.from_scope(scope))
                if presented and looks_like_jwt(presented):
                    await tokens.prefetch(presented)
            await app(scope, receive, send)

        return middleware

    return wrap


def lifespan_for(settings: Settings, tokens: TokenVerifier | None = None) -> Any:
    """The lifespan: one Redis pool, one pub/sub hub, the object store; groups created at
    start."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        configure_tracing("ocrq-producer")  # on only when OTEL_* names an OTLP endpoint
        redis = make_redis(settings)
        store = JobStore(redis, settings)
        auth = Authenticator(settings.api.tenant_keys, tokens)
        if auth.open:
            log.warning("api_open", message="OCRQ_API_KEYS is empty: the API accepts anyone")
        try:
            await store.ensure_groups()
        except Exception as e:  # Redis may come up after us; /readyz says so meanwhile
            log.warning("redis_unreachable_at_start", error=str(e))
        metrics = ProducerMetrics()
        blobs = open_blob_store(settings, observe=metrics.observe_blob)
        events = EventHub(store.event_channel)
        await events.start()
        audit = AuditTrail(store, settings.tenancy.audit_retention_days)
        app.state.runtime = Runtime(
            settings, store, events, auth, metrics, BatchStore(store), audit, blobs=blobs
        )
        try:
            yield
        finally:
            await events.stop()
            if blobs is not None:
                await blobs.aclose()
            await store.aclose()
            if tokens is not None:
                await tokens.aclose()
            shutdown_tracing()

    return lifespan


def create_app(settings: Settings | None = None) -> Litestar:
    """Build the producer app; settings are read from OCRQ_* once when not given."""
    settings = settings or load_settings()
    configure_logging(settings)
    keep_freed_bodies()
    # A person at a terminal wants the events, not a line per poll: access lines at debug.
    access_level = logging.INFO if renders_json(settings) else logging.DEBUG
    tokens = TokenVerifier(settings.api) if settings.api.jwt_jwks_url else None
    return Litestar(
        route_handlers=[
            *HEALTH_HANDLERS,
            *JOB_HANDLERS,
            *UPLOAD_HANDLERS,
            *CAPABILITY_HANDLERS,
            *FILE_HANDLERS,
            *BATCH_HANDLERS,
            batch_results,
            *LIVE_HANDLERS,
            *USAGE_HANDLERS,
            *AUDIT_HANDLERS,
            swagger_assets(),
            ui_router(),
        ],
        lifespan=[lifespan_for(settings, tokens), batch_sweeper],  # the sweeper needs the runtime
        # Host and Origin are checked before any route reads a body or touches Redis.
        middleware=[
            access_log(access_level),
            audit_trail(),  # inside the access log: its entries carry the request id
            page_headers,
            trace_requests(),
            host_guard(settings),
            token_prefetch(tokens),
            rate_limit(),
        ],
        exception_handlers={Exception: error_response},
        openapi_config=openapi_config(settings),
        logging_config=None,
    )
