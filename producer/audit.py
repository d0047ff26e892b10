"""The audit trail: who did what, when, from where, for every state-changing call under /v1
and every read of a result; the entries go to Redis (shared/audit_store.py) and the log.

One middleware sees each request's method, route and answer, so no route has to remember to
audit itself, and a route added later is audited by its method. It runs inside the access
log's middleware and shares its request id. The entry is written when the request has been
answered (a streamed download: when the stream ends), and a failed write is logged and
counted, never turned into an error of a request that succeeded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Annotated, Any
from urllib.parse import parse_qs

import msgspec
import structlog
from litestar import Request, get
from litestar.datastructures import Headers, State
from litestar.enums import ScopeType
from litestar.params import QueryParameter
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from ocrq.producer.auth import credential_kind
from ocrq.producer.jobs.views import iso
from ocrq.producer.runtime import Runtime, caller, identity_of, require_admin
from ocrq.shared.audit_store import (
    DAY_MS,
    MAX_LIMIT,
    AuditEntry,
    AuditPage,
    AuditQuery,
    is_entry_id,
)
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import ErrorBody

log = structlog.get_logger("ocrq.audit")

AUDITED_PREFIX = "/v1/"
# (method, route) → action. A POST, PUT, PATCH or DELETE not named here is audited too, as
# "<method> <route>"; a GET only when it hands out a result (or the trail, or usage).
ACTIONS: dict[tuple[str, str], str] = {
    ("POST", "/v1/jobs"): "job.submit",
    ("POST", "/v1/jobs/{job_id}/cancel"): "job.cancel",
    ("DELETE", "/v1/jobs/{job_id}"): "job.delete",
    ("POST", "/v1/uploads"): "upload.create",
    ("PUT", "/v1/uploads/{upload_id}"): "upload.put",
    ("POST", "/v1/batches"): "batch.submit",
    ("POST", "/v1/batches/{batch_id}/cancel"): "batch.cancel",
    ("DELETE", "/v1/batches/{batch_id}"): "batch.delete",
    ("GET", "/v1/jobs/{job_id}"): "job.read",
    ("GET", "/v1/jobs/{job_id}/result"): "job.result",
    ("GET", "/v1/jobs/{job_id}/tables/{name}"): "job.table",
    ("GET", "/v1/jobs/{job_id}/images/{name}"): "job.image",
    ("GET", "/v1/jobs/{job_id}/pages/{number}"): "job.page",
    ("GET", "/v1/jobs/{job_id}/events"): "job.events",
    ("GET", "/v1/batches/{batch_id}/results"): "batch.results",
    ("GET", "/v1/usage"): "usage.read",
    ("GET", "/v1/audit"): "audit.read",
}
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
ERROR_BODY_MAX = 4096  # bytes of an error answer kept to read its code
REFUSALS_PER_MINUTE = 600  # refused credentials stored per process; past it, only logged
SIGNED = "upload.put"  # the one route whose credential is a signed ticket, not a key
IDS = ("job_id", "batch_id", "upload_id")
INSTANT = "ISO-8601 (2025-01-31T12:00:00Z; no offset: UTC) or a UTC day (2025-01-31)"


def action_of(scope: Scope) -> str | None:
    """The action a request performs, or None when it is not audited."""
    route: str = scope.get("path_template") or ""
    method = str(scope.get("method") or "GET")
    if not route.startswith(AUDITED_PREFIX):
        return None
    action = ACTIONS.get((method, route))
    if action is None and method not in READ_METHODS:
        return f"{method.lower()} {route}"
    if action == "job.events" and not _pages_asked(scope):
        return None  # progress alone hands out no result
    return action


def _pages_asked(scope: Scope) -> bool:
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return any(value.lower() in TRUE_WORDS for value in query.get("pages", []))


class Answer:
    """What the app answered: status, whether it said Retry-After, the error body's code."""

    def __init__(self) -> None:
        self.status = 0  # 0: no answer (the client went away first)
        self.retry_after = False
        self.code = ""
        self._body = bytearray()

    def observe(self, message: Message) -> None:
        """Take note of one message the app sends."""
        if message["type"] == "http.response.start":
            self.status = message["status"]
            headers = message.get("headers", [])
            self.retry_after = any(name.lower() == b"retry-after" for name, _ in headers)
        elif message["type"] == "http.response.body" and self.status >= 400:
            room = ERROR_BODY_MAX - len(self._body)
            self._body += message.get("body", b"")[: max(room, 0)]

    def failed(self, error: Exception) -> None:
        """The app raised instead of answering (a middleware's refusal, or a bug)."""
        known = error if isinstance(error, OcrqError) else None
        self.status = known.http_status if known else 500
        self.code = (known.code if known else ErrorCode.INTERNAL).value

    def error_code(self) -> str:
        """The catalogue code of an error answer ("" for a success or an unreadable body)."""
        if self.code or self.status < 400:
            return self.code
        try:
            return msgspec.json.decode(bytes(self._body), type=ErrorBody).code
        except (msgspec.DecodeError, msgspec.ValidationError):
            return ""


class RefusalBudget:
    """Refused credentials stored per minute by one process: a flood of bad keys must not
    fill Redis (each is still logged)."""

    def __init__(self, per_minute: int = REFUSALS_PER_MINUTE) -> None:
        self.per_minute, self.minute, self.used = per_minute, -1, 0

    def take(self) -> bool:
        """True while this minute's budget lasts."""
        minute = int(time.monotonic() // 60)
        if minute != self.minute:
            self.minute, self.used = minute, 0
        self.used += 1
        return self.used <= self.per_minute


def audit_trail() -> Callable[[ASGIApp], ASGIApp]:
    """A middleware factory: each audited request appends one entry once it is answered."""

    def wrap(app: ASGIApp) -> ASGIApp:
        budget = RefusalBudget()

        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            action = action_of(scope) if scope["type"] == ScopeType.HTTP else None
            if action is None:
                await app(scope, receive, send)
                return
            answer, arrived = Answer(), int(time.time() * 1000)

            async def send_wrapper(message: Message) -> None:
                answer.observe(message)
                await send(message)

            try:
                await app(scope, receive, send_wrapper)
            except Exception as e:
                answer.failed(e)
                raise
            finally:
                # Written even when the client went away (the task is being cancelled).
                await asyncio.shield(record(scope, action, answer, arrived, budget))

        return middleware

    return wrap


def entry_of(scope: Scope, action: str, answer: Answer, arrived: int) -> AuditEntry | None:
    """The entry of one answered request (None: a poll of an active job, no result in it)."""
    if action == "job.read" and answer.status == 200 and answer.retry_after:
        return None
    bound = structlog.contextvars.get_contextvars()
    params: dict[str, Any] = scope.get("path_params") or {}
    ids = {name: str(params.get(name) or bound.get(name) or "") for name in IDS}
    tenant, subject = caller_of(scope, action, answer, bound)
    client = scope.get("client")
    return AuditEntry(
        at=iso(arrived) or "",
        tenant=tenant,
        subject=subject,
        request_id=str(bound.get("request_id", "")),
        action=action,
        method=str(scope.get("method") or ""),
        path=scope["path"],  # never the query: a ticket's signature travels there
        status=answer.status,
        code=answer.error_code(),
        remote=client[0] if client else "",
        **ids,
    )


def caller_of(scope: Scope, action: str, answer: Answer, bound: dict[str, Any]) -> tuple[str, str]:
    """(tenant, subject) of the request; a refused credential: ("", its kind)."""
    runtime: Runtime = scope["app"].state.runtime
    if action == SIGNED and not runtime.auth.open:
        # The ticket's tenant, which the route bound, counts once its signature was checked.
        return (str(bound.get("tenant", "")) if answer.status < 400 else ""), "ticket"
    try:
        who = identity_of(runtime, scope)
    except OcrqError:
        return "", credential_kind(Headers.from_scope(scope))
    return who.tenant, who.subject


async def record(
    scope: Scope, action: str, answer: Answer, arrived: int, budget: RefusalBudget
) -> None:
    """Log the request's entry and append it to the stream; a failure to write is logged and
    counted, never raised (the answer stands)."""
    runtime: Runtime = scope["app"].state.runtime
    try:
        entry = entry_of(scope, action, answer, arrived)
    except Exception as e:  # a bug here must not fail the request either
        log.exception("audit_entry_failed", action=action, error=repr(e))
        runtime.metrics.audit_write_failures.inc()
        return
    if entry is None:
        return
    stored = bool(entry.tenant) or entry.subject == "ticket" or budget.take()
    if not stored:
        runtime.metrics.audit_refusals_unstored.inc()
    else:
        try:
            entry.id = await runtime.audit.append(entry)
        except Exception as e:  # Redis down, at maxmemory, …: the answer stands
            stored = False
            log.error("audit_write_failed", action=action, error=repr(e))
            runtime.metrics.audit_write_failures.inc()
    log.info("audit", stored=stored, **msgspec.structs.asdict(entry))


Instant = Annotated[str | None, QueryParameter(max_length=40, description=INSTANT)]
AuditLimit = Annotated[int, QueryParameter(ge=1, le=MAX_LIMIT, description="entries, newest first")]


@get("/v1/audit", summary="The audit trail, newest first (admin credentials only)")
async def read_audit(
    request: Request[Any, Any, Any],
    state: State,
    tenant: Annotated[
        str | None, QueryParameter(max_length=200, description="only this tenant's entries")
    ] = None,
    since: Annotated[
        str | None, QueryParameter(name="from", max_length=40, description=INSTANT)
    ] = None,
    to: Instant = None,
    before: Annotated[
        str | None,
        QueryParameter(
            pattern=r"^\d{1,20}-\d{1,20}$", description="a page's `next`: older entries"
        ),
    ] = None,
    limit: AuditLimit = 100,
) -> AuditPage:
    """Entries written between ``from`` and ``to`` (both included); 403 for a tenant not
    in OCRQ_ADMIN_TENANTS. ``tenant=`` (empty) selects refused credentials."""
    rt, me = caller(request, state)
    require_admin(rt, me, "the audit trail")
    if before is not None and not is_entry_id(before):
        raise OcrqError(ErrorCode.INVALID_REQUEST, "before: a `next` from an earlier page")
    query = AuditQuery(
        tenant=tenant,
        start_ms=instant_ms(since, "from"),
        end_ms=instant_ms(to, "to", end_of_day=True),
        before=before,
        limit=limit,
    )
    return await rt.audit.read(query)


def instant_ms(raw: str | None, name: str, *, end_of_day: bool = False) -> int | None:
    """A ``from``/``to`` parameter as epoch ms; a bare day is its first (or last) ms."""
    if raw is None:
        return None
    try:
        if len(raw) == 10:
            start = datetime.combine(date.fromisoformat(raw), datetime.min.time(), UTC)
            ms = int(start.timestamp() * 1000) + (DAY_MS - 1 if end_of_day else 0)
        else:
            moment = datetime.fromisoformat(raw)
            moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
            ms = int(moment.timestamp() * 1000)
    except (ValueError, OverflowError):
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"{name}: {INSTANT}") from None
    if ms < 0:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"{name}: not before 1970")
    return ms


AUDIT_HANDLERS = [read_audit]
