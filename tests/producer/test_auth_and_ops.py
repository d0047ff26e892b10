"""API keys and tenants; health, readiness, metrics, OpenAPI; the access log."""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar.testing import TestClient
from support.payloads import b64, small_pdf

KEYS = "acme:key-acme,globex:key-globex"


@pytest.fixture
def secured(make_client: Any) -> TestClient[Any]:
    """An API with two tenants."""
    client: TestClient[Any] = make_client(api_keys=KEYS)
    return client


def post_as(api: TestClient[Any], headers: dict[str, str]) -> Any:
    return api.post("/v1/jobs", json={"document": b64(small_pdf())}, headers=headers)


def test_missing_or_wrong_key_is_401(secured: TestClient[Any]) -> None:
    assert post_as(secured, {}).json()["code"] == "unauthorized"
    assert post_as(secured, {}).status_code == 401
    assert post_as(secured, {"authorization": "Bearer wrong"}).status_code == 401
    assert post_as(secured, {"x-api-key": "key-acm"}).status_code == 401


def test_bearer_and_x_api_key_are_both_accepted(secured: TestClient[Any]) -> None:
    assert post_as(secured, {"authorization": "Bearer key-acme"}).status_code == 202
    assert post_as(secured, {"x-api-key": "key-globex"}).status_code == 202


def test_a_job_is_visible_only_to_its_tenant(secured: TestClient[Any]) -> None:
    acme, globex = {"x-api-key": "key-acme"}, {"x-api-key": "key-globex"}
    job_id = post_as(secured, acme).json()["id"]
    assert secured.get(f"/v1/jobs/{job_id}", headers=acme).status_code == 200
    for method, path in [
        ("get", f"/v1/jobs/{job_id}"),
        ("get", f"/v1/jobs/{job_id}/result"),
        ("delete", f"/v1/jobs/{job_id}"),
    ]:
        r = getattr(secured, method)(path, headers=globex)
        assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert secured.get(f"/v1/jobs/{job_id}", headers=acme).json()["status"] == "queued"


def test_a_tenant_lists_only_its_own_jobs(secured: TestClient[Any]) -> None:
    acme, globex = {"x-api-key": "key-acme"}, {"x-api-key": "key-globex"}
    mine = [post_as(secured, acme).json()["id"] for _ in range(2)]
    theirs = post_as(secured, globex).json()["id"]
    assert [j["id"] for j in secured.get("/v1/jobs", headers=acme).json()["jobs"]] == mine[::-1]
    assert [j["id"] for j in secured.get("/v1/jobs", headers=globex).json()["jobs"]] == [theirs]
    assert secured.get("/v1/jobs").status_code == 401


def test_idempotency_keys_are_per_tenant(secured: TestClient[Any]) -> None:
    a = post_as(secured, {"x-api-key": "key-acme", "idempotency-key": "same"}).json()["id"]
    g = post_as(secured, {"x-api-key": "key-globex", "idempotency-key": "same"}).json()["id"]
    assert a != g


def test_healthz_answers_without_redis_and_readyz_says_unavailable(make_client: Any) -> None:
    api = make_client(redis_url="redis://127.0.0.1:1/0", redis_connect_timeout_s=0.5)
    assert api.get("/healthz").json() == {"status": "ok"}
    r = api.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "unavailable"


def test_submit_while_redis_is_down_is_503_not_500(make_client: Any) -> None:
    api = make_client(redis_url="redis://127.0.0.1:1/0", redis_connect_timeout_s=0.5)
    r = post_as(api, {})
    assert r.status_code == 503 and r.json()["code"] == "unavailable"


@pytest.mark.smoke
def test_readyz_is_ready_and_recreates_lost_groups(api: TestClient[Any], sync_redis: Any) -> None:
    sync_redis.flushdb()  # Redis lost its data
    assert api.get("/readyz").json() == {"status": "ready"}
    groups = sync_redis.xinfo_groups("ocrq:{p0}:stream:interactive")
    assert [g["name"] for g in groups] == [b"workers"]


def test_metrics_count_requests_by_route_and_status_and_report_lag(api: TestClient[Any]) -> None:
    post_as(api, {})
    api.get("/v1/jobs/missing")
    text = api.get("/metrics").text
    assert 'ocrq_http_requests_total{route="/v1/jobs",status="202"} 1.0' in text
    assert 'ocrq_http_requests_total{route="/v1/jobs/{job_id}",status="404"} 1.0' in text
    assert 'ocrq_lane_lag{lane="interactive"} 1.0' in text
    assert "ocrq_accepted_bytes_total" in text and "ocrq_enqueue_seconds_bucket" in text


def test_openapi_schema_lists_the_job_routes(api: TestClient[Any]) -> None:
    paths = api.get("/schema/openapi.json").json()["paths"]
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/result"} <= set(paths)


def test_one_access_line_per_request_with_request_tenant_and_job(
    api: TestClient[Any], capfd: pytest.CaptureFixture[str]
) -> None:
    capfd.readouterr()
    job_id = post_as(api, {"x-request-id": "req-42"}).json()["id"]
    lines = [json.loads(x) for x in capfd.readouterr().err.splitlines() if x.startswith("{")]
    access = [x for x in lines if x.get("event") == "request"]
    assert len(access) == 1
    assert access[0]["request_id"] == "req-42" and access[0]["job_id"] == job_id
    assert access[0]["tenant"] == "public" and access[0]["status"] == 202


def test_open_api_is_announced_loudly_at_startup(
    make_client: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    capfd.readouterr()
    make_client()
    assert "api_open" in capfd.readouterr().err


def test_a_console_log_keeps_access_lines_at_debug_level(
    make_client: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    quiet = make_client(log_format="console", log_level="info")
    capfd.readouterr()
    assert quiet.get("/healthz").status_code == 200
    assert "request" not in capfd.readouterr().err
    chatty = make_client(log_format="console", log_level="debug")
    capfd.readouterr()
    assert chatty.get("/healthz").status_code == 200
    assert "request" in capfd.readouterr().err


def test_a_batch_is_visible_only_to_its_tenant(secured: TestClient[Any]) -> None:
    acme, globex = {"x-api-key": "key-acme"}, {"x-api-key": "key-globex"}
    files = [("file", ("a.pdf", small_pdf(), "application/pdf"))]
    batch_id = secured.post("/v1/batches", files=files, headers=acme).json()["id"]
    assert secured.get(f"/v1/batches/{batch_id}", headers=acme).status_code == 200
    for method, path in [
        ("get", f"/v1/batches/{batch_id}"),
        ("get", f"/v1/batches/{batch_id}/results"),
        ("get", f"/v1/batches/{batch_id}/events"),
        ("post", f"/v1/batches/{batch_id}/cancel"),
        ("delete", f"/v1/batches/{batch_id}"),
    ]:
        r = getattr(secured, method)(path, headers=globex)
        assert r.status_code == 404 and r.json()["code"] == "not_found", (method, path)
    assert secured.post("/v1/batches", files=files).status_code == 401
