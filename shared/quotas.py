"""Per-tenant limits and fair-share weights (OCRQ_QUOTAS): their form, parsed once.

Two forms, documented in docs/tenancy.md:

- inline: ``*:requests_per_minute=200,concurrent_jobs=400;acme:weight=3,pages_per_day=0``
  (``;`` between tenants, ``,`` between limits, ``*`` the default every tenant starts from);
- a path to a YAML or JSON file holding the same as a mapping: ``{"*": {...}, "acme": {...}}``.

A limit of 0 is no limit. A tenant's own line overrides the default limit by limit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

DEFAULT_TENANT = "*"


class Quota(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One tenant's limits (0: none) and its weight in the lanes' fair share."""

    concurrent_jobs: int = 0  # jobs waiting or running at once
    pages_in_flight: int = 0  # pages of those jobs (a PDF's page count, at upload)
    pages_per_day: int = 0  # pages accepted per UTC day
    requests_per_minute: int = 0  # API requests per minute (a fixed window)
    weight: float = 1.0  # a tenant of weight 2 gets twice the pages of one of weight 1


LIMITS = ("concurrent_jobs", "pages_in_flight", "pages_per_day", "requests_per_minute")


class QuotaTable(msgspec.Struct, frozen=True):
    """Every configured tenant's quota, and the default for the others."""

    default: Quota = Quota()
    tenants: dict[str, Quota] = {}

    def of(self, tenant: str) -> Quota:
        """The tenant's quota: its own line, else the default."""
        return self.tenants.get(tenant, self.default)

    def named(self) -> frozenset[str]:
        """The tenants with a line of their own (metrics label only these)."""
        return frozenset(self.tenants)


def parse_quotas(raw: str) -> QuotaTable:
    """OCRQ_QUOTAS as a table; ValueError naming the entry that is wrong."""
    raw = raw.strip()
    if not raw:
        return QuotaTable()
    if "=" not in raw:  # no limit is named inline: a file
        return _table(_read_file(raw))
    rows: dict[str, dict[str, str]] = {}
    for part in filter(None, (p.strip() for p in raw.split(";"))):
        tenant, sep, limits = part.partition(":")
        if not sep or not tenant.strip():
            raise ValueError(f"OCRQ_QUOTAS entry {part!r} is not tenant:name=value,…")
        row = rows.setdefault(tenant.strip(), {})
        for item in filter(None, (i.strip() for i in limits.split(","))):
            name, eq, value = item.partition("=")
            if not eq:
                raise ValueError(f"OCRQ_QUOTAS entry {item!r} of {tenant!r} is not name=value")
            row[name.strip()] = value.strip()
    return _table(rows)


def _read_file(path: str) -> Any:
    import yaml  # the producer and worker extras bring it; the client never reads quotas

    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ValueError(f"OCRQ_QUOTAS names a file that cannot be read: {path} ({e})") from e
    try:
        return yaml.safe_load(text) or {}  # JSON is YAML too
    except yaml.YAMLError as e:
        raise ValueError(f"OCRQ_QUOTAS file {path} is not YAML or JSON: {e}") from e


def _table(rows: Any) -> QuotaTable:
    if not isinstance(rows, dict):
        raise ValueError("OCRQ_QUOTAS must map tenants to their limits")
    default = _quota(DEFAULT_TENANT, rows.get(DEFAULT_TENANT) or {}, Quota())
    tenants = {
        str(tenant): _quota(str(tenant), row or {}, default)
        for tenant, row in rows.items()
        if tenant != DEFAULT_TENANT
    }
    return QuotaTable(default, tenants)


def _quota(tenant: str, row: Any, base: Quota) -> Quota:
    """A tenant's row over the base quota, checked."""
    if not isinstance(row, dict):
        raise ValueError(f"OCRQ_QUOTAS: the limits of {tenant!r} must be a mapping")
    try:
        quota = msgspec.convert({**msgspec.structs.asdict(base), **row}, Quota, strict=False)
    except msgspec.ValidationError as e:
        raise ValueError(f"OCRQ_QUOTAS: tenant {tenant!r}: {e}") from e
    if any(getattr(quota, name) < 0 for name in LIMITS) or not 0 < quota.weight <= 1000:
        raise ValueError(
            f"OCRQ_QUOTAS: tenant {tenant!r}: limits are >= 0 and weight is in (0, 1000]"
        )
    return quota
