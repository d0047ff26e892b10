"""Every Redis key ocrq uses, and the Lua scripts for every state transition.

The scripts live in ``scripts/*.lua``, one per transition of the state machine
(docs/state-machine.md), each with a header naming its KEYS, ARGV, replies and the helper
functions it needs from ``scripts/lib/``. Each checks the current state before it writes,
so a cancel racing a finishing worker, or two workers after a reclaim, cannot lose an
update. They use only commands that Redis 7.0 has.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from ocrq.shared.settings import GROUP, LANES

SCRIPT_NAMES = (
    "claim", "progress", "finish", "touch", "release", "poison", "cancel", "prune",
    "batch_open", "batch_seal", "webhook_state",
)  # fmt: skip
_NEEDS = re.compile(r"^-- Needs: (.*)$", re.MULTILINE)


class Keys:
    """The key layout under one prefix (default ``ocrq:``)."""

    def __init__(self, prefix: str = "ocrq:") -> None:
        self.prefix = prefix
        self.group = GROUP
        self.webhook_group = "webhooks"  # the workers' group on the webhooks stream
        self.lanes = LANES
        self.dead = f"{prefix}dead"
        self.events = f"{prefix}events"
        self.webhooks = f"{prefix}webhooks"  # deliveries to make, one entry each

    def job(self, job_id: str) -> str:
        """The job hash."""
        return f"{self.prefix}job:{job_id}"

    def stream(self, lane: str) -> str:
        """The lane's stream; one entry per job."""
        return f"{self.prefix}stream:{lane}"

    def idem(self, tenant: str, key: str) -> str:
        """Idempotency-Key → job id, with a TTL."""
        return f"{self.prefix}idem:{tenant}:{key}"

    def batch(self, batch_id: str) -> str:
        """The batch hash ('' for no batch, as the scripts take it)."""
        return f"{self.prefix}batch:{batch_id}" if batch_id else ""

    def batch_jobs(self, batch_id: str) -> str:
        """The batch's job ids, in submission order (a list)."""
        return f"{self.prefix}batch:{batch_id}:jobs" if batch_id else ""

    def batch_idem(self, tenant: str, key: str) -> str:
        """A batch's Idempotency-Key → batch id, with a TTL."""
        return f"{self.prefix}idem-batch:{tenant}:{key}"

    def tenant_jobs(self, tenant: str) -> str:
        """The tenant's recent jobs: a sorted set of job ids scored by created_at (ms)."""
        return f"{self.prefix}tenant:{tenant}:jobs"


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
