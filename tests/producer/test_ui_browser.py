"""The web page in a real browser against a real stack: upload, follow, view the boxes.

Chromium (Debian's ``chromium`` package) driven by Playwright; the page runs under the
producer's CSP, and any violation it logs fails the test. Screenshots go to
``OCRQ_TEST_ARTIFACTS`` when set, else the test's tmp_path.
"""

from __future__ import annotations

import base64
import io
import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.documents import scanned_pdf, text_png
from support.processes import stop
from support.services import start_producer
from support.stack import Stack

from ocrq.shared.settings import Settings

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TOLERANCE_PX = 1.5


def chromium_path() -> str | None:
    """A Chromium-family executable on this machine (Playwright's own download is not used)."""
    found = [shutil.which(name) for name in BROWSERS]
    return next((path for path in found if path), None)


# Checked before any fixture: no stack is started for a test that cannot run.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        chromium_path() is None, reason="no Chromium executable (apt-get install chromium)"
    ),
]


@pytest.fixture
def browser() -> Iterator[Any]:
    executable = chromium_path()
    assert executable is not None  # the module is skipped otherwise
    with playwright_sync.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("OCRQ_TEST_ARTIFACTS") or tmp_path) / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Console:
    """What the page logged: CSP violations and uncaught errors fail the test."""

    def __init__(self, page: Any) -> None:
        self.messages: list[str] = []
        self.errors: list[str] = []
        page.on("console", lambda m: self.messages.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def assert_clean(self, log: Path | None = None) -> None:
        if log is not None:  # kept with the screenshots: what the page said, warnings too
            log.write_text("\n".join([*self.messages, *self.errors]) + "\n")
        violations = [m for m in self.messages if "Content Security Policy" in m]
        assert violations == [], violations
        assert self.errors == [], self.errors


def open_page(browser: Any, url: str) -> tuple[Any, Console]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    console = Console(page)
    page.goto(url)
    page.wait_for_selector("body[data-ready]")
    return page, console


def drop_file(page: Any, name: str, mime: str, data: bytes) -> None:
    """Drop a file on the drop zone as a person would with the mouse."""
    page.evaluate(
        """([name, mime, b64]) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], name, { type: mime }));
            const zone = document.getElementById("drop");
            zone.dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true }));
        }""",
        [name, mime, base64.b64encode(data).decode()],
    )


def rendered(page: Any, number: int, kind: str) -> None:
    page.wait_for_selector(f'#page[data-page="{number}"][data-rendered="{kind}"]')


def assert_boxes_match(page: Any, blocks: list[dict[str, Any]]) -> None:
    """Each block with a bbox is one box, where bbox x the displayed page puts it."""
    frame = page.locator("#page").bounding_box()
    boxed = [(i, b) for i, b in enumerate(blocks) if len(b.get("bbox") or []) == 4]
    assert boxed, "the fake vLLM always returns boxes"
    boxes = page.locator("#boxes .box")
    assert boxes.count() == len(boxed)
    for i, block in boxed:
        box = page.locator(f'#boxes .box[data-i="{i}"]')
        assert box.get_attribute("data-label") == block["label"]
        got = box.bounding_box()
        x1, y1, x2, y2 = block["bbox"]
        expected = {
            "x": frame["x"] + x1 * frame["width"],
            "y": frame["y"] + y1 * frame["height"],
            "width": (x2 - x1) * frame["width"],
            "height": (y2 - y1) * frame["height"],
        }
        for key, value in expected.items():
            assert abs(got[key] - value) <= TOLERANCE_PX, (block, key, got, expected)


def assert_drawn_from_the_file(page: Any, result_page: dict[str, Any]) -> None:
    """The canvas holds the page image (dark text on white), in the result's proportions."""
    ink, width, height = page.evaluate(
        """() => {
            const canvas = document.getElementById("page-canvas");
            const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
            let dark = 0;
            for (let i = 0; i < pixels.data.length; i += 4) if (pixels.data[i] < 100) dark += 1;
            return [dark, canvas.width, canvas.height];
        }"""
    )
    assert ink > 100, "nothing drawn"
    assert abs(width / height - result_page["width"] / result_page["height"]) < 0.01
    shown = page.locator("#page-canvas").bounding_box()
    frame = page.locator("#page").bounding_box()
    assert abs(shown["width"] - frame["width"]) < 1 and abs(shown["height"] - frame["height"]) < 1


def assert_hover_links_box_and_text(page: Any, blocks: list[dict[str, Any]]) -> None:
    i = next(i for i, b in enumerate(blocks) if b["text"].strip() and len(b["bbox"]) == 4)
    page.locator(f'#boxes .box[data-i="{i}"]').hover()
    highlighted = page.locator("#text .block.hl")
    assert highlighted.count() == 1
    assert highlighted.get_attribute("data-i") == str(i)
    assert highlighted.locator("p").inner_text().strip() == blocks[i]["text"].strip()
    other = next(j for j, b in enumerate(blocks) if j != i and len(b["bbox"]) == 4)
    page.locator(f'#text .block[data-i="{other}"]').hover()
    assert page.locator("#boxes .box.hl").get_attribute("data-i") == str(other)


def result_of(api: str, job_id: str) -> dict[str, Any]:
    r = httpx.get(f"{api}/v1/jobs/{job_id}/result", timeout=30)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def job_row(page: Any, name: str) -> Any:
    return page.locator("li.job", has=page.locator(".name", has_text=name))


def test_uploaded_files_show_live_status_and_their_boxes_over_the_pages(
    stack: Stack, browser: Any, artifacts: Path
) -> None:
    stack.start_worker()
    page, console = open_page(browser, f"{stack.api}/")
    assert page.url.endswith("/ui")
    page.set_input_files(
        "#file-input",
        files=[{"name": "two-pages.pdf", "mimeType": "application/pdf",
                "buffer": scanned_pdf(pages=2)}],
    )  # fmt: skip
    drop_file(page, "line.png", "image/png", text_png(width=900, height=300))
    pdf_row, png_row = job_row(page, "two-pages.pdf"), job_row(page, "line.png")
    for row in (pdf_row, png_row):
        row.locator(".status.done").wait_for(timeout=60_000)
    assert pdf_row.locator(".pages").inner_text() == "2/2 pages"
    assert png_row.locator(".pages").inner_text() == "1/1 pages"
    pdf = result_of(stack.api, pdf_row.get_attribute("data-id"))
    png = result_of(stack.api, png_row.get_attribute("data-id"))

    pdf_row.locator(".open").click()
    rendered(page, 1, "image")
    assert page.locator("#page-label").inner_text() == "Page 1 of 2"
    assert_drawn_from_the_file(page, pdf["pages"][0])
    assert_boxes_match(page, pdf["pages"][0]["blocks"])
    assert_hover_links_box_and_text(page, pdf["pages"][0]["blocks"])
    legend = page.locator("#legend").inner_text()
    assert all(b["label"] in legend for b in pdf["pages"][0]["blocks"])
    page.screenshot(path=str(artifacts / "pdf-page-1.png"), full_page=True)
    page.locator("#next").click()
    rendered(page, 2, "image")
    assert_drawn_from_the_file(page, pdf["pages"][1])
    assert_boxes_match(page, pdf["pages"][1]["blocks"])
    page.screenshot(path=str(artifacts / "pdf-page-2.png"), full_page=True)

    png_row.locator(".open").click()
    rendered(page, 1, "image")
    assert page.locator("#doc-name").inner_text() == "line.png"
    assert_drawn_from_the_file(page, png["pages"][0])
    assert_boxes_match(page, png["pages"][0]["blocks"])
    page.screenshot(path=str(artifacts / "png.png"), full_page=True)
    console.assert_clean(artifacts / "console-upload.txt")


def test_a_job_opened_by_id_shows_its_boxes_on_a_blank_page_of_its_size(
    stack: Stack, browser: Any, artifacts: Path
) -> None:
    stack.start_worker()
    job_id = stack.submit(scanned_pdf(pages=1))
    stack.wait(job_id)
    result = result_of(stack.api, job_id)
    page, console = open_page(browser, f"{stack.api}/ui#job={job_id}")
    rendered(page, 1, "blank")
    first = result["pages"][0]
    frame = page.locator("#page").bounding_box()
    assert abs(frame["width"] / frame["height"] - first["width"] / first["height"]) < 0.01
    assert_boxes_match(page, first["blocks"])
    assert_hover_links_box_and_text(page, first["blocks"])
    with page.expect_download() as markdown:
        page.locator("#dl-md").click()
    assert Path(markdown.value.path()).read_text() == result["markdown"]
    page.screenshot(path=str(artifacts / "blank-page.png"), full_page=True)
    console.assert_clean(artifacts / "console-blank.txt")


def test_a_dropped_zip_is_one_batch_and_its_pages_are_drawn_from_the_archive(
    stack: Stack, browser: Any, artifacts: Path
) -> None:
    stack.start_worker()
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("scans/", "")
        z.writestr("scans/line.png", text_png(width=600, height=200))
        z.writestr("scan.pdf", scanned_pdf(pages=1))
        z.writestr("notes.txt", "not a document")
    page, console = open_page(browser, f"{stack.api}/ui")
    drop_file(page, "bundle.zip", "application/zip", archive.getvalue())
    refused = job_row(page, "bundle.zip: notes.txt")
    refused.locator(".status.refused").wait_for(timeout=30_000)
    assert "unsupported_media_type" in refused.locator(".error").inner_text()
    for name in ("line.png", "scan.pdf"):
        job_row(page, f"bundle.zip: {name}").locator(".status.done").wait_for(timeout=60_000)
    row = job_row(page, "bundle.zip: line.png")
    result = result_of(stack.api, row.get_attribute("data-id"))
    row.locator(".open").click()
    rendered(page, 1, "image")
    assert_drawn_from_the_file(page, result["pages"][0])
    assert_boxes_match(page, result["pages"][0]["blocks"])
    page.screenshot(path=str(artifacts / "zip-member.png"), full_page=True)
    console.assert_clean(artifacts / "console-zip.txt")


def test_with_api_keys_the_page_asks_for_one_and_sends_it(settings: Settings, browser: Any) -> None:
    proc, url = start_producer(settings.store.redis_url, api_keys="acme:key-acme")
    try:
        page, console = open_page(browser, f"{url}/ui")
        assert page.locator("#key-form").is_visible()
        page.fill("#api-key", "key-acme")
        page.locator("#key-form button").click()
        assert page.evaluate("sessionStorage.getItem('ocrq.apiKey')") == "key-acme"
        assert page.evaluate("localStorage.length") == 0
        drop_file(page, "line.png", "image/png", text_png())
        row = job_row(page, "line.png")
        row.locator(".status.queued").wait_for(timeout=10_000)  # no worker: it stays queued
        job_id = row.get_attribute("data-id")
        r = httpx.get(f"{url}/v1/jobs/{job_id}", headers={"x-api-key": "key-acme"}, timeout=10)
        assert r.status_code == 200 and r.json()["filename"] == "line.png"
        console.assert_clean()
        page.close()  # its live stream would hold the producer's shutdown
    finally:
        stop(proc)
