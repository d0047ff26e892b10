"""The audit trail in Redis: one stream (``Keys.audit``), appended to, read newest first.

Each state-changing call and each read of a result is one entry (producer/audit.py decides
which). Entries are only ever added: XADD with ``MINID ~`` drops, as it adds, those older
than OCRQ_AUDIT_RETENTION_DAYS (whole macro-nodes at a time, so a little more may stay), and
no other command writes the stream. The entry id is the time it was written.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import msgspec

from ocrq.shared import resp
from ocrq.shared.record import text
from ocrq.shared.resp import Arg
from ocrq.shared.schemas import Base
from ocrq.shared.store import JobStore, now_ms

DAY_MS = 86_400_000
MAX_LIMIT = 1000  # entries one read returns at most
SCAN_PAGE = 500  # entries read per round trip while filtering by tenant
MAX_SCAN = 20_000  # entries one read looks at, at most: then it hands back a cursor
ENTRY_ID = re.compile(r"\d{1,20}-\d{1,20}")


class AuditEntry(Base):
    """Who did what, when, from where, and how it went."""

    id: str = ""  # the stream entry's id, "<ms>-<seq>": when it was written
    at: str = ""  # when the request arrived (ISO-8601, UTC)
    tenant: str = ""  # "" when the credential was refused
    subject: str = ""  # key:<12 hex of its SHA-256>, jwt:<sub>, open, ticket; or none, api_key, jwt
    request_id: str = ""
    action: str = ""  # job.submit, job.result, batch.delete, audit.read, …
    method: str = ""
    path: str = ""
    job_id: str = ""
    batch_id: str = ""
    upload_id: str = ""
    status: int = 0  # the HTTP status answered
    code: str = ""  # the error code, when it failed
    remote: str = ""  # the client's address


class AuditPage(Base):
    """GET /v1/audit: entries newest first; ``next``, when set, is ``before=`` for older ones."""

    entries: list[AuditEntry]
    next: str | None = None


class AuditQuery(msgspec.Struct, frozen=True, kw_only=True):
    """A read of the trail: a time range (epoch ms, both ends included), a cursor, a tenant."""

    tenant: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    before: str | None = None  # an entry id: only entries older than it
    limit: int = 100


def is_entry_id(raw: str) -> bool:
    """True for a stream entry id as the trail hands them out ("<ms>-<seq>")."""
    if ENTRY_ID.fullmatch(raw) is None:
        return False
    return all(int(part) < 2**64 for part in raw.split("-"))  # what Redis takes as an id


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class AuditTrail:
    """Appends entries to the audit stream and reads them back.

    Appends are group-committed: while one round trip writes entries, those that arrive
    meanwhile wait and go together in the next one (one pipeline), so concurrent requests
    share round trips and no entry waits for a timer. One trail per process.
    """

    def __init__(self, store: JobStore, retention_days: int) -> None:
        self.redis, self.key = store.redis, store.keys.audit()
        self.cluster = store.nodes.cluster is not None
        self.retention_ms = max(0, retention_days) * DAY_MS
        self._waiting: list[tuple[list[Arg], asyncio.Future[str]]] = []
        self._writing = False

    async def append(self, entry: AuditEntry) -> str:
        """Add one entry (its empty fields left out), trimming what retention drops; its id."""
        written = msgspec.structs.asdict(entry).items()
        fields: list[Arg] = [part for k, v in written if v and k != "id" for part in (k, v)]
        added: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.append((fields, added))
        if not self._writing:  # this caller writes, until nothing waits any more
            await self._write_waiting()
        return await added

    async def _write_waiting(self) -> None:
        self._writing = True
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                await self._write_group(group)
        finally:
            self._writing = False
            for _, added in self._waiting:  # the writer was cancelled: none is left hanging
                added.set_exception(RuntimeError("the audit writer stopped"))
            self._waiting = []

    async def _write_group(self, group: list[tuple[list[Arg], asyncio.Future[str]]]) -> None:
        # 0 days: nothing is dropped (the operator trims the stream by other means).
        trim: list[Arg] = ["MINID", "~", now_ms() - self.retention_ms] if self.retention_ms else []
        try:
            replies = await self._send([["XADD", self.key, *trim, "*", *f] for f, _ in group])
        except BaseException as e:  # each waiting request logs and counts its own failure
            failure = e if isinstance(e, Exception) else RuntimeError("the audit writer stopped")
            for _, added in group:
                added.set_exception(failure)
            if not isinstance(e, Exception):
                raise
            return
        for (_, added), reply in zip(group, replies, strict=True):
            if isinstance(reply, Exception):
                added.set_exception(reply)
            else:
                added.set_result(text(reply))

    async def _send(self, commands: list[list[Arg]]) -> list[Any]:
        """The XADDs in one round trip, their replies (an error in its place)."""
        if self.cluster:  # the cluster client follows the stream's slot when it moves
            async with self.redis.pipeline(transaction=False) as pipe:
                for command in commands:
                    pipe.execute_command(*command)
                replies: list[Any] = await pipe.execute(raise_on_error=False)
                return replies
        return await resp.exchange(
            self.redis, [b for c in commands for b in resp.pack(c)], len(commands)
        )

    async def read(self, query: AuditQuery) -> AuditPage:
        """Entries newest first, filtered; past MAX_SCAN looked at, a cursor to go on."""
        if query.before is not None and _id_key(query.before) == (0, 0):
            return AuditPage(entries=[])  # nothing is older than the first possible id
        high, low = _bounds(query)
        found: list[AuditEntry] = []
        scanned = 0
        while True:
            # Filtering by tenant reads pages; without a filter, exactly what is asked.
            count = SCAN_PAGE if query.tenant is not None else query.limit - len(found)
            rows: Any = await self.redis.xrevrange(self.key, high, low, count=count)
            for raw_id, fields in rows:
                scanned += 1
                entry = decode_entry(text(raw_id), fields)
                if query.tenant is None or entry.tenant == query.tenant:
                    found.append(entry)
                    if len(found) == query.limit:
                        return AuditPage(entries=found, next=entry.id)
            if len(rows) < count:
                return AuditPage(entries=found)  # the range is exhausted
            high = f"({text(rows[-1][0])}"
            if scanned >= MAX_SCAN:
                return AuditPage(entries=found, next=high[1:])


def _bounds(query: AuditQuery) -> tuple[str, str]:
    """XREVRANGE's (max, min) for a query: ``to`` or the cursor, whichever is older."""
    high = "+" if query.end_ms is None else str(query.end_ms)
    if query.before and (query.end_ms is None or _id_key(query.before)[0] <= query.end_ms):
        high = f"({query.before}"  # exclusive: the cursor's own entry was on the last page
    return high, "-" if query.start_ms is None else str(query.start_ms)


def decode_entry(entry_id: str, fields: dict[Any, Any]) -> AuditEntry:
    """A stream entry as an AuditEntry (fields it does not know are ignored)."""
    values: dict[str, Any] = {text(k): text(v) for k, v in fields.items()}
    values["id"] = entry_id
    return msgspec.convert(values, AuditEntry, strict=False)
