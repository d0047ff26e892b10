"""The local engine on real receipts and crooked pages: skew, upside down, one-block readings."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest
from PIL import Image, ImageChops, ImageStat
from support.tesseract_scans import markdown_cer, running_tesseract

from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.tesseract import TesseractEngine
from ocrq.shared.schemas import Page

DATA = Path(__file__).parent / "data"
RECEIPTS = Path(__file__).parents[2] / "bench" / "documents" / "quality"  # SOURCES.md there
PROSE = (
    "Harbour pilots guide container ships through the narrow channel at dawn, when the tide "
    "turns and the wind from the estuary drops. Each vessel waits at the outer buoy until a "
    "pilot boards by ladder from a launch. "
) * 5


@pytest.fixture(scope="module")
def engine() -> Iterator[TesseractEngine]:
    """One two-process engine for the module: models load once per process."""
    with running_tesseract(workers=2) as tesseract:
        yield tesseract


def page_image(path: Path, rotation: int = 0) -> PageImage:
    """A file as the rasteriser hands it over, `rotation` being the turn it already made."""
    with Image.open(path) as image:
        width, height = image.size
    kind = "image/jpeg" if path.suffix == ".jpg" else "image/png"
    return PageImage(
        number=1, path=str(path), media_type=kind, width=width, height=height, rotation=rotation
    )


def copy_of(name: str, tmp_path: Path, turn: float = 0.0) -> Path:
    """A receipt from tests/consumer/data, turned by `turn` degrees on white (PNG)."""
    with Image.open(DATA / name) as image:
        turned = image.convert("RGB").rotate(
            turn, resample=Image.Resampling.BICUBIC, expand=True, fillcolor="white"
        )
    target = tmp_path / f"{Path(name).stem}-{turn:g}.png"
    turned.save(target)
    return target


async def read(engine: TesseractEngine, image: PageImage) -> Page:
    [page] = (await engine.recognise([image])).pages
    return page


async def test_a_till_roll_is_read_as_one_block_and_keeps_its_totals(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # Read with Tesseract's page layout, this receipt loses its totals column (the dotted
    # leaders split each row); a narrow page is read as one block, which keeps its rows.
    truth = (DATA / "sroie-001.txt").read_text()
    page = await read(engine, page_image(copy_of("sroie-001.jpg", tmp_path)))

    assert [b.label for b in page.blocks] == ["text"] * len(page.blocks)  # no broken tables
    assert {"60.31", "70.30", "10.00"} <= set(re.findall(r"\d+\.\d\d", page.markdown or ""))
    assert markdown_cer(page, truth) < 0.27  # 0.32 with the page layout alone (the CLI's 0.32 too)


async def test_the_bars_a_receipts_edge_is_read_as_are_not_in_its_text(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # The shadow down this receipt's right edge reads as "|" at lines' ends ("RM Code |")
    # and as lines of their own: confident words on confident lines, never read again.
    page = await read(engine, page_image(Path(shutil.copy(DATA / "sroie-109.jpg", tmp_path))))

    lines = [line.strip() for line in (page.markdown or "").splitlines() if line.strip()]
    assert "BEG GUNI" in lines and "MALAYSIA" in lines
    assert [line for line in lines if line.startswith("|") or line.endswith("|")] == []


async def test_a_receipts_amounts_beside_their_labels_are_read_row_by_row(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # The layout model made the labels and the amounts two regions, read one after the
    # other ("Total Amount: Cash Received Change : 31.00 101.00 70.00").
    receipt = Path(shutil.copy(RECEIPTS / "sroie-005.jpg", tmp_path))
    page = await read(engine, page_image(receipt))

    pairs = [
        [cell.text for cell in block.table.cells if cell.row == row]
        for block in page.blocks
        if block.table is not None and block.table.cols == 2
        for row in range(block.table.rows)
    ]
    assert ["Cash Received", "101.00"] in pairs and ["Change :", "70.00"] in pairs


async def test_a_receipt_turned_upside_down_is_read_the_right_way_up(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    truth = (DATA / "sroie-001.txt").read_text()
    upright = await read(engine, page_image(copy_of("sroie-001.jpg", tmp_path)))
    turned_file = copy_of("sroie-001.jpg", tmp_path, 180)
    given = Image.open(turned_file).convert("L")

    page = await read(engine, page_image(turned_file))

    assert page.rotation == 180
    assert markdown_cer(page, truth) <= markdown_cer(upright, truth) + 0.01
    # The page file now stands as the boxes refer to it: figures are cropped from it.
    now = Image.open(turned_file).convert("L")
    assert ImageStat.Stat(ImageChops.difference(now, given.rotate(180))).mean[0] < 3
    assert ImageStat.Stat(ImageChops.difference(now, given)).mean[0] > 10


async def test_a_receipt_upright_is_not_turned(engine: TesseractEngine, tmp_path: Path) -> None:
    page = await read(engine, page_image(copy_of("sroie-003.jpg", tmp_path), rotation=90))

    assert page.rotation == 0  # the engine's own turn; the rasteriser's is added later


@pytest.mark.parametrize("turn", [-6.0, 4.0])
async def test_a_skewed_receipt_reads_within_a_point_of_the_upright_one(
    engine: TesseractEngine, tmp_path: Path, turn: float
) -> None:
    truth = (DATA / "sroie-001.txt").read_text()
    upright = await read(engine, page_image(copy_of("sroie-001.jpg", tmp_path)))

    page = await read(engine, page_image(copy_of("sroie-001.jpg", tmp_path, turn)))

    assert page.skew == pytest.approx(-turn, abs=0.5)
    assert markdown_cer(page, truth) <= markdown_cer(upright, truth) + 0.01


def prose_render(path: Path, turn: float) -> PageImage:
    """A 150 DPI page of prose turned by `turn` degrees on white."""
    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        assert page.insert_textbox(pymupdf.Rect(60, 60, 535, 780), PROSE, fontsize=12) >= 0
        page.get_pixmap(dpi=150).save(str(path))
    with Image.open(path) as image:
        image.convert("RGB").rotate(turn, expand=True, fillcolor="white").save(path)
    return page_image(path)


async def test_the_words_of_a_skewed_page_keep_boxes_on_the_page_as_it_came(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    image = prose_render(tmp_path / "prose.png", 5.0)
    ink = Image.open(image.path).convert("L")

    output = await engine.recognise([image])
    [page], words = output.pages, output.words[1]

    assert page.skew == pytest.approx(-5.0, abs=0.3)
    assert " ".join(PROSE.split()[:20]) in " ".join((page.markdown or "").split())
    # Each word's box, mapped back from the straightened image, holds that word's ink.
    for word in words:
        x0, y0, x1, y1 = (round(v) for v in word.box)
        assert 0 <= x0 < x1 <= image.width and 0 <= y0 < y1 <= image.height
        assert ImageStat.Stat(ink.crop((x0, y0, x1, y1))).mean[0] < 245, word.text
    for block in page.blocks:
        assert 0 <= block.bbox[0] < block.bbox[2] <= 1 and 0 <= block.bbox[1] < block.bbox[3] <= 1


async def test_an_upright_page_is_neither_straightened_nor_reread(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    image = prose_render(tmp_path / "prose.png", 0.0)

    page = await read(engine, image)

    assert (page.skew, page.reread, page.rotation) == (0.0, False, 0)


async def test_a_receipt_in_capitals_is_read_as_latin_not_russian(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # Tesseract's script detection calls this dot-matrix receipt Cyrillic (confidence 1.0).
    page = await read(engine, page_image(copy_of("sroie-003.jpg", tmp_path)))

    assert page.scripts in ([], ["Latin"])
    assert not re.search(r"[\u0400-\u04ff]", page.markdown or "")
    assert {"JOHOR", "BAHRU", "INVOICE"} <= set((page.markdown or "").upper().split())


async def test_a_receipt_scanned_on_a_sheet_is_read_as_a_till_roll(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # The same receipt in the middle of an A4-shaped scan: the page is not narrow, its text is.
    with Image.open(DATA / "sroie-001.jpg") as receipt:
        sheet = Image.new("RGB", (1420, 2000), "white")
        sheet.paste(receipt.convert("RGB"), (490, 300))
    sheet.save(tmp_path / "sheet.png")

    page = await read(engine, page_image(tmp_path / "sheet.png"))

    assert page.reread is True
    assert [b.label for b in page.blocks] == ["text"] * len(page.blocks)  # no broken tables
    assert {"60.31", "70.30"} <= set(re.findall(r"\d+\.\d\d", page.markdown or ""))
