"""Where each object lives in the store: every key ocrq writes is made here.

``documents/<tenant>/<job>``      a job's document (inline uploads over OCRQ_INLINE_MAX_BYTES)
``uploads/<tenant>/<upload>``     a presigned upload, until a job takes it
``results/<tenant>/<job>/<name>`` a job's result.json, result.md, images/…, searchable.pdf

Tenants are written percent-encoded, so no tenant name can reach another tenant's keys.
"""

from __future__ import annotations

from urllib.parse import quote

DOCUMENTS = "documents/"
UPLOADS = "uploads/"
RESULTS = "results/"
RESULT_JSON = "result.json"
RESULT_MARKDOWN = "result.md"


def tenant_part(tenant: str) -> str:
    """The tenant as one key segment ("" is written "_")."""
    return quote(tenant, safe="") or "_"


def document_key(tenant: str, job_id: str) -> str:
    """The key of a job's document when the producer wrote it to the store."""
    return f"{DOCUMENTS}{tenant_part(tenant)}/{job_id}"


def upload_key(tenant: str, upload_id: str) -> str:
    """The key a presigned upload writes to."""
    return f"{UPLOADS}{tenant_part(tenant)}/{upload_id}"


def result_prefix(tenant: str, job_id: str) -> str:
    """The folder of a job's result and files ("results/<tenant>/<job>/")."""
    return f"{RESULTS}{tenant_part(tenant)}/{job_id}/"


def result_key(tenant: str, job_id: str, name: str) -> str:
    """One of a job's result objects: ``name`` is "result.json", "images/p1-1.png", …"""
    return result_prefix(tenant, job_id) + name
