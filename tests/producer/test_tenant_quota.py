"""One tenant cannot fill the queue for all: a per-tenant backlog, 429 quota_exceeded past it."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import TestClient
from support.jobflow import finish_done
from support.payloads import b64, small_pdf

from ocrq.client.errors import QuotaExceeded, error_from_response
from ocrq.client.pacing import retriable
from ocrq.shared.store import JobStore

ACME, GLOBEX = {"x-api-key": "key-acme"}, {"x-api-key": "key-globex"}


@pytest.fixture
def quota(make_client: Any) -> TestClient[Any]:
    """Two tenants, each allowed 2 jobs waiting or running."""
    client: TestClient[Any] = make_client(
        api_keys="acme:key-acme,globex:key-globex", max_tenant_backlog=2
    )
    return client


def post(api: TestClient[Any], headers: dict[str, str], lane: str = "interactive") -> Any:
    body = {"document": b64(small_pdf()), "options": {"lane": lane}}
    return api.post("/v1/jobs", json=body, headers=headers)


def submitted(api: TestClient[Any], headers: dict[str, str], lane: str = "interactive") -> str:
    r = post(api, headers, lane)
    assert r.status_code == 202, r.text
    job_id: str = r.json()["id"]
    return job_id


def assert_over_quota(r: Any) -> None:
    assert r.status_code == 429, r.text
    assert r.json()["code"] == "quota_exceeded" and int(r.headers["retry-after"]) > 0
    assert "acme" in r.json()["message"]
    assert "OCRQ_MAX_TENANT_BACKLOG=2" in r.json()["message"]


def test_a_tenant_at_its_quota_gets_429_while_another_tenant_gets_202(
    quota: TestClient[Any],
) -> None:
    submitted(quota, ACME)
    submitted(quota, ACME, lane="batch")  # both lanes count
    assert_over_quota(post(quota, ACME))
    assert_over_quota(post(quota, ACME, lane="batch"))
    submitted(quota, GLOBEX)
    submitted(quota, GLOBEX, lane="batch")


async def test_a_tenant_gets_room_back_when_its_job_finishes(
    quota: TestClient[Any], store: JobStore
) -> None:
    submitted(quota, ACME)
    submitted(quota, ACME)
    assert_over_quota(post(quota, ACME))
    await finish_done(store)
    submitted(quota, ACME)
    assert_over_quota(post(quota, ACME))


def test_a_tenant_gets_room_back_when_its_job_is_cancelled_or_deleted(
    quota: TestClient[Any],
) -> None:
    first = submitted(quota, ACME)
    second = submitted(quota, ACME)
    assert quota.post(f"/v1/jobs/{first}/cancel", headers=ACME).status_code == 200
    submitted(quota, ACME)
    assert_over_quota(post(quota, ACME))
    assert quota.delete(f"/v1/jobs/{second}", headers=ACME).status_code == 200
    submitted(quota, ACME)
    assert_over_quota(post(quota, ACME))


def test_a_batch_refuses_only_its_documents_over_the_quota(quota: TestClient[Any]) -> None:
    submitted(quota, ACME)
    documents = [{"document": b64(small_pdf()), "filename": f"{n}.pdf"} for n in range(3)]
    r = quota.post("/v1/batches", json={"documents": documents}, headers=ACME)
    assert r.status_code == 202, r.text
    assert [f["filename"] for f in r.json()["accepted"]] == ["0.pdf"]
    refused = r.json()["rejected"]
    assert [(f["filename"], f["code"]) for f in refused] == [
        ("1.pdf", "quota_exceeded"),
        ("2.pdf", "quota_exceeded"),
    ]
    assert "OCRQ_MAX_TENANT_BACKLOG=2" in refused[0]["message"]
    theirs = quota.post("/v1/batches", json={"documents": documents[:2]}, headers=GLOBEX)
    assert theirs.status_code == 202 and len(theirs.json()["accepted"]) == 2


def test_the_client_raises_quota_exceeded_and_does_not_resubmit_blindly(
    quota: TestClient[Any],
) -> None:
    submitted(quota, ACME)
    submitted(quota, ACME)
    err = error_from_response(post(quota, ACME))
    assert isinstance(err, QuotaExceeded) and err.status == 429
    assert err.retry_after and err.retry_after > 0
    assert not retriable(err)  # the tenant's own backlog: its jobs must end first
