"""Quotas from the API: 429 quota_exceeded with Retry-After and the limit named (OCRQ_QUOTAS)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from litestar.testing import TestClient
from support.documents import text_pdf
from support.payloads import b64, small_pdf

ACME, GLOBEX = {"x-api-key": "key-acme"}, {"x-api-key": "key-globex"}
KEYS = "acme:key-acme,globex:key-globex"


def post(api: TestClient[Any], headers: dict[str, str], pdf: bytes | None = None) -> Any:
    return api.post("/v1/jobs", json={"document": b64(pdf or small_pdf())}, headers=headers)


def assert_429(r: Any, limit: str) -> None:
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["code"] == "quota_exceeded" and limit in body["message"]
    assert "acme" in body["message"] and int(r.headers["retry-after"]) > 0


def test_a_tenant_past_its_concurrent_jobs_gets_429_and_others_are_served(
    make_client: Any,
) -> None:
    api = make_client(api_keys=KEYS, quotas="acme:concurrent_jobs=2")
    assert [post(api, ACME).status_code for _ in range(2)] == [202, 202]
    assert_429(post(api, ACME), "concurrent_jobs")
    assert post(api, GLOBEX).status_code == 202


def test_pages_in_flight_count_the_uploaded_pdfs_pages(make_client: Any) -> None:
    api = make_client(api_keys=KEYS, quotas="*:pages_in_flight=10")
    assert post(api, ACME, text_pdf(pages=6)).status_code == 202
    assert_429(post(api, ACME, text_pdf(pages=6)), "pages_in_flight")
    assert post(api, ACME, text_pdf(pages=4)).status_code == 202


def test_requests_per_minute_are_shared_by_every_producer(make_client: Any) -> None:
    one = make_client(api_keys=KEYS, quotas="acme:requests_per_minute=6")
    two = make_client(api_keys=KEYS, quotas="acme:requests_per_minute=6")
    away_from_the_minutes_turn()
    codes = [(one if n % 2 else two).get("/v1/jobs", headers=ACME).status_code for n in range(8)]
    assert codes == [200] * 6 + [429] * 2
    assert_429(one.get("/v1/jobs", headers=ACME), "requests_per_minute")
    assert one.get("/v1/jobs", headers=GLOBEX).status_code == 200  # no limit of its own


def away_from_the_minutes_turn() -> None:
    """Wait while the minute is about to turn, so that a burst falls in one window."""
    while time.time() % 60 > 50:
        time.sleep(0.5)


def test_a_bad_key_is_answered_401_and_not_counted(make_client: Any) -> None:
    api = make_client(api_keys=KEYS, quotas="*:requests_per_minute=1")
    away_from_the_minutes_turn()
    assert api.get("/v1/jobs", headers={"x-api-key": "wrong"}).status_code == 401
    assert api.get("/v1/jobs", headers=ACME).status_code == 200


@pytest.mark.parametrize("quotas", ["acme:concurrent_jobs=1"])
def test_a_job_that_ends_lets_the_next_upload_in(make_client: Any, quotas: str) -> None:
    api = make_client(api_keys=KEYS, quotas=quotas)
    first = post(api, ACME).json()["id"]
    assert_429(post(api, ACME), "concurrent_jobs")
    assert api.post(f"/v1/jobs/{first}/cancel", headers=ACME).status_code == 200
    assert post(api, ACME).status_code == 202


def test_a_batch_refuses_only_its_documents_past_pages_per_day(make_client: Any) -> None:
    api = make_client(api_keys=KEYS, quotas="acme:pages_per_day=5")
    documents = [{"document": b64(text_pdf(pages=2)), "filename": f"{n}.pdf"} for n in range(4)]
    r = api.post("/v1/batches", json={"documents": documents}, headers=ACME)
    assert r.status_code == 202, r.text
    assert [f["filename"] for f in r.json()["accepted"]] == ["0.pdf", "1.pdf"]
    refused = r.json()["rejected"]
    assert [(f["filename"], f["code"]) for f in refused] == [
        ("2.pdf", "quota_exceeded"),
        ("3.pdf", "quota_exceeded"),
    ]
    assert "pages_per_day" in refused[0]["message"]
