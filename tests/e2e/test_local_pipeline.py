"""The laptop path: the local CPU engine, with text layers taken where they are good."""

from __future__ import annotations

import pymupdf
import pytest
from support.documents import scanned_pdf, text_pdf
from support.stack import Stack

pytestmark = pytest.mark.slow


def mixed_pdf() -> bytes:
    """Page 1 born-digital, page 2 a scan (pixels only)."""
    doc = pymupdf.open(stream=text_pdf(words=["alpha", "born", "digital", "words"] * 10))
    scan = pymupdf.open(stream=scanned_pdf(words=["Harbour", "Lantern", "Orchard"]))
    doc.insert_pdf(scan)
    data: bytes = doc.tobytes()
    return data


def test_local_engine_takes_text_layers_and_ocrs_only_the_scanned_page(stack: Stack) -> None:
    stack.start_worker(engine="local", vllm_url="")
    view = stack.wait(stack.submit(mixed_pdf()), timeout_s=120)
    assert view["status"] == "done", view
    result = view["result"]
    assert result["engine"]["name"] == "tesseract"
    first, second = result["pages"]
    assert first["source"] == "text_layer" and "born digital" in first["markdown"]
    assert second["source"] == "engine"
    assert all(w in second["markdown"].lower() for w in ("harbour", "lantern", "orchard"))
    assert stack.fake.requests() == []  # the GPU side was never asked
    stack.assert_clean()


def test_text_layer_off_sends_every_page_to_the_engine(stack: Stack) -> None:
    stack.start_worker(engine="local", vllm_url="")
    view = stack.wait(stack.submit(text_pdf(words=["Quartz"]), text_layer="off"), timeout_s=120)
    page = view["result"]["pages"][0]
    assert page["source"] == "engine" and "quartz" in page["markdown"].lower()


def sideways_scan(words: list[str]) -> bytes:
    """A one-page scan whose page is turned a quarter (a sheet fed in sideways)."""
    doc = pymupdf.open(stream=scanned_pdf(words=words))
    doc[0].set_rotation(90)
    data: bytes = doc.tobytes()
    return data


def test_a_sideways_scan_is_read_upright_and_the_result_says_how_it_was_turned(
    stack: Stack,
) -> None:
    stack.start_worker(engine="local", vllm_url="")
    words = ["Harbour", "Lantern", "Orchard", "Meadow", "Compass", "Ribbon"] * 12  # a page of text
    view = stack.wait(stack.submit(sideways_scan(words), languages="eng"), timeout_s=120)
    assert view["status"] == "done", view
    result = view["result"]
    [page] = result["pages"]
    assert page["rotation"] == 90  # turned back a quarter, counter-clockwise
    assert page["width"] < page["height"]  # the A4 page stands upright again
    assert all(page["markdown"].count(w) >= 10 for w in set(words)), page["markdown"]
    assert (page["warnings"], result["doubtful_pages"]) == ([], 0)
    assert page["scripts"] == ["Latin"] and page["confidence"] > 0.8
