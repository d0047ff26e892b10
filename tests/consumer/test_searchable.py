"""The searchable PDF: the pages as they came, with the words read as invisible text on them.

Pages are real documents made with PyMuPDF, rendered as the worker renders them; where cheap
the words come from the real Tesseract, elsewhere from the drawing itself (exact boxes).
"""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from PIL import Image
from support.documents import garbage_pdf, scanned_pdf

from ocrq.consumer.engines.base import Word
from ocrq.consumer.engines.readings import paragraph_blocks, read_words
from ocrq.consumer.engines.tesseract import tessdata_dir
from ocrq.consumer.orientation import turn_upright
from ocrq.consumer.raster import normalise_image, render_pdf_page
from ocrq.consumer.searchable import build_searchable_pdf
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Block, Page

PDF = "application/pdf"
MAX_PIXELS = 40_000_000
SLACK = 0.01  # points: the extracted box may touch its word's box, not cross it
SENTENCE = "Quarterly ledger shows harbour fees rising sharply after the winter storms"


@pytest.fixture(scope="module")
def tesseract() -> Iterator[Any]:
    """One in-process Tesseract (English, automatic segmentation) for the module."""
    from tesserocr import PSM, PyTessBaseAPI

    with PyTessBaseAPI(path=tessdata_dir(), lang="eng", psm=PSM.AUTO) as api:
        yield api


def read(
    api: Any, image_path: str, number: int, width: int, height: int
) -> tuple[Page, list[Word]]:
    """The page as the Tesseract engine reads it, and its words with their boxes."""
    api.SetImageFile(image_path)
    api.Recognize()
    recognised = read_words(api)
    blocks = paragraph_blocks(recognised, width, height)
    found = [Word(text=word.text, box=word.box) for word in recognised]
    markdown = "\n\n".join(block.text for block in blocks)
    page = Page(number=number, width=width, height=height, markdown=markdown, blocks=blocks)
    return page, found


def drawing(text: str = SENTENCE, size: tuple[float, float] = (595, 842)) -> pymupdf.Document:
    """A one-page vector drawing of ``text`` in large type."""
    doc = pymupdf.open()
    page = doc.new_page(width=size[0], height=size[1])
    assert page.insert_textbox(pymupdf.Rect(60, 80, size[0] - 60, 420), text, fontsize=30) >= 0
    return doc


def drawn_words(doc: pymupdf.Document, zoom: float) -> list[Word]:
    """The drawing's words with their exact boxes, in pixels of a render at ``zoom``."""
    return [
        Word(text=w[4], box=(w[0] * zoom, w[1] * zoom, w[2] * zoom, w[3] * zoom))
        for w in doc[0].get_text("words")
    ]


def extracted(pdf: bytes) -> list[list[tuple[str, pymupdf.Rect]]]:
    """Per page of ``pdf``: its words as PyMuPDF reads them, boxes in displayed points."""
    with pymupdf.open("pdf", pdf) as doc:
        return [
            [(w[4], pymupdf.Rect(w[:4]) * page.rotation_matrix) for w in page.get_text("words")]
            for page in doc
        ]


def page_sizes(pdf: bytes) -> list[tuple[float, float]]:
    with pymupdf.open("pdf", pdf) as doc:
        return [(round(page.rect.width, 2), round(page.rect.height, 2)) for page in doc]


def assert_each_word_inside(
    found: list[tuple[str, pymupdf.Rect]], words: list[Word], to_points: float | tuple[float, float]
) -> None:
    """Word by word, in order: the same text, its box inside the recognised box in points."""
    sx, sy = to_points if isinstance(to_points, tuple) else (to_points, to_points)
    assert [text for text, _ in found] == [word.text for word in words]
    for (_, box), word in zip(found, words, strict=True):
        x0, y0, x1, y1 = word.box
        expected = pymupdf.Rect(x0 * sx, y0 * sy, x1 * sx, y1 * sy)
        assert grown(expected, SLACK).contains(box), (word.text, box, expected)


def grown(rect: pymupdf.Rect, by: float) -> pymupdf.Rect:
    return pymupdf.Rect(rect.x0 - by, rect.y0 - by, rect.x1 + by, rect.y1 + by)


def scan_of(art: pymupdf.Document, path: Path, dpi: int) -> None:
    """Save a PDF whose one page is an image of ``art`` at ``dpi``: no text layer."""
    doc = pymupdf.open()
    page = doc.new_page(width=art[0].rect.width, height=art[0].rect.height)
    page.insert_image(page.rect, pixmap=art[0].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY))
    doc.save(path)


def whitespace_aside(text: str) -> str:
    return "".join(text.split())


# --- scanned PDFs, read by Tesseract ----------------------------------------------------


def test_a_scanned_pdf_reads_back_as_the_text_tesseract_found(
    tesseract: Any, tmp_path: Path
) -> None:
    source = tmp_path / "scan.pdf"
    source.write_bytes(scanned_pdf(pages=2, words=SENTENCE.split()))
    pages, words = [], {}
    for index in range(2):
        image = render_pdf_page(str(source), index, 150, str(tmp_path), MAX_PIXELS)
        page, recognised = read(tesseract, image.path, image.number, image.width, image.height)
        pages.append(page)
        words[page.number] = recognised

    pdf = build_searchable_pdf(str(source), PDF, pages, words, dpi=150)

    assert page_sizes(pdf) == [(595, 842), (595, 842)]
    for page, found in zip(pages, extracted(pdf), strict=True):
        assert page.markdown is not None and "Quarterly" in page.markdown
        assert whitespace_aside(" ".join(t for t, _ in found)) == whitespace_aside(page.markdown)
        assert_each_word_inside(found, words[page.number], 595 / page.width)


def test_the_true_render_scale_places_words_on_a_page_rendered_below_its_dpi(
    tmp_path: Path,
) -> None:
    source = tmp_path / "big.pdf"
    art = drawing(size=(1190, 1684))  # A2: at 300 dpi over the pixel limit below
    scan_of(art, source, 100)
    image = render_pdf_page(str(source), 0, 300, str(tmp_path), max_pixels=4_000_000)
    zoom = image.width / 1190
    assert zoom < 300 / 72
    page = Page(number=1, width=image.width, height=image.height)
    words = drawn_words(art, zoom)

    pdf = build_searchable_pdf(str(source), PDF, [page], {1: words}, dpi=300)

    [found] = extracted(pdf)
    assert_each_word_inside(found, words, (1190 / image.width, 1684 / image.height))


def test_a_page_shown_turned_by_rotate_90_gets_its_words_where_they_are_shown(
    tesseract: Any, tmp_path: Path
) -> None:
    art = drawing()
    doc = pymupdf.open()
    sideways = doc.new_page(width=842, height=595)
    sideways.set_rotation(90)  # shown as a 595 x 842 portrait page
    sideways.insert_image(sideways.rect, pixmap=art[0].get_pixmap(dpi=100), rotate=90)
    source = tmp_path / "rotated.pdf"
    doc.save(source)
    image = render_pdf_page(str(source), 0, 150, str(tmp_path), MAX_PIXELS)
    page, words = read(tesseract, image.path, 1, image.width, image.height)
    assert " ".join(w.text for w in words) == SENTENCE  # the page reads upright as shown

    pdf = build_searchable_pdf(str(source), PDF, [page], {1: words}, dpi=150)

    assert page_sizes(pdf) == [(595, 842)]
    [found] = extracted(pdf)
    assert_each_word_inside(found, words, 595 / image.width)


def test_a_page_with_an_offset_crop_box_gets_its_words_inside_the_crop(
    tesseract: Any, tmp_path: Path
) -> None:
    doc = pymupdf.open()
    sheet = doc.new_page(width=800, height=1000)
    text_area = pymupdf.Rect(150, 120, 700, 500)
    sheet.insert_image(text_area, pixmap=drawing(size=(550, 380))[0].get_pixmap(dpi=120))
    sheet.set_cropbox(pymupdf.Rect(100, 80, 740, 900))
    source = tmp_path / "cropped.pdf"
    doc.save(source)
    image = render_pdf_page(str(source), 0, 150, str(tmp_path), MAX_PIXELS)
    page, words = read(tesseract, image.path, 1, image.width, image.height)
    assert words

    pdf = build_searchable_pdf(str(source), PDF, [page], {1: words}, dpi=150)

    assert page_sizes(pdf) == [(640, 820)]
    [found] = extracted(pdf)
    assert_each_word_inside(found, words, 640 / image.width)


def test_without_words_each_blocks_lines_share_its_box(tesseract: Any, tmp_path: Path) -> None:
    source = tmp_path / "scan.pdf"
    source.write_bytes(scanned_pdf(pages=1, words=SENTENCE.split()))
    image = render_pdf_page(str(source), 0, 150, str(tmp_path), MAX_PIXELS)
    page, _ = read(tesseract, image.path, 1, image.width, image.height)
    [block] = page.blocks
    lines = block.text.splitlines()
    assert len(lines) > 1

    pdf = build_searchable_pdf(str(source), PDF, [page], {}, dpi=150)

    [found] = extracted(pdf)
    assert [t for t, _ in found] == block.text.split()
    x0, y0, x1, y1 = (v * 595 / image.width for v in block.bbox_px)
    step = (y1 - y0) / len(lines)
    first_line = grown(pymupdf.Rect(x0, y0, x1, y0 + step), SLACK)
    assert all(first_line.contains(box) for _, box in found[: len(lines[0].split())])


# --- PDFs as they were ------------------------------------------------------------------


def mixed_pdf(path: Path) -> None:
    """Page 1 born-digital text, page 2 a scan, page 3 born-digital, page 4 a scan."""
    doc = pymupdf.open()
    for number in range(1, 5):
        page = doc.new_page(width=500 + number * 10, height=700)
        text = f"Chapter {number} begins with born digital prose about lighthouses"
        if number % 2:
            page.insert_textbox(pymupdf.Rect(40, 40, 460, 400), text, fontsize=14)
        else:
            page.insert_image(page.rect, pixmap=drawing(text, (510, 700))[0].get_pixmap(dpi=72))
    doc.save(path)


def test_a_born_digital_page_passes_through_unchanged(tmp_path: Path) -> None:
    source = tmp_path / "mixed.pdf"
    mixed_pdf(source)
    born = Page(number=1, width=713, height=972, source="text_layer", markdown="Chapter 1 ...")
    scan = Page(number=2, width=520, height=700)
    words = [Word(text="Chapter", box=(60, 80, 180, 115)), Word(text="2", box=(190, 80, 210, 115))]

    pdf = build_searchable_pdf(str(source), PDF, [born, scan], {1: words, 2: words}, dpi=100)

    with pymupdf.open(source) as original, pymupdf.open("pdf", pdf) as output:
        assert output[0].get_text() == original[0].get_text()  # nothing added, not even once
        assert output[0].read_contents() == original[0].read_contents()
        assert [w[4] for w in output[1].get_text("words")] == ["Chapter", "2"]


def test_only_the_pages_read_are_kept_in_page_order(tmp_path: Path) -> None:
    source = tmp_path / "mixed.pdf"
    mixed_pdf(source)
    read_pages = [
        Page(number=4, width=540, height=700),
        Page(number=1, width=510, height=700, source="text_layer"),
    ]
    words = {4: [Word(text="four", box=(50, 50, 150, 80))]}

    pdf = build_searchable_pdf(str(source), PDF, read_pages, words, dpi=72)

    assert page_sizes(pdf) == [(510, 700), (540, 700)]
    first, second = extracted(pdf)
    assert [t for t, _ in first][:2] == ["Chapter", "1"]
    assert [t for t, _ in second] == ["four"]


# --- images -----------------------------------------------------------------------------


def scan_image(art: pymupdf.Document, dpi: int) -> Image.Image:
    pixmap = art[0].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
    return Image.open(io.BytesIO(pixmap.tobytes("png"))).convert("L")


def test_a_png_becomes_a_page_sized_by_its_own_resolution(tmp_path: Path) -> None:
    art = drawing()
    source = tmp_path / "scan.png"
    scan_image(art, 200).save(source, dpi=(200, 200))
    image = normalise_image(str(source), str(tmp_path), MAX_PIXELS, 10_000)
    words = drawn_words(art, 200 / 72)
    page = Page(number=1, width=image.width, height=image.height)

    pdf = build_searchable_pdf(str(source), "image/png", [page], {1: words}, dpi=100)

    assert page_sizes(pdf) == [
        (round(image.width * 72 / 200, 2), round(image.height * 72 / 200, 2))
    ]
    [found] = extracted(pdf)
    assert_each_word_inside(found, words, 72 / 200)


def test_a_jpeg_without_a_resolution_is_sized_at_the_jobs_dpi_and_kept_as_it_was(
    tmp_path: Path,
) -> None:
    art = drawing()
    source = tmp_path / "scan.jpg"
    scan_image(art, 150).save(source, quality=80)
    with Image.open(source) as image:
        assert "dpi" not in image.info
        width, height = image.size
    words = drawn_words(art, 150 / 72)
    page = Page(number=1, width=width, height=height)

    pdf = build_searchable_pdf(str(source), "image/jpeg", [page], {1: words}, dpi=150)

    assert page_sizes(pdf) == [(round(width * 72 / 150, 2), round(height * 72 / 150, 2))]
    with pymupdf.open("pdf", pdf) as doc:
        [info] = doc[0].get_images()
        assert info[-1] == "DCTDecode" or doc.xref_get_key(info[0], "Filter")[1] == "/DCTDecode"
    assert len(pdf) < source.stat().st_size + 8_000  # the JPEG's own bytes, plus the text
    assert_each_word_inside(extracted(pdf)[0], words, 72 / 150)


def rendered(pdf: bytes, resolution: int) -> Image.Image:
    """The output's first page rendered at ``resolution`` dpi, in RGB."""
    with pymupdf.open("pdf", pdf) as doc:
        pixmap = doc[0].get_pixmap(dpi=resolution, colorspace=pymupdf.csRGB)
    return Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples)


def difference(first: Image.Image, second: Image.Image) -> float:
    """The mean difference of two images of one size, per channel, 0 to 255."""
    from PIL import ImageChops, ImageStat

    assert first.size == second.size
    changed = ImageChops.difference(first.convert("RGB"), second.convert("RGB"))
    return max(ImageStat.Stat(changed).mean)


@pytest.mark.parametrize("mode", ["L", "RGB", "P"])
def test_a_png_keeps_its_own_compressed_pixels(mode: str, tmp_path: Path) -> None:
    art = drawing()
    scan = scan_image(art, 72).convert("RGB")
    scan.paste((200, 30, 40), (0, 0, 120, 60))  # a red stamp: colour must survive
    source = tmp_path / "scan.png"
    scan.convert(mode).save(source)  # no resolution: the job's dpi sizes the page
    page = Page(number=1, width=scan.width, height=scan.height)

    pdf = build_searchable_pdf(str(source), "image/png", [page], {1: drawn_words(art, 1)}, dpi=72)

    assert len(pdf) < source.stat().st_size + 8_000
    assert page_sizes(pdf) == [(595, 842)]
    assert difference(rendered(pdf, 72), scan.convert(mode)) < 0.5


@pytest.mark.parametrize("kind", ["transparent.png", "scan.webp", "scan.bmp"])
def test_images_pymupdf_cannot_embed_as_they_are_are_decoded_once(
    kind: str, tmp_path: Path
) -> None:
    art = drawing()
    scan = scan_image(art, 72).convert("RGBA" if kind.endswith("png") else "RGB")
    source = tmp_path / kind
    if kind.endswith("webp"):
        scan.save(source, lossless=True)
    else:
        scan.save(source)
    page = Page(number=1, width=scan.width, height=scan.height)

    pdf = build_searchable_pdf(str(source), "image/x", [page], {1: drawn_words(art, 1)}, dpi=72)

    with Image.open(source) as image:  # Pillow writes BMPs at 96 dpi
        resolution = float(image.info.get("dpi", (72, 72))[0])
    width, height = (round(v * 72 / resolution, 2) for v in scan.size)
    assert page_sizes(pdf) == [(width, height)]
    assert difference(rendered(pdf, round(resolution)), scan.convert("RGB")) < 2  # resampled
    assert_each_word_inside(extracted(pdf)[0], drawn_words(art, 1), 72 / resolution)


def test_a_jpeg_turned_by_exif_is_shown_upright_from_its_own_bytes(tmp_path: Path) -> None:
    art = drawing()
    upright = scan_image(art, 72).convert("RGB")
    upright.paste((200, 30, 40), (0, 0, 120, 60))
    stored = upright.rotate(90, expand=True)  # a camera held sideways: EXIF 6 turns it back
    exif = Image.Exif()
    exif[0x0112] = 6
    source = tmp_path / "photo.jpg"
    stored.save(source, quality=95, exif=exif, dpi=(72, 72))
    page = Page(number=1, width=upright.width, height=upright.height)

    pdf = build_searchable_pdf(str(source), "image/jpeg", [page], {1: drawn_words(art, 1)}, dpi=72)

    assert page_sizes(pdf) == [(595, 842)]
    assert (
        difference(
            rendered(pdf, 72).crop((0, 0, 100, 50)), Image.new("RGB", (100, 50), (200, 30, 40))
        )
        < 40
    )
    with pymupdf.open("pdf", pdf) as doc:
        assert doc.xref_get_key(doc[0].get_images()[0][0], "Filter")[1] == "/DCTDecode"
    assert_each_word_inside(extracted(pdf)[0], drawn_words(art, 1), 1)


def turned_box(
    box: tuple[float, float, float, float], size: tuple[int, int], degrees: int
) -> pymupdf.Rect:
    """Where ``box`` of an upright image lands once PIL turns it by ``degrees`` (clockwise)."""
    mask = Image.new("L", size, 0)
    x0, y0, x1, y1 = (round(v) for v in box)
    mask.paste(255, (x0, y0, x1, y1))
    return pymupdf.Rect(mask.rotate(-degrees, expand=True).getbbox())


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_a_scan_turned_upright_gets_its_words_where_the_scan_shows_them(
    degrees: int, tmp_path: Path
) -> None:
    art = drawing()
    upright = scan_image(art, 100)
    source = tmp_path / "turned.png"
    upright.rotate(-degrees, expand=True).save(source, dpi=(100, 100))  # fed in turned
    words = drawn_words(art, 100 / 72)  # as the engine reads the page once upright
    page = Page(number=1, width=upright.width, height=upright.height, rotation=degrees)

    pdf = build_searchable_pdf(str(source), "image/png", [page], {1: words}, dpi=100)

    [found] = extracted(pdf)
    assert [t for t, _ in found] == [w.text for w in words]
    for (_, box), word in zip(found, words, strict=True):
        expected = turned_box(word.box, upright.size, degrees) * (72 / 100)
        assert grown(expected, 1).contains(box), (word.text, box, expected)
        assert box.get_area() > 0.8 * expected.get_area()


def test_an_upside_down_scan_is_turned_by_the_classifier_and_read_back(tmp_path: Path) -> None:
    art = drawing()
    source = tmp_path / "upside-down.png"
    scan_image(art, 100).rotate(180).save(source, dpi=(100, 100))
    staged = tmp_path / "staged"
    staged.mkdir()
    turned = turn_upright(normalise_image(str(source), str(staged), MAX_PIXELS, 10_000))
    assert turned.rotation == 180
    words = drawn_words(art, 100 / 72)
    page = Page(number=1, width=turned.width, height=turned.height, rotation=turned.rotation)

    pdf = build_searchable_pdf(str(source), "image/png", [page], {1: words}, dpi=100)

    assert whitespace_aside(" ".join(t for t, _ in extracted(pdf)[0])) == whitespace_aside(SENTENCE)


def test_each_page_of_a_multi_page_tiff_becomes_a_page(tmp_path: Path) -> None:
    arts = [drawing(f"Sheet {n} of the harbour survey", (400 + 50 * n, 600)) for n in (1, 2, 3)]
    frames = [scan_image(art, 100) for art in arts]
    source = tmp_path / "survey.tiff"
    frames[0].save(source, save_all=True, append_images=frames[1:], dpi=(100, 100))
    pages = [Page(number=n, width=frames[n - 1].width, height=frames[n - 1].height) for n in (1, 3)]
    words = {n: drawn_words(arts[n - 1], 100 / 72) for n in (1, 3)}

    pdf = build_searchable_pdf(str(source), "image/tiff", pages, words, dpi=300)

    sizes = [(round(f.width * 0.72, 2), round(f.height * 0.72, 2)) for f in (frames[0], frames[2])]
    assert page_sizes(pdf) == sizes
    first, third = extracted(pdf)
    assert_each_word_inside(first, words[1], 0.72)
    assert_each_word_inside(third, words[3], 0.72)


# --- text -------------------------------------------------------------------------------


def test_cyrillic_and_japanese_words_read_back_as_written(tmp_path: Path) -> None:
    source = tmp_path / "blank.png"
    Image.new("L", (1000, 400), 255).save(source)
    words = [
        Word(text="Съешь", box=(50, 50, 250, 100)),
        Word(text="ещё", box=(270, 50, 380, 100)),
        Word(text="東京都", box=(400, 50, 560, 100)),
        Word(text="café", box=(580, 50, 700, 100)),
    ]
    page = Page(number=1, width=1000, height=400)

    pdf = build_searchable_pdf(str(source), "image/png", [page], {1: words}, dpi=100)

    assert_each_word_inside(extracted(pdf)[0], words, 0.72)


def test_words_without_text_or_box_on_the_page_are_left_out(tmp_path: Path) -> None:
    source = tmp_path / "blank.png"
    Image.new("L", (800, 600), 255).save(source)
    kept = Word(text="kept", box=(700, 500, 900, 560))  # partly off the page: cut to it
    words = [
        Word(text="  ", box=(10, 10, 100, 40)),
        Word(text="nowhere", box=(900, 700, 1000, 760)),
        Word(text="flat", box=(10, 50, 100, 50)),
        kept,
    ]
    page = Page(number=1, width=800, height=600)

    pdf = build_searchable_pdf(str(source), "image/png", [page], {1: words}, dpi=72)

    [found] = extracted(pdf)
    assert [t for t, _ in found] == ["kept"]
    assert pymupdf.Rect(700, 500, 800, 560).contains(found[0][1])


# --- damaged input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "media_type", "data"),
    [
        ("junk.pdf", PDF, garbage_pdf()),
        ("cut.png", "image/png", b"\x89PNG\r\n\x1a\n" + b"\0" * 40),
        ("empty.tiff", "image/tiff", b""),
    ],
)
def test_a_damaged_document_is_a_corrupt_document(
    name: str, media_type: str, data: bytes, tmp_path: Path
) -> None:
    source = tmp_path / name
    source.write_bytes(data)
    page = Page(number=1, width=100, height=100)

    with pytest.raises(OcrqError) as caught:
        build_searchable_pdf(str(source), media_type, [page], {1: []}, dpi=100)

    assert caught.value.code is ErrorCode.CORRUPT_DOCUMENT


def test_a_page_the_pdf_lacks_is_a_corrupt_document(tmp_path: Path) -> None:
    source = tmp_path / "scan.pdf"
    source.write_bytes(scanned_pdf(pages=1))

    with pytest.raises(OcrqError) as caught:
        build_searchable_pdf(str(source), PDF, [Page(number=3, width=9, height=9)], {}, dpi=72)

    assert caught.value.code is ErrorCode.CORRUPT_DOCUMENT


def test_table_cells_are_placed_from_their_own_boxes() -> None:
    from ocrq.consumer.searchable import page_runs
    from ocrq.shared.schemas import Cell, Table

    table = Table(
        rows=1,
        cols=2,
        cells=[
            Cell(row=0, col=0, text="Fee", bbox=[0.1, 0.1, 0.3, 0.2]),
            Cell(row=0, col=1, text="12.50", bbox=[0.3, 0.1, 0.5, 0.2]),
        ],
    )
    figure = Block(label="figure", text="![figure 1](images/p1-1.png)", bbox_px=[0, 0, 9, 9])
    block = Block(label="table", text="| Fee | 12.50 |", bbox_px=[100, 100, 500, 200], table=table)
    page = Page(number=1, width=1000, height=1000, blocks=[figure, block])

    assert page_runs(page, None) == [
        ("Fee", (100.0, 100.0, 300.0, 200.0)),
        ("12.50", (300.0, 100.0, 500.0, 200.0)),
    ]
