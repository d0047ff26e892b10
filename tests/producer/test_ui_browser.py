"""The web page in a real browser against a real stack: upload, follow, view the boxes,
their labels, a table's grid and a figure's image, and every download.

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
from support.documents import scanned_pdf, text_pdf, text_png
from support.invoices import INVOICE_SCHEMA, invoice_pdf
from support.personal import form_pdf
from support.processes import stop
from support.services import start_producer
from support.stack import Stack

from ocrq.shared.schemas import BLOCK_LABELS, FURNITURE
from ocrq.shared.settings import Settings

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TOLERANCE_PX = 1.5
KEY = "key-acme"
# The downloads menu's buttons and the result format each one fetches.
MENU_FORMATS = {
    "dl-md": ("markdown", "md"),
    "dl-json": ("json", "json"),
    "dl-html": ("html", "html"),
    "dl-text": ("text", "txt"),
    "dl-chunks": ("chunks", "ndjson"),
    "dl-pdf": ("pdf", "pdf"),
}  # and dl-fields, for a job with an extract schema: test_the_fields_tab_…


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
    assert boxed, "the fake vLLM and the text layer always give boxes"
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


def result_of(api: str, job_id: str, key: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = fetched(api, f"/v1/jobs/{job_id}/result", key).json()
    return body


def fetched(api: str, path: str, key: str | None = None) -> httpx.Response:
    """What the API itself answers for `path`: what the page's download must equal."""
    headers = {"x-api-key": key} if key else {}
    r = httpx.get(f"{api}{path}", headers=headers, timeout=60)
    assert r.status_code == 200, (path, r.status_code, r.text[:300])
    return r


def downloaded(page: Any, selector: str) -> tuple[str, bytes]:
    """Click `selector` and catch the download it starts: its file name and bytes."""
    with page.expect_download() as download:
        page.locator(selector).click()
    return download.value.suggested_filename, Path(download.value.path()).read_bytes()


def from_menu(page: Any, selector: str) -> tuple[str, bytes]:
    """Open the downloads menu and take one of its items."""
    page.locator("#downloads summary").click()
    return downloaded(page, selector)


def label_name(block: dict[str, Any]) -> str:
    """What the page calls a block: its label in words, and a heading's level."""
    name = block["label"].replace("_", " ")
    return f"{name} {block['level']}" if block["label"] == "heading" else name


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
    legend = page.locator("#legend li").evaluate_all("items => items.map((i) => i.dataset.label)")
    assert set(legend) == {b["label"] for p in pdf["pages"] for b in p["blocks"]}
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
    _, markdown = from_menu(page, "#dl-md")
    assert markdown == fetched(stack.api, f"/v1/jobs/{job_id}/result?format=markdown").content
    assert markdown.decode().strip()
    # No searchable PDF was asked for: the menu does not offer one.
    assert page.locator("#dl-pdf").get_attribute("hidden") is not None
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
        page.fill("#api-key", KEY)
        page.locator("#key-form button").click()
        assert page.evaluate("sessionStorage.getItem('ocrq.apiKey')") == KEY
        assert page.evaluate("localStorage.length") == 0
        drop_file(page, "line.png", "image/png", text_png())
        row = job_row(page, "line.png")
        row.locator(".status.queued").wait_for(timeout=10_000)  # no worker: it stays queued
        job_id = row.get_attribute("data-id")
        r = httpx.get(f"{url}/v1/jobs/{job_id}", headers={"x-api-key": KEY}, timeout=10)
        assert r.status_code == 200 and r.json()["filename"] == "line.png"
        assert row.locator(".options").inner_text() == ""  # the defaults: nothing to say
        console.assert_clean()
        page.close()  # its live stream would hold the producer's shutdown
    finally:
        stop(proc)


def test_the_upload_options_go_with_the_job_and_bad_pages_are_refused_at_once(
    settings: Settings, browser: Any
) -> None:
    proc, url = start_producer(settings.store.redis_url, api_keys=f"acme:{KEY}")
    try:
        page, console = open_page(browser, f"{url}/ui")
        page.fill("#api-key", KEY)
        page.locator("#key-form button").click()
        page.fill("#opt-pages", "2-")
        drop_file(page, "line.png", "image/png", text_png())
        assert "Pages" in page.locator("#notice.error").inner_text()
        assert page.locator("li.job").count() == 0  # nothing was sent
        page.fill("#opt-pages", "1-3,7")
        page.check("#opt-keep-furniture")
        page.check("#opt-searchable-pdf")
        drop_file(page, "seven.pdf", "application/pdf", text_pdf(pages=7))
        row = job_row(page, "seven.pdf")
        row.locator(".status.queued").wait_for(timeout=10_000)
        assert row.locator(".options").inner_text() == "pages 1-3,7, headers kept, PDF kept"
        view = fetched(url, f"/v1/jobs/{row.get_attribute('data-id')}", KEY).json()
        assert view["options"]["pages"] == "1-3,7"
        assert view["options"]["keep_headers_footers"] is True
        assert view["options"]["searchable_pdf"] is True
        console.assert_clean()
        page.close()  # its live stream would hold the producer's shutdown
    finally:
        stop(proc)


def assert_legend_names_every_label(page: Any, result: dict[str, Any]) -> None:
    """One legend entry per label the result holds, in the vocabulary's order, counted."""
    blocks = [b for p in result["pages"] for b in p["blocks"]]
    labels = [label for label in BLOCK_LABELS if any(b["label"] == label for b in blocks)]
    items = page.locator("#legend li")
    assert items.evaluate_all("items => items.map((i) => i.dataset.label)") == labels
    for label in labels:
        count = sum(b["label"] == label for b in blocks)
        entry = page.locator(f'#legend li[data-label="{label}"]')
        assert entry.inner_text().strip() == f"{label.replace('_', ' ')} ({count})"
        dashed = entry.locator(".swatch").evaluate("s => getComputedStyle(s).borderTopStyle")
        assert (dashed == "dashed") == (label in FURNITURE), label


def assert_boxes_are_named_and_selectable(page: Any, blocks: list[dict[str, Any]]) -> None:
    """Each box says its label (and level) on hover; a click selects it and its text."""
    for i, block in enumerate(blocks):
        if len(block.get("bbox") or []) != 4:
            continue  # no box to name (assert_boxes_match counts them)
        box = page.locator(f'#boxes .box[data-i="{i}"]')
        assert box.get_attribute("title") == label_name(block)
        style = box.evaluate("b => getComputedStyle(b).borderTopStyle")
        assert (style == "dashed") == (block["label"] in FURNITURE), block
    h = next(i for i, b in enumerate(blocks) if b["label"] == "heading")
    box = page.locator(f'#boxes .box[data-i="{h}"]')
    box.hover()
    chip = box.evaluate("b => getComputedStyle(b, '::before').content")
    assert chip == f'"{label_name(blocks[h])}"'
    box.click()
    assert page.locator("#text .block.selected").get_attribute("data-i") == str(h)
    assert page.locator("#boxes .box.selected").get_attribute("data-i") == str(h)
    assert label_name(blocks[h]) in page.locator("#selection").inner_text()
    page.keyboard.press("Escape")
    assert page.locator("#boxes .box.selected").count() == 0


def assert_table_panel_is_the_grid(page: Any, api: str, job_id: str, blocks: list[Any]) -> None:
    """The first table's panel: its cells as a table, header cells as <th>, and its CSV."""
    t = next(i for i, b in enumerate(blocks) if b["label"] == "table" and b.get("table"))
    table = blocks[t]["table"]
    grid = page.locator(f'#text .block[data-i="{t}"] table.grid')
    assert grid.locator("tr").count() == table["rows"]
    assert grid.locator("th").count() == sum(bool(c.get("header")) for c in table["cells"])
    cells = sorted(table["cells"], key=lambda c: (c["row"], c["col"]))
    expected = [c["text"].strip() for c in cells if c["text"].strip()]
    shown = [text.strip() for text in grid.locator("td, th").all_inner_texts() if text.strip()]
    assert shown == expected
    n = sum(b["label"] == "table" for b in blocks[: t + 1])  # the first page: no table before
    name, csv = downloaded(page, f'#text .block[data-i="{t}"] a.csv')
    assert name == f"report-table-{n}.csv"
    assert csv == fetched(api, f"/v1/jobs/{job_id}/tables/{n}.csv", KEY).content


def assert_figures_are_shown_and_offered(page: Any, api: str, job_id: str, result: Any) -> None:
    """A figure's thumbnail comes from the images route; the menu offers every image."""
    blocks = result["pages"][0]["blocks"]
    f = next(i for i, b in enumerate(blocks) if b["label"] == "figure" and b.get("image"))
    assert blocks[f]["image"] in result["images"]
    page.wait_for_function(
        """(i) => {
            const image = document.querySelector(`#text .block[data-i="${i}"] img.thumb`);
            return image && image.complete && image.naturalWidth > 0;
        }""",
        arg=f,
    )
    assert (
        page.locator(f'#text .block[data-i="{f}"] img.thumb')
        .get_attribute("src")
        .startswith("blob:")
    )  # fetched with the key: an <img src> of the route itself could not send it
    for image in result["images"]:
        name, data = from_menu(page, f'#dl-figures button[data-image="{image}"]')
        assert name == f"report-{image}"
        assert data == fetched(api, f"/v1/jobs/{job_id}/images/{image}", KEY).content


def assert_every_format_downloads_as_the_api_serves_it(page: Any, api: str, job_id: str) -> None:
    for button, (fmt, ext) in MENU_FORMATS.items():
        name, data = from_menu(page, f"#{button}")
        assert name == f"report.{ext}"
        assert data == fetched(api, f"/v1/jobs/{job_id}/result?format={fmt}", KEY).content, fmt


def test_labels_tables_figures_and_every_download_with_an_api_key(
    stack: Stack, settings: Settings, browser: Any, artifacts: Path
) -> None:
    stack.start_worker()  # it reads the keyed producer's jobs too: one Redis
    proc, url = start_producer(settings.store.redis_url, api_keys=f"acme:{KEY}")
    try:
        page, console = open_page(browser, f"{url}/ui")
        page.fill("#api-key", KEY)
        page.locator("#key-form button").click()
        page.check("#opt-searchable-pdf")
        scan = {"name": "report.pdf", "mimeType": "application/pdf", "buffer": scanned_pdf()}
        page.set_input_files("#file-input", files=[scan])
        row = job_row(page, "report.pdf")
        row.locator(".status.done").wait_for(timeout=90_000)
        job_id = row.get_attribute("data-id")
        result = result_of(url, job_id, KEY)
        blocks = result["pages"][0]["blocks"]
        # The fake model reads a page as every kind of block, a table with spans among them.
        assert {"title", "heading", "table", "figure"} <= {b["label"] for b in blocks}
        assert result["searchable_pdf"] is True
        row.locator(".open").click()
        rendered(page, 1, "image")
        assert_boxes_match(page, blocks)
        assert_legend_names_every_label(page, result)
        assert_boxes_are_named_and_selectable(page, blocks)
        assert_table_panel_is_the_grid(page, url, job_id, blocks)
        assert_figures_are_shown_and_offered(page, url, job_id, result)
        page.screenshot(path=str(artifacts / "labels-tables-figures.png"), full_page=True)
        assert_every_format_downloads_as_the_api_serves_it(page, url, job_id)
        console.assert_clean(artifacts / "console-structure.txt")
        page.close()
    finally:
        stop(proc)


def test_the_fields_tab_lists_each_value_and_hovering_one_draws_its_box_on_the_page(
    stack: Stack, browser: Any, artifacts: Path
) -> None:
    stack.start_worker()
    job_id = stack.submit(invoice_pdf(), extract=INVOICE_SCHEMA, text_layer="auto")
    stack.wait(job_id)
    fields = result_of(stack.api, job_id)["fields"]
    page, console = open_page(browser, f"{stack.api}/ui#job={job_id}")
    rendered(page, 1, "blank")
    page.locator("#tab-fields").click()
    items = page.locator("#fields .field")
    assert items.count() == len(fields["sources"])
    [f] = [i for i, s in enumerate(fields["sources"]) if s["path"] == "total"]
    total = page.locator(f'#fields .field[data-f="{f}"]')
    assert total.locator(".value").inner_text() == "120"  # the number, as JSON writes it
    assert page.locator("#boxes .field-box").count() == 0
    total.hover()
    drawn = page.locator("#boxes .field-box")
    assert drawn.count() == 1 and drawn.get_attribute("data-name") == "total"
    frame, got = page.locator("#page").bounding_box(), drawn.bounding_box()
    x1, y1, _, _ = fields["sources"][f]["boxes"][0]
    assert abs(got["x"] - (frame["x"] + x1 * frame["width"])) <= TOLERANCE_PX
    assert abs(got["y"] - (frame["y"] + y1 * frame["height"])) <= TOLERANCE_PX
    page.locator("#tab-blocks").hover()  # the pointer leaves the fields: the box goes
    assert page.locator("#boxes .field-box").count() == 0
    _, saved = from_menu(page, "#dl-fields")
    assert saved == fetched(stack.api, f"/v1/jobs/{job_id}/result?format=fields").content
    page.screenshot(path=str(artifacts / "fields.png"), full_page=True)
    console.assert_clean(artifacts / "console-fields.txt")


def test_a_redacted_job_shows_black_boxes_where_its_values_were(
    stack: Stack, browser: Any, artifacts: Path
) -> None:
    stack.start_worker()
    job_id = stack.submit(form_pdf(), redact=["email", "iban"], text_layer="auto")
    stack.wait(job_id)
    [first] = result_of(stack.api, job_id)["pages"]
    page, console = open_page(browser, f"{stack.api}/ui#job={job_id}")
    rendered(page, 1, "blank")
    drawn = page.locator("#boxes .redaction-box")
    assert drawn.count() == sum(len(r["boxes"]) for r in first["redactions"]) == 2
    assert "[EMAIL]" in page.locator("#text").inner_text()
    page.screenshot(path=str(artifacts / "redacted.png"), full_page=True)
    console.assert_clean(artifacts / "console-redacted.txt")
