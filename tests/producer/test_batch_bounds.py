"""POST /v1/batches under hostile input: long names, corrupt ZIP members, the spool's place."""

from __future__ import annotations

import asyncio
import fcntl
import io
import json
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient
from support.payloads import b64, small_pdf

from ocrq.producer.batches.formats import zip_documents
from ocrq.shared.settings import Settings, replace_settings

ZIP = {"content-type": "application/zip"}
NAME_CAP = 64 * 1024


def zip_of(members: dict[str, bytes], method: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def corrupt_member(archive: bytes, name: str) -> bytes:
    """The archive with 16 bytes flipped near the start of that member's compressed data
    (there DEFLATE fails with zlib.error and LZMA with LZMAError, not only a CRC mismatch)."""
    info = zipfile.ZipFile(io.BytesIO(archive)).getinfo(name)
    header = archive[info.header_offset : info.header_offset + 30]
    start = info.header_offset + 30 + int.from_bytes(header[26:28], "little")
    start += int.from_bytes(header[28:30], "little")
    broken = bytearray(archive)
    for i in range(start + 9, start + 25):
        broken[i] ^= 0xFF
    return bytes(broken)


def pdf_members(count: int) -> dict[str, bytes]:
    return {f"scan-{i}.pdf": small_pdf(f"page {i} " * 400) for i in range(count)}


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA])
def test_a_zip_member_with_corrupt_compressed_data_is_refused_and_the_rest_accepted(
    api: TestClient[Any], method: int
) -> None:
    archive = corrupt_member(zip_of(pdf_members(3), method), "scan-1.pdf")
    r = api.post("/v1/batches", content=archive, headers=ZIP)
    assert r.status_code == 202, r.text
    body = r.json()
    assert [f["filename"] for f in body["accepted"]] == ["scan-0.pdf", "scan-2.pdf"]
    [refused] = body["rejected"]
    assert (refused["filename"], refused["code"]) == ("scan-1.pdf", "corrupt_document")
    view = api.get(f"/v1/batches/{body['id']}").json()
    assert view["counts"]["total"] == 2


def test_a_zip_member_whose_crc_does_not_match_is_refused_as_corrupt(
    api: TestClient[Any],
) -> None:
    archive = corrupt_member(zip_of(pdf_members(2), zipfile.ZIP_STORED), "scan-0.pdf")
    r = api.post("/v1/batches", content=archive, headers=ZIP)
    assert r.status_code == 202, r.text
    assert [(f["filename"], f["code"]) for f in r.json()["rejected"]] == [
        ("scan-0.pdf", "corrupt_document")
    ]


def test_a_key_past_64_kib_outside_documents_is_400_naming_it(api: TestClient[Any]) -> None:
    documents = [{"document": b64(small_pdf()), "filename": "a.pdf"}]
    body = json.dumps({"k" * (NAME_CAP + 1): 1, "documents": documents})
    r = api.post("/v1/batches", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "invalid_request"
    assert "64 KiB" in r.json()["message"] and "outside `documents`" in r.json()["message"]


def test_a_value_past_64_kib_after_documents_is_reported_with_the_accepted_ones(
    api: TestClient[Any],
) -> None:
    documents = [{"document": b64(small_pdf()), "filename": "a.pdf"}]
    body = json.dumps({"documents": documents, "note": "v" * (NAME_CAP + 1)})
    r = api.post("/v1/batches", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 202, r.text
    assert len(r.json()["accepted"]) == 1 and r.json()["error"]["code"] == "invalid_request"


def test_a_filename_past_64_kib_refuses_that_document_only(api: TestClient[Any]) -> None:
    documents = [
        {"document": b64(small_pdf()), "filename": "n" * (NAME_CAP + 1)},
        {"document": b64(small_pdf()), "filename": "b.pdf"},
    ]
    r = api.post("/v1/batches", json={"documents": documents})
    assert r.status_code == 202, r.text
    body = r.json()
    assert [f["filename"] for f in body["accepted"]] == ["b.pdf"]
    [refused] = body["rejected"]
    assert refused["code"] == "invalid_request" and "filename" in refused["message"]


def spooled(spool: Path) -> list[Path]:
    """The ZIP files under the spool folder."""
    return sorted(p for p in spool.rglob("*") if p.is_file() and p.suffix == ".zip")


async def held_back(first: bytes, rest: bytes, seen: list[list[Path]], spool: Path) -> Any:
    """The body in two chunks; between them, what the spool folder holds."""
    yield first
    await asyncio.sleep(0)
    seen.append(spooled(spool))
    yield rest


async def drain(parts: AsyncIterator[Any]) -> list[Any]:
    return [part async for part in parts]


def test_a_zip_body_is_spooled_in_the_spool_dir_and_removed_after(
    settings: Settings, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    archive = zip_of(pdf_members(2), zipfile.ZIP_DEFLATED)
    seen: list[list[Path]] = []
    chunks = held_back(archive[:100], archive[100:], seen, spool)
    configured = replace_settings(settings, spool_dir=str(spool))
    parts = asyncio.run(drain(zip_documents(chunks, configured)))
    assert [p.filename for p in parts] == ["scan-0.pdf", "scan-1.pdf"]
    assert len(seen[0]) == 1  # the body was being written there
    assert not spooled(spool)  # and is gone


def test_a_zip_batch_with_every_spool_slot_taken_is_503_with_retry_after(
    make_client: Any, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    api = make_client(spool_dir=str(spool), spool_slots=1)
    archive = zip_of(pdf_members(1), zipfile.ZIP_DEFLATED)
    with (spool / "slot-0.lock").open("a") as held:  # another upload holds the one slot
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = api.post("/v1/batches", content=archive, headers=ZIP)
        assert r.status_code == 503, r.text
        assert r.json()["code"] == "unavailable" and int(r.headers["retry-after"]) > 0
    r = api.post("/v1/batches", content=archive, headers=ZIP)  # the slot is free again
    assert r.status_code == 202, r.text


def test_a_zip_part_of_a_multipart_batch_needs_a_spool_slot_too(
    make_client: Any, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    api = make_client(spool_dir=str(spool), spool_slots=1)
    files = [
        ("file", ("first.pdf", small_pdf(), "application/pdf")),
        ("file", ("more.zip", zip_of(pdf_members(1), zipfile.ZIP_DEFLATED), "application/zip")),
    ]
    with (spool / "slot-0.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = api.post("/v1/batches", files=files)
    assert r.status_code == 202, r.text  # what came before the ZIP part stays accepted
    body = r.json()
    assert [f["filename"] for f in body["accepted"]] == ["first.pdf"]
    assert body["error"]["code"] == "unavailable"
    r = api.post("/v1/batches", files=files)
    assert [f["filename"] for f in r.json()["accepted"]] == ["first.pdf", "scan-0.pdf"]
    assert not list(spool.glob("slot-0/*"))  # the part's spool file is gone
