"""GET /v1/usage: what a tenant used per UTC day, as the scripts that end jobs counted it."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient
from support.jobflow import ME, finish_failed, result_for, take
from support.payloads import b64, small_pdf

from ocrq.shared.errors import ErrorCode
from ocrq.shared.outcome import Outcome, Usage
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore

ACME, GLOBEX, ROOT = {"x-api-key": "key-acme"}, {"x-api-key": "key-globex"}, {"x-api-key": "k0"}
KEYS = "acme:key-acme,globex:key-globex,ops:k0"


@pytest.fixture
def api(make_client: Any) -> TestClient[Any]:
    """Three tenants; ops is an admin."""
    client: TestClient[Any] = make_client(api_keys=KEYS, admin_tenants="ops")
    return client


def today() -> str:
    return datetime.now(UTC).date().isoformat()


def submit(api: TestClient[Any], headers: dict[str, str]) -> int:
    """Submit one PDF; its size in bytes."""
    pdf = small_pdf()
    assert api.post("/v1/jobs", json={"document": b64(pdf)}, headers=headers).status_code == 202
    return len(pdf)


async def finish_with_usage(store: JobStore, pages: int, engine_ms: int) -> int:
    """Take the next job and finish it as read by engine "local"; the result's bytes."""
    job_id, entry = await take(store)
    body = msgspec.json.encode(result_for(job_id, "# used\n"))
    usage = Usage(engine="local", engine_ms=engine_ms, bytes_out=len(body))
    assert await store.finish(job_id, "interactive", entry, ME, Outcome.done(body, pages, usage))
    return len(body)


async def test_usage_sums_a_tenants_ended_jobs_and_leaves_others_at_zero(
    api: TestClient[Any], store: JobStore
) -> None:
    size_in = submit(api, ACME)
    out = await finish_with_usage(store, pages=3, engine_ms=1500)
    size_in += submit(api, ACME)
    await finish_failed(store, ErrorCode.CORRUPT_DOCUMENT)
    report = api.get("/v1/usage", headers=ACME).json()
    assert report["tenant"] == "acme" and report["to"] == today() and len(report["days"]) == 30
    totals = report["totals"]
    assert (totals["jobs"], totals["failed"], totals["cancelled"]) == (2, 1, 0)
    assert totals["pages"] == 3 and totals["pages_by_engine"] == {"local": 3}
    assert totals["engine_seconds"] == 1.5
    assert (totals["bytes_in"], totals["bytes_out"]) == (size_in, out)
    assert report["days"][-1]["day"] == today() and report["days"][-1]["jobs"] == 2
    assert api.get("/v1/usage", headers=GLOBEX).json()["totals"]["jobs"] == 0


async def test_usage_as_csv_has_one_row_per_day_with_the_same_counts(
    api: TestClient[Any], store: JobStore
) -> None:
    submit(api, ACME)
    await finish_with_usage(store, pages=2, engine_ms=400)
    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    r = api.get("/v1/usage", params={"from": yesterday, "format": "csv"}, headers=ACME)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [row["day"] for row in rows] == [yesterday, today()]
    assert rows[0]["jobs"] == "0" and rows[1]["jobs"] == "1"
    assert rows[1]["pages"] == rows[1]["pages:local"] == "2"
    assert rows[1]["engine_seconds"] == "0.4"
    by_accept = api.get(
        "/v1/usage", params={"from": yesterday}, headers={**ACME, "accept": "text/csv"}
    )
    assert by_accept.text == r.text


def test_another_tenants_usage_is_403_unless_the_caller_is_an_admin(
    api: TestClient[Any],
) -> None:
    denied = api.get("/v1/usage", params={"tenant": "globex"}, headers=ACME)
    assert denied.status_code == 403 and denied.json()["code"] == "forbidden"
    assert "OCRQ_ADMIN_TENANTS" in denied.json()["message"]
    own = api.get("/v1/usage", params={"tenant": "acme"}, headers=ACME)
    assert own.status_code == 200
    seen = api.get("/v1/usage", params={"tenant": "globex"}, headers=ROOT)
    assert seen.status_code == 200 and seen.json()["tenant"] == "globex"


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"from": "2026-02-10", "to": "2026-02-01"}, "is after"),
        ({"from": "2024-01-01", "to": "2026-01-01"}, "at most 366"),
        ({"from": "yesterday"}, "YYYY-MM-DD"),
        ({"to": "2026-02-30"}, "YYYY-MM-DD"),
        ({"to": ""}, "YYYY-MM-DD"),
        ({"format": "xml"}, "format"),
    ],
)
def test_a_bad_range_or_format_is_a_400_naming_the_problem(
    api: TestClient[Any], params: dict[str, str], says: str
) -> None:
    r = api.get("/v1/usage", params=params, headers=ACME)
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    assert says in r.json()["message"]


def test_usage_needs_a_credential(api: TestClient[Any]) -> None:
    assert api.get("/v1/usage").status_code == 401


def test_the_openapi_document_declares_usage_audit_and_the_quota_429(
    api: TestClient[Any],
) -> None:
    paths = api.get("/schema/openapi.json").json()["paths"]
    usage = paths["/v1/usage"]["get"]
    assert set(usage["responses"]["200"]["content"]) == {"application/json", "text/csv"}
    assert {p["name"] for p in usage["parameters"]} == {"from", "to", "tenant", "format"}
    audit = paths["/v1/audit"]["get"]
    assert {"from", "to", "tenant", "before", "limit"} <= {p["name"] for p in audit["parameters"]}
    for operation in (usage, audit):
        assert "forbidden" in operation["responses"]["403"]["description"]
    assert "quota_exceeded" in paths["/v1/jobs"]["post"]["responses"]["429"]["description"]
    assert "retry-after" in {
        h.lower() for h in paths["/v1/jobs"]["post"]["responses"]["429"]["headers"]
    }


@pytest.mark.parametrize(("days", "kept"), [(400, "expires"), (0, "for ever")])
async def test_usage_is_kept_the_retention_or_for_ever_at_zero(
    api: TestClient[Any], aredis: Any, settings: Settings, days: int, kept: str
) -> None:
    store = JobStore(aredis, replace_settings(settings, usage_retention_days=days))
    submit(api, ACME)
    await finish_with_usage(store, pages=1, engine_ms=10)
    (key,) = [k async for k in aredis.scan_iter(match="*usage:acme:*")]
    ttl = await aredis.ttl(key)
    assert (ttl == -1) if kept == "for ever" else (399 * 86_400 < ttl <= 400 * 86_400)
