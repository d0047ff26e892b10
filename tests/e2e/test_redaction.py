"""Redaction end to end: after it, no personal value is in any output, the PDF's text or its
pixels, Redis or the object store; what is not personal is still there."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pymupdf
import pytest
import redis
from support.personal import KEPT, PERSONAL, form_pdf, form_scan, holds_any, ocr_of_pdf
from support.stack import Stack, running_stack

from ocrq.shared.blobs import open_blob_store
from ocrq.shared.settings import Settings

pytestmark = pytest.mark.slow

KINDS = sorted(set(PERSONAL.values()))
VALUES = list(PERSONAL)
TEXT_FORMATS = ("json", "markdown", "html", "text", "chunks")


def result_in(stack: Stack, job_id: str, fmt: str) -> bytes:
    r = httpx.get(f"{stack.api}/v1/jobs/{job_id}/result?format={fmt}", timeout=60)
    assert r.status_code == 200, (fmt, r.text[:300])
    return r.content


def redacted_job(stack: Stack, document: bytes, **options: Any) -> dict[str, Any]:
    """A job of the form with every kind redacted, waited for; its view."""
    view = stack.wait(stack.submit(document, redact=KINDS, languages="eng", **options), 180)
    assert view["status"] == "done", view
    return view


def assert_no_value_in_any_text_output(stack: Stack, job_id: str) -> None:
    for fmt in TEXT_FORMATS:
        body = result_in(stack, job_id, fmt)
        assert holds_any(body, VALUES) == [], fmt
    page = httpx.get(f"{stack.api}/v1/jobs/{job_id}/pages/1", timeout=30).content
    assert holds_any(page, VALUES) == []
    markdown = result_in(stack, job_id, "markdown").decode()
    assert all(f"[{kind.upper()}]" in markdown for kind in KINDS), markdown
    assert all(word in markdown for word in KEPT), markdown


def assert_pdf_shows_and_holds_no_value(pdf: bytes) -> None:
    doc = pymupdf.open(stream=pdf)
    if folder := os.environ.get("OCRQ_TEST_ARTIFACTS"):  # to look at
        doc[0].get_pixmap(dpi=100).save(str(Path(folder) / f"redacted-{len(pdf)}.png"))
    layer = "\n".join(page.get_text() for page in doc)
    assert holds_any(layer, VALUES) == [] and holds_any(pdf, VALUES) == []
    assert all(word in layer for word in KEPT[:2]), layer  # the rest is still searchable
    seen = ocr_of_pdf(pdf)
    assert holds_any(seen, VALUES) == [], seen
    assert "Harbourside" in seen and "Logistics" in seen, seen  # the OCR can read the page


def test_a_born_digital_form_keeps_no_personal_value_in_any_output(stack: Stack) -> None:
    stack.start_worker(engine="local", vllm_url="")
    view = redacted_job(stack, form_pdf())
    result = view["result"]
    assert result["redacted"] == len(PERSONAL)
    [page] = result["pages"]
    assert sorted(r["kind"] for r in page["redactions"]) == sorted(PERSONAL.values())
    assert all(len(r["boxes"]) == 1 for r in page["redactions"])
    assert_no_value_in_any_text_output(stack, view["id"])
    assert result["searchable_pdf"] is True  # a redacted job always has its redacted PDF
    assert_pdf_shows_and_holds_no_value(result_in(stack, view["id"], "pdf"))


def test_a_scanned_form_is_masked_from_the_engine_s_words_and_burnt_where_they_were(
    stack: Stack,
) -> None:
    stack.start_worker(engine="local", vllm_url="")
    view = redacted_job(stack, form_scan())
    [page] = view["result"]["pages"]
    assert page["source"] == "engine"
    assert sorted(r["kind"] for r in page["redactions"]) == sorted(PERSONAL.values())
    assert_no_value_in_any_text_output(stack, view["id"])
    assert_pdf_shows_and_holds_no_value(result_in(stack, view["id"], "pdf"))


def test_a_sideways_scan_is_burnt_where_its_values_stand_on_the_page_as_it_came(
    stack: Stack,
) -> None:
    stack.start_worker(engine="local", vllm_url="")
    doc = pymupdf.open(stream=form_scan())
    doc[0].set_rotation(90)  # a sheet fed in sideways: the engine reads it turned upright
    view = redacted_job(stack, doc.tobytes())
    [page] = view["result"]["pages"]
    assert page["rotation"] in (90, 270) and len(page["redactions"]) == len(PERSONAL)
    pdf = result_in(stack, view["id"], "pdf")
    upright = pymupdf.open(stream=pdf)
    # The PDF shows the page as it came; turned back as the engine turned it (counter-
    # clockwise, where /Rotate turns clockwise), it reads upright.
    upright[0].set_rotation((360 - page["rotation"]) % 360)
    seen = ocr_of_pdf(upright.tobytes())
    assert holds_any(seen, VALUES) == [] and "Harbourside" in seen, seen
    assert holds_any("".join(p.get_text() for p in upright), VALUES) == []


def redis_dump(settings: Settings) -> bytes:
    """Everything under the stack's prefix in Redis: hashes, strings, streams, lists, sets."""
    client = redis.Redis.from_url(settings.store.redis_url)
    out = bytearray()
    for key in client.scan_iter(match=f"{settings.store.prefix}*"):
        kind = client.type(key)
        if kind == b"hash":
            out += repr(client.hgetall(key)).encode()
        elif kind == b"string":
            out += client.get(key) or b""
        elif kind == b"stream":
            out += repr(client.xrange(key)).encode()
        elif kind == b"list":
            out += repr(client.lrange(key, 0, -1)).encode()
        elif kind in (b"set", b"zset"):
            out += repr(
                client.zrange(key, 0, -1) if kind == b"zset" else client.smembers(key)
            ).encode()
    client.close()
    return bytes(out)


@pytest.fixture
def store_stack(each_blob_settings: Settings, tmp_path: Path) -> Iterator[Stack]:
    """A stack whose results go to an object store: a file:// folder, then SeaweedFS's S3."""
    with running_stack(each_blob_settings, tmp_path) as stack:
        yield stack


def store_objects(settings: Settings) -> dict[str, bytes]:
    """Every object under the test's store prefix, read back."""

    async def read_all() -> dict[str, bytes]:
        store = open_blob_store(settings)
        assert store is not None
        try:
            keys = [info.key async for info in store.list("")]
            return {key: await store.get(key) for key in keys}
        finally:
            await store.aclose()

    return asyncio.run(read_all())


def test_neither_redis_nor_the_store_keeps_the_original_text(store_stack: Stack) -> None:
    stack = store_stack
    stack.start_worker(engine="local", vllm_url="")
    plain = stack.wait(stack.submit(form_pdf(), pages="1"), 120)  # the control: not redacted
    assert holds_any(result_in(stack, plain["id"], "markdown"), VALUES) != []
    httpx.delete(f"{stack.api}/v1/jobs/{plain['id']}", timeout=30).raise_for_status()
    view = redacted_job(stack, form_pdf(), searchable_pdf=True)
    assert holds_any(redis_dump(stack.settings), VALUES) == []
    stored = store_objects(stack.settings)
    assert any(key.endswith(".pdf") for key in stored), sorted(stored)  # results went there
    for key, data in stored.items():
        assert holds_any(data, VALUES) == [], key
    assert "[EMAIL]" in result_in(stack, view["id"], "markdown").decode()


def test_fields_read_from_a_redacted_page_are_masked_too(stack: Stack) -> None:
    stack.start_worker(engine="local", vllm_url="")
    schema = {
        "type": "object",
        "properties": {"email": {"type": "string"}, "name": {"type": "string"}},
    }
    view = redacted_job(stack, form_pdf(), extract=schema)
    fields = view["result"]["fields"]
    assert fields["values"] == {"email": "[EMAIL]", "name": "Jane Roe"}
    assert holds_any(json.dumps(fields), VALUES) == []


@pytest.mark.parametrize(
    ("redact", "problem"),
    [
        (["mail"], "Invalid enum value 'mail'"),
        ([], "name at least one kind"),
        ([{"pattern": "(unclosed"}], "pattern 1 is not a regular expression"),
        ([{"pattern": "x*"}], "matches the empty string"),
    ],
)
def test_a_redact_option_the_worker_could_not_apply_is_refused_with_400(
    stack: Stack, redact: list[Any], problem: str
) -> None:
    body = {"document": base64.b64encode(form_pdf()).decode(), "options": {"redact": redact}}
    r = httpx.post(f"{stack.api}/v1/jobs", json=body, timeout=30)
    assert r.status_code == 400 and problem in r.json()["message"], r.text


def test_unknown_countries_are_refused_and_a_form_field_names_kinds_by_commas(
    stack: Stack,
) -> None:
    files = {"file": ("form.pdf", form_pdf(), "application/pdf")}
    bad = {"redact": "national_id", "redact_countries": "us,zz"}
    r = httpx.post(f"{stack.api}/v1/jobs", files=files, data=bad, timeout=30)
    assert r.status_code == 400 and "zz unknown" in r.json()["message"]
    good = {"redact": "email, phone"}
    r = httpx.post(f"{stack.api}/v1/jobs", files=files, data=good, timeout=30)
    assert r.status_code == 202, r.text
    view = httpx.get(f"{stack.api}/v1/jobs/{r.json()['id']}", timeout=30).json()
    assert view["options"]["redact"] == ["email", "phone"]
