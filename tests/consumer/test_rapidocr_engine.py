"""The local CPU engine on real OCR: pages rendered to pixels with PyMuPDF (no text layer)."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pymupdf
import pytest
from support.page_blocks import assert_blocks_fit_the_page

from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.rapidocr import RapidOcrEngine
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import BLOCK_LABELS
from ocrq.shared.settings import load_settings

Draw = Callable[[pymupdf.Page], None]
FONT_SIZE = 32


def render(path: Path, draw: Draw, number: int = 1) -> PageImage:
    """Draw on an A4 page and save it as a 150 DPI PNG: the engine only ever sees pixels."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    draw(page)
    pixmap = page.get_pixmap(dpi=150)
    pixmap.save(str(path))
    doc.close()
    return PageImage(
        number=number,
        path=str(path),
        media_type="image/png",
        width=pixmap.width,
        height=pixmap.height,
    )


def text_at(rect: tuple[float, float, float, float], text: str) -> Draw:
    def draw(page: pymupdf.Page) -> None:
        assert page.insert_textbox(pymupdf.Rect(*rect), text, fontsize=FONT_SIZE) >= 0

    return draw


def found(words: list[str], markdown: str) -> list[str]:
    return [w for w in words if w.lower() in markdown.lower()]


@pytest.fixture(scope="module")
def engine() -> Iterator[RapidOcrEngine]:
    """One two-process engine for the module: model loading is paid once per process."""
    local = RapidOcrEngine(load_settings({}, local_workers=2))
    yield local
    asyncio.run(local.aclose())


async def test_rendered_words_are_recognised_into_markdown(
    engine: RapidOcrEngine, tmp_path: Path
) -> None:
    words = ["Harbour", "Lighthouse", "Marmalade", "Velocity", "Quantum"]
    image = render(tmp_path / "p.png", text_at((50, 50, 545, 400), " ".join(words)))

    output = await engine.recognise([image])

    [page] = output.pages
    assert page.markdown is not None
    assert len(found(words, page.markdown)) >= 4, page.markdown
    assert (page.number, page.width, page.height) == (1, image.width, image.height)
    assert (engine.name, engine.profile) == ("rapidocr", "local")


async def test_blocks_carry_normalised_and_pixel_boxes_inside_the_page(
    engine: RapidOcrEngine, tmp_path: Path
) -> None:
    image = render(tmp_path / "p.png", text_at((300, 600, 560, 800), "Bottom right corner"))

    [page] = (await engine.recognise([image])).pages

    assert page.blocks
    assert_blocks_fit_the_page(page.blocks, image.width, image.height)
    for block in page.blocks:
        assert block.label in BLOCK_LABELS and block.text
        assert block.confidence is not None and 0 < block.confidence <= 1
    # The text sits in the lower right quarter of the page (x > 300/595, y > 600/842).
    assert min(b.bbox[0] for b in page.blocks) > 0.45
    assert min(b.bbox[1] for b in page.blocks) > 0.65


async def test_blank_page_yields_no_blocks_and_empty_markdown(
    engine: RapidOcrEngine, tmp_path: Path
) -> None:
    image = render(tmp_path / "blank.png", lambda page: None)

    [page] = (await engine.recognise([image])).pages

    assert page.blocks == []
    assert page.markdown == ""


async def test_two_column_page_is_not_interleaved(engine: RapidOcrEngine, tmp_path: Path) -> None:
    left = ["apple", "banana", "cherry", "dragon", "eagle", "falcon"]
    right = ["kitchen", "lemon", "mango", "needle", "orange", "pepper"]

    def draw(page: pymupdf.Page) -> None:
        # Same font and leading on both sides: the rows of the two columns line up.
        text_at((40, 60, 280, 800), "\n".join(left))(page)
        text_at((330, 60, 560, 800), "\n".join(right))(page)

    [page] = (await engine.recognise([render(tmp_path / "cols.png", draw)])).pages

    assert page.markdown is not None
    text = page.markdown.lower()
    left_at = [text.find(w) for w in left if w in text]
    right_at = [text.find(w) for w in right if w in text]
    assert len(left_at) >= 5 and len(right_at) >= 5, page.markdown
    assert max(left_at) < min(right_at), page.markdown


async def test_pages_of_one_call_come_back_in_input_order(
    engine: RapidOcrEngine, tmp_path: Path
) -> None:
    first = render(tmp_path / "a.png", text_at((50, 50, 545, 400), "Zebra crossing"), number=7)
    second = render(tmp_path / "b.png", text_at((50, 50, 545, 400), "Pelican harbour"), number=3)

    output = await engine.recognise([first, second])

    assert [p.number for p in output.pages] == [7, 3]
    markdowns = [(p.markdown or "").lower() for p in output.pages]
    assert "zebra" in markdowns[0] and "pelican" not in markdowns[0]
    assert "pelican" in markdowns[1] and "zebra" not in markdowns[1]
    assert output.usage.requests == 2


async def test_unreadable_image_fails_with_engine_error(
    engine: RapidOcrEngine, tmp_path: Path
) -> None:
    path = tmp_path / "broken.png"
    path.write_bytes(b"this is not an image")
    image = PageImage(number=1, path=str(path), media_type="image/png", width=10, height=10)

    with pytest.raises(OcrqError) as caught:
        await engine.recognise([image])

    assert caught.value.code is ErrorCode.ENGINE_ERROR
    assert "page 1" in caught.value.message and str(path) not in caught.value.message


async def test_call_past_the_timeout_fails_with_timeout(tmp_path: Path) -> None:
    image = render(tmp_path / "blank.png", lambda page: None)
    # A cold pool has to start a process and load the models: far beyond 1 ms.
    slow = RapidOcrEngine(load_settings({}, engine_timeout_s=0.001))
    try:
        with pytest.raises(OcrqError) as caught:
            await slow.recognise([image])
    finally:
        await slow.aclose()

    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.transient


async def test_dead_worker_fails_the_call_as_unavailable_then_is_replaced(
    tmp_path: Path,
) -> None:
    image = render(tmp_path / "blank.png", lambda page: None)
    fragile = RapidOcrEngine(load_settings({}, local_workers=1))
    try:
        before = set(multiprocessing.active_children())
        await fragile.warm_up()
        [worker] = set(multiprocessing.active_children()) - before
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(timeout=10)

        with pytest.raises(OcrqError) as caught:
            await fragile.recognise([image])
        assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE

        [page] = (await fragile.recognise([image])).pages
        assert page.blocks == []
    finally:
        await fragile.aclose()


async def test_closed_engine_fails_as_unavailable(tmp_path: Path) -> None:
    closed = RapidOcrEngine(load_settings({}))
    await closed.aclose()
    image = render(tmp_path / "blank.png", lambda page: None)

    with pytest.raises(OcrqError) as caught:
        await closed.recognise([image])

    assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE
