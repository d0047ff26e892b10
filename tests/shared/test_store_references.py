"""The job store with an object store beside it: documents and results by reference,
per-tenant result TTLs, and what the sweeper asks of Redis."""

from __future__ import annotations

import msgspec
import pytest

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import Field, new_job_fields
from ocrq.shared.schemas import DocumentRef, JobOptions
from ocrq.shared.settings import load_settings, replace_settings
from ocrq.shared.store import JobStore, Outcome

LANE = "interactive"
ME = "w1"


async def enqueue_by_reference(store: JobStore, job_id: str, tenant: str = "acme") -> None:
    ref = DocumentRef(kind="blob", key=f"documents/{tenant}/{job_id}", size=40_000_000)
    fields = new_job_fields(
        job_id=job_id,
        tenant=tenant,
        filename="scan.pdf",
        media_type="application/pdf",
        data=b"",
        options=JobOptions(),
        created_ms=1,
        document=ref,
    )
    created, _ = await store.enqueue(job_id, LANE, fields, None)
    assert created


async def take(store: JobStore) -> tuple[str, str]:
    reply = await store.redis.xreadgroup("workers", ME, {store.keys.stream(LANE): ">"}, count=1)
    entry_id, fields = reply[0][1][0]
    job_id, entry = fields[b"id"].decode(), entry_id.decode()
    assert await store.claim(job_id, LANE, entry, ME) == "ok"
    return job_id, entry


async def test_a_job_by_reference_holds_its_documents_key_and_size_but_no_payload(
    store: JobStore,
) -> None:
    await enqueue_by_reference(store, "job1")
    raw = await store.redis.hgetall(store.keys.job("job1"))
    assert b"payload" not in raw
    assert int(raw[b"size"]) == 40_000_000
    record = await store.read("job1", (Field.DOCUMENT, Field.SIZE, Field.PAYLOAD))
    assert record.payload is None
    assert record.document == DocumentRef(kind="blob", key="documents/acme/job1", size=40_000_000)


async def test_a_poll_never_reads_the_documents_reference(store: JobStore) -> None:
    await enqueue_by_reference(store, "job1")
    assert (await store.read("job1")).document is None


async def test_a_result_in_the_object_store_leaves_only_its_folder_in_redis(
    store: JobStore,
) -> None:
    await enqueue_by_reference(store, "job1")
    job_id, entry = await take(store)
    assert await store.progress(job_id, ME, 1, 2, {1: b'{"number":1}'})
    assert await store.save_files(job_id, ME, {"images/p1-1.png": b"png"})
    outcome = Outcome.stored("results/acme/job1/", 2)
    assert await store.finish(job_id, LANE, entry, ME, outcome)
    record = await store.read(job_id, (Field.STATUS, Field.RESULT, Field.RESULT_REF))
    assert (record.status, record.result, record.result_ref) == ("done", None, "results/acme/job1/")
    # The store holds the pages and files now: Redis keeps none of them.
    assert not await store.redis.exists(store.keys.job_pages(job_id), store.keys.job_files(job_id))


async def test_an_inline_result_keeps_its_pages_for_the_result_ttl(store: JobStore) -> None:
    await enqueue_by_reference(store, "job1")
    job_id, entry = await take(store)
    assert await store.progress(job_id, ME, 1, 1, {1: b'{"number":1}'})
    done = Outcome.done(msgspec.json.encode({"markdown": "x"}), 1)
    assert await store.finish(job_id, LANE, entry, ME, done)
    assert await store.redis.ttl(store.keys.job_pages(job_id)) > 0


async def test_a_tenants_own_result_ttl_applies_to_its_jobs_alone(store: JobStore) -> None:
    settings = replace_settings(store.settings, result_ttls="acme:3600", result_ttl_s=86_400)
    store = JobStore(store.redis, settings)
    for job_id, tenant in (("job1", "acme"), ("job2", "other")):
        await enqueue_by_reference(store, job_id, tenant)
        taken, entry = await take(store)
        assert await store.finish(taken, LANE, entry, ME, Outcome.stored("r/", 1))
    assert 3500 < await store.redis.ttl(store.keys.job("job1")) <= 3600
    assert 86_000 < await store.redis.ttl(store.keys.job("job2")) <= 86_400


async def test_a_cancelled_job_takes_its_tenants_ttl(store: JobStore) -> None:
    store = JobStore(store.redis, replace_settings(store.settings, result_ttls="acme:120"))
    await enqueue_by_reference(store, "job1")
    assert await store.cancel("job1", "acme") == "cancelled"
    assert 0 < await store.redis.ttl(store.keys.job("job1")) <= 120


@pytest.mark.parametrize("raw", ["acme:abc", "acme:10", "acme", ":60"])
def test_a_malformed_result_ttl_is_refused_naming_the_setting(raw: str) -> None:
    with pytest.raises(ValueError, match="OCRQ_RESULT_TTLS"):
        load_settings({"OCRQ_RESULT_TTLS": raw})


@pytest.mark.parametrize("url", ["s3:/bucket", "s3://", "http://host/bucket", "file://rel/path"])
def test_a_blob_url_of_no_known_form_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="OCRQ_BLOB_URL"):
        load_settings({"OCRQ_BLOB_URL": url})


def test_the_two_blob_url_forms_are_accepted() -> None:
    assert load_settings({"OCRQ_BLOB_URL": "s3://bucket/prefix"}).blobs.enabled
    assert load_settings({"OCRQ_BLOB_URL": "file:///var/lib/ocrq"}).blobs.enabled
    assert not load_settings({}).blobs.enabled


async def test_one_process_at_a_time_holds_a_lease(store: JobStore) -> None:
    assert await store.take_lease("blob-sweep", "a", 5)
    assert not await store.take_lease("blob-sweep", "b", 5)
    assert 0 < await store.redis.pttl(store.keys.lease("blob-sweep")) <= 5000


async def test_jobs_exist_answers_for_each_job_in_order(store: JobStore) -> None:
    await enqueue_by_reference(store, "job1")
    assert await store.jobs_exist(["gone", "job1"]) == [False, True]
    assert await store.jobs_exist([]) == []


async def test_a_job_whose_id_the_client_gave_never_overwrites_one_that_exists(
    store: JobStore,
) -> None:
    await enqueue_by_reference(store, "job1")
    fields = {"status": "queued", "tenant": "acme", "lane": LANE, "filename": "second"}
    with pytest.raises(OcrqError) as caught:
        await store.enqueue("job1", LANE, fields, None, given_id=True)
    assert caught.value.code is ErrorCode.CONFLICT
    assert await store.redis.hget(store.keys.job("job1"), "filename") == b"scan.pdf"
    assert await store.redis.xlen(store.keys.stream(LANE)) == 1
