"""Fuzzing the ZIP and JSON batch readers: whatever the body, never a 500, and never a job in
Redis that the answer does not name."""

from __future__ import annotations

import base64
import io
import json
import warnings
import zipfile
from typing import Any

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient
from support.payloads import small_pdf

FUZZ = settings(
    max_examples=60, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip
PDF = small_pdf()
METHODS = [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]
names = st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ["a.pdf", "../../x.pdf", "run.sh\0.pdf", "dir/", "C:\\evil.pdf", "A.PDF"]
)
payloads = st.sampled_from([PDF, PDF[: len(PDF) // 2], b"", b"hello", b"PK\x03\x04junk"])


def job_ids_in(client: redis.Redis) -> set[str]:
    """Every job hash in Redis, by id."""
    return {k.decode().rsplit("job:", 1)[1] for k in client.scan_iter(match="*job:*")}


def batches_in(client: redis.Redis) -> set[bytes]:
    """Every batch hash in Redis (not their job lists)."""
    return {k for k in client.scan_iter(match="*batch:*") if not k.endswith(b":jobs")}


def check_answer(api: TestClient[Any], sync_redis: redis.Redis, send: Any) -> None:
    """The property: a 4xx, or a 2xx naming every job that appeared; nothing else."""
    jobs_before, batches_before = job_ids_in(sync_redis), batches_in(sync_redis)
    r = send()
    assert r.status_code != 500 and r.status_code < 600, r.text[:500]
    new_jobs = job_ids_in(sync_redis) - jobs_before
    if r.status_code >= 400:
        assert r.json()["code"], r.text[:300]
        assert new_jobs == set(), r.text[:300]
        assert batches_in(sync_redis) == batches_before  # no batch left behind either
        return
    assert r.status_code == 202, r.text[:300]
    body = r.json()
    assert new_jobs == {f["id"] for f in body["accepted"]}, body
    assert all(f["code"] for f in body["rejected"]), body


def mutated(data: bytes, cut: int | None, flips: list[tuple[int, int]]) -> bytes:
    """data with bytes flipped at some places, and cut short."""
    out = bytearray(data)
    for position, value in flips:
        if out:
            out[position % len(out)] ^= value or 1
    return bytes(out[:cut] if cut is not None else out)


@st.composite
def zip_bodies(draw: st.DrawFn) -> bytes:
    """A ZIP of a few members, each stored or compressed, then possibly damaged."""
    out = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(out, "w") as archive:
        warnings.simplefilter("ignore")  # two members of one name are part of the fuzz
        for _ in range(draw(st.integers(0, 4))):
            archive.writestr(
                zipfile.ZipInfo(draw(names).replace("\0", "") or "x"), draw(payloads),
                compress_type=draw(st.sampled_from(METHODS)),
            )  # fmt: skip
    body = bytearray(out.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(body))) as archive:  # damage some members' data
        for member in archive.infolist():
            start = member.header_offset + 30 + len(member.filename.encode()) + 4
            if member.compress_size > 24 and draw(st.booleans()):
                at = start + draw(st.integers(0, member.compress_size - 16))
                body[at : at + 12] = bytes(b ^ 0xFF for b in body[at : at + 12])
    cut = draw(st.none() | st.integers(0, len(body)))
    flips = draw(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6))
    return mutated(bytes(body), cut, flips)


@st.composite
def json_bodies(draw: st.DrawFn) -> bytes:
    """A JSON batch of a few documents (some odd), then possibly damaged."""
    documents: list[Any] = []
    for _ in range(draw(st.integers(0, 4))):
        document: dict[str, Any] = {"document": base64.b64encode(draw(payloads)).decode()}
        if draw(st.booleans()):
            document["filename"] = draw(names)
        if draw(st.integers(0, 9)) == 0:
            document[draw(st.text(max_size=8))] = draw(st.integers() | st.text(max_size=8))
        documents.append(document if draw(st.integers(0, 9)) else draw(st.integers() | names))
    body: Any = {"documents": documents}
    if draw(st.integers(0, 9)) == 0:
        body = draw(st.sampled_from([documents, {"docs": documents}, None, "x"]))
    raw = json.dumps(body, ensure_ascii=draw(st.booleans())).encode()
    cut = draw(st.none() | st.integers(0, len(raw)))
    flips = draw(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3))
    return mutated(raw, cut, flips)


@FUZZ
@given(body=zip_bodies())
def test_a_zip_batch_is_never_a_500_and_names_every_job_it_made(
    api: TestClient[Any], sync_redis: redis.Redis, body: bytes
) -> None:
    headers = {"content-type": "application/zip"}
    check_answer(api, sync_redis, lambda: api.post("/v1/batches", content=body, headers=headers))


@FUZZ
@given(body=json_bodies())
def test_a_json_batch_is_never_a_500_and_names_every_job_it_made(
    api: TestClient[Any], sync_redis: redis.Redis, body: bytes
) -> None:
    headers = {"content-type": "application/json"}
    check_answer(api, sync_redis, lambda: api.post("/v1/batches", content=body, headers=headers))
