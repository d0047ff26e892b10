"""The process-wide clients of the producer, created and closed by the app's lifespan."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import structlog
from litestar import Request
from litestar.datastructures import Headers, State
from litestar.types import Scope

from ocrq.producer.auth import Authenticator
from ocrq.producer.events import EventHub
from ocrq.producer.flights import SingleFlight
from ocrq.producer.metrics import ProducerMetrics
from ocrq.producer.tokens import Identity
from ocrq.shared.audit_store import AuditTrail
from ocrq.shared.batch_store import BatchStore
from ocrq.shared.blobs import BlobStore
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.settings import Settings
from ocrq.shared.store import JobStore

IDENTITY = "ocrq.identity"  # the scope state's key of the request's checked caller


@dataclass(frozen=True)
class Runtime:
    """Settings plus the one Redis pool, the one pub/sub hub, auth, metrics, the audit
    trail and the object store (None when OCRQ_BLOB_URL is unset: every byte stays in Redis)."""

    settings: Settings
    store: JobStore
    events: EventHub
    auth: Authenticator
    metrics: ProducerMetrics
    batches: BatchStore
    audit: AuditTrail  # the process's one trail: concurrent appends share round trips
    blobs: BlobStore | None = None
    flights: SingleFlight = field(default_factory=SingleFlight)  # shared reads (live events)
    decode_gate: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))


def caller(request: Request[Any, Any, Any], state: State, **context: str) -> tuple[Runtime, str]:
    """The process's clients and the caller's tenant (401 without a valid key), both bound
    to the request's log lines with ``context`` (job_id=…, batch_id=…)."""
    rt: Runtime = state.runtime
    tenant = identity_of(rt, request.scope).tenant
    structlog.contextvars.bind_contextvars(tenant=tenant, **context)
    return rt, tenant


def identity_of(rt: Runtime, scope: Scope) -> Identity:
    """The request's caller, checked once per request: the rate limit, the route and the
    audit trail all ask, and a JWT's signature need not be verified three times."""
    state = scope.setdefault("state", {})
    known: Identity | OcrqError | None = state.get(IDENTITY)
    if known is None:
        try:
            known = rt.auth.identity(Headers.from_scope(scope))
        except OcrqError as e:
            known = e
        state[IDENTITY] = known
    if isinstance(known, OcrqError):
        raise known
    return known


def runtime_of(state: State) -> Runtime:
    """The process-wide clients the lifespan created."""
    rt: Runtime = state.runtime
    return rt


def require_admin(rt: Runtime, tenant: str, what: str) -> None:
    """403 forbidden unless the tenant is one of OCRQ_ADMIN_TENANTS; ``what`` names the act."""
    if tenant not in rt.settings.tenancy.admins:
        raise OcrqError(
            ErrorCode.FORBIDDEN, f"{what} needs an admin credential (OCRQ_ADMIN_TENANTS)"
        )
