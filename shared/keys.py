"""Every Redis key ocrq uses, and the Lua scripts for every state transition.

The scripts live in ``scripts/*.lua``, one per transition of the state machine
(docs/state-machine.md), each with a header naming its KEYS, ARGV, replies and the helper
functions it needs from ``scripts/lib/``. Each checks the current state before it writes,
so a cancel racing a finishing worker, or two workers after a reclaim, cannot lose an
update. They use only commands that Redis 7.0 has.
"""

from __future__ import annotations

import itertools
import re
import secrets
import zlib
from functools import cache
from importlib import resources

from redis.crc import key_slot

from ocrq.shared.settings import GROUP, LANES, check_partitions

SCRIPT_NAMES = (
    "enqueue",
    "claim",
    "progress",
    "finish",
    "touch",
    "release",
    "poison",
    "cancel",
    "prune",
    "batch_open",
    "batch_seal",
    "webhook_state",
    "save_files",
    "lease",
    "take",
    "quota_admit",
    "quota_release",
)
_NEEDS = re.compile(r"^-- Needs: (.*)$", re.MULTILINE)


DEFAULT_TAG = "p0"  # one partition, and ids that carry no tag
TAG_SEP = "."  # "<tag>.<random>" ids; token_urlsafe never holds a "."
CLUSTER_SLOTS = 16384


@cache
def partition_tags(partitions: int) -> tuple[str, ...]:
    """The hash tag of each partition: partition i's tag hashes into the i-th of P equal
    slot ranges, so P partitions land on P masters of a cluster whose slots are split
    evenly (``redis-cli --cluster create`` does that). ``p<i>`` where it fits, else
    ``p<i>-<n>`` for the first n that does: the same answer in every process.
    """
    check_partitions(partitions)
    if partitions == 1:
        return (DEFAULT_TAG,)
    tags = []
    for i in range(partitions):
        low, high = i * CLUSTER_SLOTS // partitions, (i + 1) * CLUSTER_SLOTS // partitions
        candidates = itertools.chain([f"p{i}"], (f"p{i}-{n}" for n in itertools.count()))
        tags.append(next(t for t in candidates if low <= key_slot(t.encode()) < high))
    return tuple(tags)


def tag_of(some_id: str) -> str:
    """The partition tag a job or batch id carries ("p2-7.xYz…" → "p2-7"); p0 without one."""
    head, sep, _ = some_id.partition(TAG_SEP)
    return head if sep and head else DEFAULT_TAG


# The ids ocrq makes for jobs and batches (producer/jobs/views.py: new_job_id): a partition tag,
# then 22 characters of token_urlsafe. A client's id of any other shape names nothing, and
# must never reach a key: "<batch>:jobs" would name a batch's job list, a "}" another slot.
_KNOWN_ID = re.compile(r"(?:[A-Za-z0-9-]{1,32}\.)?[A-Za-z0-9_-]{22}")


def is_known_id(some_id: str) -> bool:
    """True when some_id has the shape of the ids ocrq gives jobs and batches."""
    return _KNOWN_ID.fullmatch(some_id) is not None


def with_tag(token: str, tag: str) -> str:
    """An id that carries its partition tag; the default tag keeps the bare token."""
    return token if tag == DEFAULT_TAG else f"{tag}{TAG_SEP}{token}"


class Keys:
    """The key layout under one prefix (default ``ocrq:``), split into partitions.

    Every key belongs to a partition through a ``{tag}`` hash tag, so that everything one
    script or transaction touches (a job's hash, its lane's stream, its idempotency key,
    its batch, the tenant's index, the webhooks stream) lies in one Redis Cluster slot. A
    job or batch id carries its partition's tag (``tag_of``): no step needs a lookup.
    """

    def __init__(self, prefix: str = "ocrq:", partitions: int = 1) -> None:
        self.prefix = prefix
        self.tags = partition_tags(partitions)
        self.partitions = partitions
        self.group = GROUP
        self.webhook_group = "webhooks"  # the workers' group on the webhooks streams
        self.lanes = LANES
        self.events = f"{prefix}events"  # the pub/sub channel (not a key: any node serves it)

    def pick_tag(self, tenant: str, idem: str | None = None) -> str:
        """Where a new job or batch goes: fixed by its Idempotency-Key, else at random.

        A key always maps to one partition (crc32, the same in every producer process), so
        a replayed upload finds the job its first upload made.
        """
        if self.partitions == 1:
            return self.tags[0]
        if idem:
            return self.tags[zlib.crc32(f"{tenant}\n{idem}".encode()) % self.partitions]
        return secrets.choice(self.tags)

    def _in(self, tag: str) -> str:
        """The prefix and hash tag every key of a partition starts with."""
        return f"{self.prefix}{{{tag}}}:"

    def job(self, job_id: str) -> str:
        """The job hash."""
        return f"{self.job_prefix(tag_of(job_id))}{job_id}"

    def incoming(self, job_id: str) -> str:
        """A new job's fields within its enqueue transaction (shared/enqueue.py)."""
        return f"{self._in(tag_of(job_id))}incoming:{job_id}"

    def job_prefix(self, tag: str) -> str:
        """The partition's job hashes' keys, less the id (take.lua builds them)."""
        return f"{self._in(tag)}job:"

    def job_pages(self, job_id: str) -> str:
        """The job's finished pages as they come: page number → Page JSON (a hash)."""
        return f"{self.job(job_id)}:pages"

    def job_files(self, job_id: str) -> str:
        """The job's files: figure crops ("images/p1-1.png"), "searchable.pdf" (a hash)."""
        return f"{self.job(job_id)}:files"

    def stream(self, lane: str, tag: str = DEFAULT_TAG) -> str:
        """The lane's stream in one partition; one entry per job."""
        return f"{self._in(tag)}stream:{lane}"

    def streams(self, lane: str) -> list[str]:
        """The lane's stream in every partition."""
        return [self.stream(lane, tag) for tag in self.tags]

    def lane_streams(self) -> list[tuple[str, str]]:
        """(lane, stream) for every lane in every partition: all the streams workers read."""
        return [(lane, stream) for lane in self.lanes for stream in self.streams(lane)]

    def idem(self, tenant: str, key: str, tag: str) -> str:
        """Idempotency-Key → job id, with a TTL."""
        return f"{self._in(tag)}idem:{tenant}:{key}"

    def batch(self, batch_id: str) -> str:
        """The batch hash."""
        return f"{self._in(tag_of(batch_id))}batch:{batch_id}"

    def batch_jobs(self, batch_id: str) -> str:
        """The batch's job ids, in submission order (a list)."""
        return f"{self.batch(batch_id)}:jobs"

    def no_batch(self, tag: str) -> tuple[str, str]:
        """(batch, batch_jobs) for a job of no batch: keys in its slot that never exist.

        A script's keys must all lie in one cluster slot, so "no batch" cannot be ''.
        """
        batch = f"{self._in(tag)}batch:-"  # no batch id starts with "-"
        return batch, f"{batch}:jobs"

    def batch_idem(self, tenant: str, key: str, tag: str) -> str:
        """A batch's Idempotency-Key → batch id, with a TTL."""
        return f"{self._in(tag)}idem-batch:{tenant}:{key}"

    def open_batches(self, tag: str) -> str:
        """The partition's batches not yet sealed: ids scored by their open deadline (ms)."""
        return f"{self._in(tag)}batches-open"

    def tenant_jobs(self, tenant: str, tag: str) -> str:
        """The tenant's recent jobs in a partition: job ids scored by created_at (ms)."""
        return f"{self._in(tag)}tenant:{tenant}:jobs"

    def tenant_active(self, tenant: str, tag: str) -> str:
        """The tenant's jobs waiting or running in a partition (a ZSET by created_at, ms).

        Added with the job, removed by the script that ends it: ZCARD over the partitions
        is the tenant's backlog (OCRQ_MAX_TENANT_BACKLOG).
        """
        return f"{self._in(tag)}tenant:{tenant}:active"

    def webhooks(self, tag: str) -> str:
        """Deliveries to make for the partition's jobs and batches, one entry each."""
        return f"{self._in(tag)}webhooks"

    def dead(self, tag: str) -> str:
        """Poisoned jobs of the partition, for an operator to look at."""
        return f"{self._in(tag)}dead"

    # Fair share (shared/fair.py): beside each lane's stream, in its partition's slot.
    def fair_tenants(self, lane: str, tag: str) -> str:
        """The lane's tenants with jobs waiting, scored by their virtual start (a ZSET)."""
        return f"{self._in(tag)}fair:{lane}:tenants"

    def fair_queue(self, lane: str, tag: str, tenant: str) -> str:
        """The tenant's waiting jobs in the lane, oldest first ("<job> <batch> <cost>", a list)."""
        return f"{self._in(tag)}fair:{lane}:q:{tenant}"

    def fair_taken(self, lane: str, tag: str) -> str:
        """Stream entry → the job it was given ("<job> <batch>"), while the entry is pending."""
        return f"{self._in(tag)}fair:{lane}:taken"

    def fair_clock(self, lane: str, tag: str) -> str:
        """The lane's virtual time: the virtual start of the tenant served last."""
        return f"{self._in(tag)}fair:{lane}:clock"

    # Quotas (shared/quota_store.py): every counter of a tenant in the tenant's own slot, so
    # one script checks and counts them together on a cluster.
    def quota(self, tenant: str, name: str) -> str:
        """One of the tenant's quota counters: ``inflight`` (job → pages, a hash),
        ``inflight_pages``, ``day:<yyyymmdd>``, ``minute:<epoch minute>``."""
        return f"{self.prefix}{{q.{tenant}}}:quota:{name}"

    def usage(self, tenant: str, day: str, tag: str) -> str:
        """The tenant's usage on a UTC day (yyyymmdd) counted in a partition (a hash).

        Fields: jobs, failed, cancelled, pages, pages:<engine>, engine_ms, bytes_in, bytes_out.
        Written by the script that ends a job (exactly once per job), summed over the
        partitions by GET /v1/usage.
        """
        return f"{self._in(tag)}usage:{tenant}:{day}"

    def audit(self) -> str:
        """The audit trail: one stream entry per state-changing call or result read."""
        return f"{self.prefix}audit"

    def lease(self, name: str) -> str:
        """A lease one process of the stack holds at a time (the store sweeper's)."""
        return f"{self.prefix}lease:{name}"

    def replicated(self, tag: str) -> str:
        """A small key the producer writes after a job, to WAIT for replicas on its node."""
        return f"{self._in(tag)}replicated"


def script_source(name: str) -> str:
    """A script's own text, header included, as shipped in the package."""
    return (resources.files("ocrq.shared") / "scripts" / f"{name}.lua").read_text()


def script_needs(source: str) -> list[str]:
    """The helpers a script's ``-- Needs:`` header names (``(nothing)`` for none)."""
    match = _NEEDS.search(source)
    if match is None:
        raise ValueError("a script must declare the helpers it needs: -- Needs: a, b")
    listed = match[1].strip()
    return [] if listed == "(nothing)" else [n.strip() for n in listed.split(",")]


@cache
def load_script(name: str) -> str:
    """The script as sent to Redis: the helpers it needs, then its body."""
    source = script_source(name)
    lib = resources.files("ocrq.shared") / "scripts" / "lib"
    prologue = "".join((lib / f"{need}.lua").read_text() for need in script_needs(source))
    return prologue + source
