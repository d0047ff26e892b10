"""Per-tenant quotas counted in Redis: jobs and pages in flight, pages a day, requests a minute.

Every counter of a tenant lies in the tenant's own slot (``Keys.quota``), so one script checks
and counts a new job against all of them at once (quota_admit.lua): no burst gets past a
limit. The counts live in Redis, so they hold across producer restarts and every producer
shares them. A job leaves the in-flight counts when the script that ends it has run (the
store's finish, poison and cancel call ``release``); should a process die between the two, the
job stays counted until an admission over the limit looks at the jobs it holds and releases
those that have ended (``_forget_ended``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.keys import Keys, load_script
from ocrq.shared.quotas import Quota, QuotaTable
from ocrq.shared.record import Field, text
from ocrq.shared.schemas import ACTIVE

BUSY_RETRY_S = 5  # Retry-After of a tenant at its jobs or pages in flight
DAY_TTL_S = 2 * 86_400
FORGET_SAMPLE = 64  # jobs in flight looked at when a tenant is at its limit
UNWRITTEN_GRACE_S = 60  # an admitted job's upload has this long to be written


def utc_day(epoch_ms: int) -> str:
    """The UTC day of an instant as yyyymmdd (usage and quota keys)."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y%m%d")


def seconds_to_midnight(now: float) -> int:
    """Whole seconds until the next UTC day begins (at least 1)."""
    return max(1, 86_400 - int(now) % 86_400)


class QuotaStore:
    """The quota counters of every tenant, and the checks that use them."""

    def __init__(self, redis: aioredis.Redis, keys: Keys, table: QuotaTable) -> None:
        self.redis, self.keys, self.table = redis, keys, table
        self._admit = redis.register_script(load_script("quota_admit"))
        self._release = redis.register_script(load_script("quota_release"))

    def _keys(self, tenant: str, now: float) -> list[str]:
        day = utc_day(int(now * 1000))
        names = ("inflight", "inflight_pages", f"day:{day}")
        return [self.keys.quota(tenant, name) for name in names]

    def counts_jobs(self, tenant: str) -> bool:
        """True when the tenant has a limit that counts its jobs at upload."""
        quota = self.table.of(tenant)
        return bool(quota.concurrent_jobs or quota.pages_in_flight or quota.pages_per_day)

    async def admit(self, tenant: str, job_id: str, pages: int) -> None:
        """Count a new job of ``pages`` pages, or raise 429 quota_exceeded naming the limit."""
        quota = self.table.of(tenant)
        reply = await self._try_admit(tenant, job_id, pages, quota)
        if reply and reply[1] in ("concurrent_jobs", "pages_in_flight"):
            if await self._forget_ended(tenant):  # some had ended unseen: look again
                reply = await self._try_admit(tenant, job_id, pages, quota)
        if reply:
            raise over_quota(tenant, reply[1], int(reply[2]), int(reply[3]), pages)

    async def _try_admit(self, tenant: str, job_id: str, pages: int, quota: Quota) -> list[str]:
        """[] when counted, else ['over', limit name, limit, current]."""
        limits = [quota.concurrent_jobs, quota.pages_in_flight, quota.pages_per_day]
        argv: list[Any] = [job_id, pages, *limits, DAY_TTL_S, int(time.time() * 1000)]
        reply = await self._admit(keys=self._keys(tenant, time.time()), args=argv)
        return [] if text(reply[0]) == "ok" else [text(part) for part in reply]

    async def release(self, tenant: str, job_id: str, *, refund: bool = False) -> bool:
        """The job no longer counts as in flight (refund: its pages go back to the day)."""
        keys = self._keys(tenant, time.time())
        return int(await self._release(keys=keys, args=[job_id, "1" if refund else "0"])) == 1

    async def _forget_ended(self, tenant: str) -> int:
        """Release the tenant's counted jobs that have ended or vanished; how many."""
        inflight = self.keys.quota(tenant, "inflight")
        _, rows = await self.redis.hscan(inflight, 0, count=FORGET_SAMPLE)
        assert isinstance(rows, dict)  # field → value (no_values is off)
        written_by = int((time.time() - UNWRITTEN_GRACE_S) * 1000)
        ended = []
        for raw_id, value in rows.items():
            job_id, admitted = text(raw_id), int(text(value).split(" ")[-1])
            status = await self.redis.hget(self.keys.job(job_id), Field.STATUS)
            # A job admitted a moment ago may not be written yet: missing is not ended.
            missing = status is None and admitted < written_by
            if missing or (status is not None and text(status) not in ACTIVE):
                ended.append(job_id)
        return sum([await self.release(tenant, job_id) for job_id in ended])

    async def tick(self, tenant: str) -> None:
        """Count one API request in the tenant's minute; 429 past requests_per_minute."""
        limit = self.table.of(tenant).requests_per_minute
        if limit <= 0:
            return
        now = time.time()
        key = self.keys.quota(tenant, f"minute:{int(now // 60)}")
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, 120)
            count, _ = await pipe.execute()
        if int(count) > limit:
            raise OcrqError(
                ErrorCode.QUOTA_EXCEEDED,
                f"tenant {tenant} is over its requests_per_minute quota ({limit})",
                retry_after=max(1, 60 - int(now) % 60),
            )


def over_quota(tenant: str, name: str, limit: int, current: int, pages: int) -> OcrqError:
    """The 429 for a job past one of its tenant's limits, the limit named."""
    if name == "concurrent_jobs":
        what, retry = f"has {current} jobs waiting or running", BUSY_RETRY_S
    elif name == "pages_in_flight":
        what, retry = f"has {current} pages waiting or running, this job {pages}", BUSY_RETRY_S
    else:
        what, retry = f"has had {current} pages today, this job {pages}", 0
    retry = retry or seconds_to_midnight(time.time())
    return OcrqError(
        ErrorCode.QUOTA_EXCEEDED,
        f"tenant {tenant} {what}: over its {name} quota ({limit})",
        retry_after=retry,
    )
