"""GET/DELETE /v1/jobs/{id}: polling, long-poll, results, cancel, idempotency, backpressure."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis
from litestar.testing import TestClient
from support.jobflow import finish_done, finish_failed, take
from support.payloads import b64, small_pdf

from ocrq.producer.jobs.views import new_job_id
from ocrq.shared.errors import ErrorCode
from ocrq.shared.store import JobStore


def submit(api: TestClient[Any], **headers: str) -> str:
    """Submit a small PDF; its job id."""
    r = api.post("/v1/jobs", json={"document": b64(small_pdf())}, headers=headers)
    assert r.status_code in (200, 202), r.text
    job_id: str = r.json()["id"]
    return job_id


@pytest.mark.smoke
def test_poll_shows_status_progress_and_retry_after_while_pending(api: TestClient[Any]) -> None:
    job_id = submit(api)
    r = api.get(f"/v1/jobs/{job_id}")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "queued" and body["progress"] == {"pages_done": 0, "pages_total": 0}
    assert body["created_at"].endswith("+00:00") and body["result"] is None
    assert r.headers["retry-after"] == "1"


def test_unknown_job_is_404(api: TestClient[Any]) -> None:
    r = api.get("/v1/jobs/nope")
    assert r.status_code == 404 and r.json()["code"] == "not_found"


@pytest.mark.smoke
async def test_done_job_shows_its_result_as_json_and_markdown(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = submit(api)
    await finish_done(store, "# Title\n\nbody text\n")
    view = api.get(f"/v1/jobs/{job_id}").json()
    assert view["status"] == "done" and view["result"]["markdown"] == "# Title\n\nbody text\n"
    assert "retry-after" not in api.get(f"/v1/jobs/{job_id}").headers
    r = api.get(f"/v1/jobs/{job_id}/result")
    assert r.status_code == 200 and r.json()["pages"][0]["number"] == 1
    md = api.get(f"/v1/jobs/{job_id}/result", headers={"accept": "text/markdown"})
    assert md.headers["content-type"] == "text/markdown; charset=utf-8"
    assert md.text == "# Title\n\nbody text\n"


async def test_result_of_a_failed_job_is_409_with_the_cause(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = submit(api)
    await finish_failed(store, ErrorCode.ENCRYPTED_DOCUMENT)
    assert api.get(f"/v1/jobs/{job_id}").json()["error"]["code"] == "encrypted_document"
    r = api.get(f"/v1/jobs/{job_id}/result")
    assert r.status_code == 409 and "encrypted_document" in r.json()["message"]


def test_result_of_a_pending_job_is_409_with_retry_after(api: TestClient[Any]) -> None:
    r = api.get(f"/v1/jobs/{submit(api)}/result")
    assert r.status_code == 409 and r.headers["retry-after"] == "1"


@pytest.mark.smoke
def test_cancel_stops_a_queued_job_and_drops_its_payload(
    api: TestClient[Any], sync_redis: redis.Redis
) -> None:
    job_id = submit(api)
    r = api.post(f"/v1/jobs/{job_id}/cancel")
    assert r.status_code == 200 and r.json() == {"id": job_id, "status": "cancelled"}
    view = api.get(f"/v1/jobs/{job_id}").json()
    assert view["status"] == "cancelled" and view["error"]["code"] == "cancelled"
    assert sync_redis.hexists(f"ocrq:{{p0}}:job:{job_id}", "payload") is False
    # the stream entry stays until a worker skips it: never XDEL an undelivered entry
    assert sync_redis.xlen("ocrq:{p0}:stream:interactive") == 1


async def test_delete_of_a_finished_job_deletes_it(api: TestClient[Any], store: JobStore) -> None:
    job_id = submit(api)
    await finish_done(store)
    assert api.delete(f"/v1/jobs/{job_id}").json()["status"] == "deleted"
    assert api.get(f"/v1/jobs/{job_id}").status_code == 404
    assert api.delete(f"/v1/jobs/{job_id}").status_code == 404


async def test_a_processing_job_can_be_cancelled(api: TestClient[Any], store: JobStore) -> None:
    job_id = submit(api)
    await take(store)
    assert api.post(f"/v1/jobs/{job_id}/cancel").json()["status"] == "cancelled"
    assert api.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"


async def test_cancelling_a_finished_job_is_a_conflict(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = submit(api)
    await finish_done(store)
    r = api.post(f"/v1/jobs/{job_id}/cancel")
    assert r.status_code == 409 and "is done" in r.json()["message"]
    assert api.get(f"/v1/jobs/{job_id}").json()["status"] == "done"


async def test_deleting_an_active_job_cancels_it_then_it_is_gone(
    api: TestClient[Any], store: JobStore, sync_redis: redis.Redis
) -> None:
    job_id = submit(api)
    await take(store)
    assert api.delete(f"/v1/jobs/{job_id}").json() == {"id": job_id, "status": "deleted"}
    assert api.get(f"/v1/jobs/{job_id}").status_code == 404
    assert not sync_redis.exists(f"ocrq:{{p0}}:job:{job_id}")


def test_options_lists_every_method_of_a_path(api: TestClient[Any]) -> None:
    assert api.options("/v1/jobs/x").headers["allow"] == "DELETE, GET, OPTIONS"
    assert api.options("/v1/jobs").headers["allow"] == "GET, OPTIONS, POST"


# --- idempotency and backpressure --------------------------------------------------------


@pytest.mark.smoke
def test_same_idempotency_key_returns_the_first_job(
    api: TestClient[Any], sync_redis: redis.Redis
) -> None:
    first = api.post(
        "/v1/jobs", json={"document": b64(small_pdf())}, headers={"idempotency-key": "k-1"}
    )
    again = api.post(
        "/v1/jobs", json={"document": b64(small_pdf("other"))}, headers={"idempotency-key": "k-1"}
    )
    assert first.status_code == 202 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"
    assert sync_redis.xlen("ocrq:{p0}:stream:interactive") == 1
    assert len(sync_redis.keys("ocrq:{p0}:job:*")) == 1


def test_concurrent_retries_with_one_idempotency_key_make_one_job(
    api: TestClient[Any], sync_redis: redis.Redis
) -> None:
    ids: list[str] = []

    def send() -> None:
        ids.append(submit(api, **{"idempotency-key": "burst"}))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(set(ids)) == 1 and len(ids) == 8
    assert sync_redis.xlen("ocrq:{p0}:stream:interactive") == 1


def test_backlog_over_the_limit_is_503_queue_full_with_retry_after(make_client: Any) -> None:
    api = make_client(max_backlog=2)
    submit(api)
    submit(api)
    r = api.post("/v1/jobs", json={"document": b64(small_pdf())})
    assert r.status_code == 503 and r.json()["code"] == "queue_full"
    assert int(r.headers["retry-after"]) > 0
    # the other lane has its own backlog
    other = api.post("/v1/jobs", json={"document": b64(small_pdf()), "options": {"lane": "batch"}})
    assert other.status_code == 202


# --- long-poll -----------------------------------------------------------------------------


@pytest.mark.smoke
async def test_long_poll_returns_as_soon_as_the_job_changes(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = submit(api)
    started = time.monotonic()
    poll = asyncio.create_task(asyncio.to_thread(api.get, f"/v1/jobs/{job_id}?wait=20"))
    await asyncio.sleep(0.5)
    changed_at = time.monotonic()
    await finish_done(store)
    r = await asyncio.wait_for(poll, 10)
    woke_after = time.monotonic() - changed_at
    assert r.json()["status"] == "done"
    assert time.monotonic() - started < 10  # far from the 20 s timeout
    assert woke_after < 1.0, f"long-poll woke {woke_after:.3f}s after the change"


def test_long_poll_times_out_with_the_unchanged_job(api: TestClient[Any]) -> None:
    job_id = submit(api)
    started = time.monotonic()
    r = api.get(f"/v1/jobs/{job_id}?wait=1")
    assert r.json()["status"] == "queued"
    assert 0.9 <= time.monotonic() - started < 5


def test_wait_over_60_seconds_is_rejected(api: TestClient[Any]) -> None:
    r = api.get(f"/v1/jobs/{submit(api)}?wait=61")
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"


def test_a_poll_never_reads_the_payload(api: TestClient[Any], clean_redis: str) -> None:
    job_id = submit(api)
    seen: list[str] = []
    ready = threading.Event()

    def watch() -> None:
        with redis.Redis.from_url(clean_redis).monitor() as m:
            ready.set()
            for cmd in m.listen():
                seen.append(cmd["command"])
                if "STOP-MONITOR" in cmd["command"]:
                    return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    ready.wait(5)
    time.sleep(0.2)
    api.get(f"/v1/jobs/{job_id}")
    api.get(f"/v1/jobs/{job_id}?wait=1")
    api.get(f"/v1/jobs/{job_id}/result")
    redis.Redis.from_url(clean_redis).echo("STOP-MONITOR")
    watcher.join(5)
    reads = [c for c in seen if job_id in c]
    assert any(c.startswith("HMGET") for c in reads), seen
    assert not [c for c in reads if "payload" in c or c.startswith(("HGETALL", "HGET "))]


def test_job_ids_never_start_with_a_dash_so_a_command_line_takes_them() -> None:
    ids = [new_job_id() for _ in range(5000)]  # about 78 would start with "-" by chance
    assert not [i for i in ids if i.startswith("-")]
    assert len(set(ids)) == len(ids) and {len(i) for i in ids} == {22}


def submit_named(api: TestClient[Any], name: str) -> str:
    r = api.post(f"/v1/jobs?filename={name}", content=small_pdf(), headers=PDF)
    assert r.status_code == 202, r.text
    job_id: str = r.json()["id"]
    return job_id


PDF = {"content-type": "application/pdf"}


def test_the_job_list_is_newest_first_in_pages(api: TestClient[Any]) -> None:
    ids = [submit_named(api, f"doc-{i}.pdf") for i in range(5)]
    first = api.get("/v1/jobs?limit=2").json()
    assert [j["id"] for j in first["jobs"]] == ids[:-3:-1] and first["next_offset"] == 2
    job = first["jobs"][0]
    assert (job["status"], job["filename"], job["media_type"]) == (
        "queued", "doc-4.pdf", "application/pdf"
    )  # fmt: skip
    assert job["progress"] == {"pages_done": 0, "pages_total": 0} and job["created_at"]
    rest = api.get("/v1/jobs?limit=10&offset=2").json()
    assert [j["id"] for j in rest["jobs"]] == ids[2::-1] and rest["next_offset"] is None


async def test_finished_deleted_and_expired_jobs_show_as_they_are(
    api: TestClient[Any], store: JobStore, sync_redis: redis.Redis
) -> None:
    done, deleted, expired = (submit_named(api, n) for n in ("a.pdf", "b.pdf", "c.pdf"))
    await finish_done(store)  # the oldest queued job: `done`
    await finish_done(store)  # then `deleted`'s, which the client then deletes
    assert api.delete(f"/v1/jobs/{deleted}").json()["status"] == "deleted"
    sync_redis.delete(f"ocrq:{{p0}}:job:{expired}")  # as if its TTL ran out
    listed = api.get("/v1/jobs").json()["jobs"]
    assert [(j["id"], j["status"]) for j in listed] == [(done, "done")]
    assert sync_redis.zrange("ocrq:{p0}:tenant:public:jobs", 0, -1) == [done.encode()]


def test_the_index_keeps_only_the_newest_jobs_of_a_tenant(make_client: Any) -> None:
    api = make_client(tenant_index_size=3)
    ids = [submit_named(api, f"{i}.pdf") for i in range(5)]
    assert [j["id"] for j in api.get("/v1/jobs").json()["jobs"]] == ids[:1:-1]


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "offset=-1", "limit=x"])
def test_a_bad_page_is_400(api: TestClient[Any], query: str) -> None:
    r = api.get(f"/v1/jobs?{query}")
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
