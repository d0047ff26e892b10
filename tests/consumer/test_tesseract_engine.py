"""The default local engine (Tesseract) on real pixels: words, spaces, accents, columns, scripts."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pymupdf
import pytest
from PIL import Image
from support.page_blocks import assert_blocks_fit_the_page
from support.tesseract_scans import running_tesseract

from ocrq.consumer.doubts import review_pages
from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.readings import PSM_SINGLE_BLOCK, known_word_share, read_image
from ocrq.consumer.engines.tesseract import KNOWN_LATIN, TesseractEngine, tessdata_dir

DATA = Path(__file__).parent / "data"
RECEIPTS = Path(__file__).parents[2] / "bench" / "documents" / "fields"
Draw = Callable[[pymupdf.Page], None]


def render(path: Path, draw: Draw) -> PageImage:
    """Draw on an A4 page and save it as a 150 DPI PNG: the engine only ever sees pixels."""
    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        draw(page)
        pixmap = page.get_pixmap(dpi=150)
        pixmap.save(str(path))
    return PageImage(
        number=1, path=str(path), media_type="image/png", width=pixmap.width, height=pixmap.height
    )


def text_at(rect: tuple[float, float, float, float], text: str, size: float = 14) -> Draw:
    def draw(page: pymupdf.Page) -> None:
        assert page.insert_textbox(pymupdf.Rect(*rect), text, fontsize=size) >= 0

    return draw


def picture(path: Path, tmp_path: Path) -> PageImage:
    """A stored page image, as the rasteriser would hand it over (RGB PNG)."""
    target = tmp_path / path.name
    with Image.open(path) as image:
        rgb = image.convert("RGB")
    rgb.save(target)
    return PageImage(
        number=1, path=str(target), media_type="image/png", width=rgb.width, height=rgb.height
    )


@pytest.fixture(scope="module")
def engine() -> Iterator[TesseractEngine]:
    """One two-process engine for the module: models load once per process."""
    with running_tesseract(workers=2) as tesseract:
        yield tesseract


async def test_words_keep_their_spaces(engine: TesseractEngine, tmp_path: Path) -> None:
    sentence = "The harbour lighthouse keeper spread marmalade on warm toast every morning"
    image = render(tmp_path / "p.png", text_at((60, 60, 540, 300), sentence))

    [page] = (await engine.recognise([image])).pages

    assert page.markdown is not None
    assert " ".join(page.markdown.split()) == sentence
    assert (engine.name, page.scripts, page.warnings) == ("tesseract", ["Latin"], [])
    assert page.confidence is not None and page.confidence > 0.8


async def test_accents_survive_with_the_default_french_model(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    sentence = "Le garçon a réservé une chambre près de la forêt pour son été"
    image = render(tmp_path / "p.png", text_at((60, 60, 540, 300), sentence, size=16))

    [page] = (await engine.recognise([image])).pages

    assert page.markdown is not None
    assert {"garçon", "réservé", "près", "forêt", "été"} <= set(page.markdown.split())


async def test_two_columns_are_read_one_after_the_other(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    left = "Apples grow in orchards. " * 12
    right = "Submarines dive under waves. " * 12

    def columns(page: pymupdf.Page) -> None:
        text_at((50, 80, 280, 700), left, 12)(page)
        text_at((315, 80, 545, 700), right, 12)(page)

    [page] = (await engine.recognise([render(tmp_path / "p.png", columns)])).pages

    assert page.markdown is not None
    text = " ".join(page.markdown.split())
    assert text.count("orchards") >= 10 and text.count("waves") >= 10
    assert text.rindex("orchards") < text.index("Submarines")


async def test_blocks_are_boxes_inside_the_page_in_reading_order(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    def two_paragraphs(page: pymupdf.Page) -> None:
        text_at((60, 80, 540, 200), "First paragraph at the top of the page.")(page)
        text_at((60, 500, 540, 600), "Second paragraph further down the page.")(page)

    image = render(tmp_path / "p.png", two_paragraphs)
    [page] = (await engine.recognise([image])).pages

    assert [b.text.split()[0] for b in page.blocks] == ["First", "Second"]
    assert_blocks_fit_the_page(page.blocks, image.width, image.height)
    assert page.blocks[0].bbox_px[3] < page.blocks[1].bbox_px[1]


async def test_a_blank_page_is_empty_not_doubtful(engine: TesseractEngine, tmp_path: Path) -> None:
    image = render(tmp_path / "p.png", lambda page: None)

    [page] = (await engine.recognise([image])).pages
    review_pages([page], [image], engine.reads_scripts, 0.6)

    assert (page.markdown, page.blocks, page.confidence, page.warnings) == ("", [], None, [])


@pytest.mark.parametrize(
    ("file", "script", "words"),
    [
        ("cyrillic-form-top.png", "Cyrillic", {"Налоговая", "декларация", "налоговый", "орган"}),
        ("japanese-page-top.png", "Japanese", set()),
    ],
)
async def test_a_cyrillic_or_japanese_page_is_read_with_its_own_model(
    engine: TesseractEngine, tmp_path: Path, file: str, script: str, words: set[str]
) -> None:
    image = picture(DATA / file, tmp_path)

    [page] = (await engine.recognise([image])).pages
    review_pages([page], [image], engine.reads_scripts, 0.0)

    assert page.scripts == [script]
    assert page.warnings == []
    assert page.markdown is not None
    assert words <= set(page.markdown.split()), page.markdown[:300]
    if script == "Japanese":  # kana and kanji come back, not Latin look-alikes
        assert sum(1 for c in page.markdown if "\u3040" <= c <= "\u9fff") > 50


async def test_a_page_in_a_script_no_model_reads_is_flagged_not_passed_as_clean(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    chinese = "人工智能是计算机科学的一个分支。它企图了解智能的实质。并生产出一种新的智能机器。" * 4
    image = render(
        tmp_path / "p.png",
        lambda page: page.insert_textbox(
            pymupdf.Rect(50, 50, 545, 700), chinese, fontsize=16, fontname="china-s"
        ),
    )

    [page] = (await engine.recognise([image])).pages
    review_pages([page], [image], engine.reads_scripts, 0.6)

    assert page.scripts == ["Han"]
    assert any("Han script, which this engine cannot read" in w for w in page.warnings)
    assert page.markdown is not None and page.markdown.startswith("> **ocrq warning:**")


@pytest.mark.parametrize(
    ("file", "latin"),
    [
        (RECEIPTS / "sroie-031.jpg", True),
        (DATA / "sroie-112.jpg", True),
        (DATA / "cyrillic-form-top.png", False),
        (DATA / "japanese-page-top.png", False),
    ],
)
def test_latin_models_read_a_latin_page_into_known_words_and_other_scripts_into_few(
    file: Path, latin: bool
) -> None:
    from tesserocr import PyTessBaseAPI

    with PyTessBaseAPI(path=tessdata_dir(), lang="eng+fra", psm=PSM_SINGLE_BLOCK) as api:
        read_image(api, str(file))
        known = known_word_share(api)

    assert (known >= KNOWN_LATIN) is latin, known


async def test_a_latin_receipt_that_osd_takes_for_arabic_is_not_flagged(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # Tesseract's OSD names this receipt's script Arabic (at 0.8); its Latin reading is
    # weak (0.75) but mostly known words, so OSD is not asked.
    image = picture(RECEIPTS / "sroie-031.jpg", tmp_path)

    [page] = (await engine.recognise([image])).pages
    review_pages([page], [image], engine.reads_scripts, 0.0)

    assert page.scripts == ["Latin"]
    assert page.warnings == []
    assert page.markdown is not None and "THANK YOU FOR YOUR PATRONAGE" in page.markdown


async def test_the_job_languages_choose_the_model(engine: TesseractEngine, tmp_path: Path) -> None:
    sentence = "Größere Übungen würden später beginnen"
    image = render(tmp_path / "p.png", text_at((60, 60, 540, 300), sentence, size=16))

    [page] = (await engine.recognise([image], languages="deu")).pages

    assert page.markdown is not None
    assert {"Größere", "Übungen", "würden", "später"} <= set(page.markdown.split())


async def test_a_japanese_page_comes_back_without_spaces_between_its_words(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # Tesseract's Japanese model writes a space after each token it reads ("標準 マー ケッ");
    # Japanese puts none between words.
    image = picture(DATA / "japanese-page-top.png", tmp_path)

    [page] = (await engine.recognise([image])).pages

    assert page.markdown is not None
    kana_or_kanji = "[\u3040-\u30ff\u4e00-\u9fff]"
    assert re.findall(f"{kana_or_kanji} +{kana_or_kanji}", page.markdown) == []
    assert re.search(f"{kana_or_kanji}{{8}}", page.markdown), page.markdown[:300]
