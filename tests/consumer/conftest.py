"""Fixtures for jobs by reference: queue one on a DocumentRef, run a burst worker on them."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from ocrq.consumer.main import serve
from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.blobs.base import BlobStore
from ocrq.shared.blobs.opening import open_blob_store
from ocrq.shared.record import new_job_fields
from ocrq.shared.schemas import DocumentRef, JobOptions
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore, now_ms

TENANT = "t"
Burst = Callable[[Settings], Awaitable[None]]
QueueRef = Callable[..., Awaitable[str]]


@pytest.fixture
def burst(fake: FakeVllm) -> Burst:
    """Run an in-process worker (on the fake vLLM) until every queued job has ended."""

    async def run(settings: Settings) -> None:
        engine = replace_settings(settings, engine="vllm", vllm_url=fake.url)
        await asyncio.wait_for(serve(engine, asyncio.Event(), burst=True), timeout=120)

    return run


@pytest.fixture
def queue_ref(store: JobStore) -> QueueRef:
    """Queue a job on a DocumentRef (its media type "" : sniffed by the worker); its id."""

    async def queue(
        ref: DocumentRef,
        media_type: str = "application/pdf",
        options: JobOptions | None = None,
        filename: str | None = None,
        job_id: str | None = None,
    ) -> str:
        job = job_id or secrets.token_urlsafe(16)
        opts = options or JobOptions()
        fields = new_job_fields(
            job_id=job, tenant=TENANT, filename=filename, media_type=media_type, data=b"",
            options=opts, created_ms=now_ms(), document=ref,
        )  # fmt: skip
        assert (await store.enqueue(job, opts.lane, fields, None))[0]
        return job

    return queue


def blob_ref(
    key: str, data: bytes, *, owned: bool = True, checksum: str | None = None
) -> DocumentRef:
    """A DocumentRef to ``data`` stored at ``key``, with its true checksum unless given."""
    digest = checksum if checksum is not None else "sha256:" + hashlib.sha256(data).hexdigest()
    return DocumentRef(kind="blob", key=key, size=len(data), checksum=digest, owned=owned)


@pytest.fixture
def make_ref() -> Callable[..., DocumentRef]:
    """blob_ref, for test modules (conftest modules are not imported by name)."""
    return blob_ref


@pytest.fixture
async def opened() -> AsyncIterator[Callable[[Settings], BlobStore]]:
    """Open the store a test's settings name; every store opened is closed after the test."""
    stores: list[BlobStore] = []

    def open_for(settings: Settings) -> BlobStore:
        blobs = open_blob_store(settings)
        assert blobs is not None, "these settings name no store"
        stores.append(blobs)
        return blobs

    yield open_for
    for blobs in stores:
        await blobs.aclose()
