"""Inspection, page rendering and image normalisation, on generated documents."""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from support.documents import (
    bmp,
    bomb_png,
    encrypted_pdf,
    garbage_pdf,
    jpeg,
    multipage_tiff,
    png,
    sized_pdf,
    text_pdf,
    text_png,
    tiff,
    truncated_pdf,
    webp,
    zero_page_pdf,
)

from ocrq.consumer.pool import RecyclingPool
from ocrq.consumer.raster import Rasteriser, inspect_document, normalise_image, render_pdf_page
from ocrq.shared.errors import ErrorCode, OcrqError

PDF = "application/pdf"
MAX_PIXELS = 80_000_000
MAX_SIDE = 4096


def _write(tmp_path: Path, data: bytes, name: str = "upload") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _inspect_error(path: str, media_type: str = PDF, max_pages: int = 100) -> OcrqError:
    with pytest.raises(OcrqError) as caught:
        inspect_document(path, media_type, max_pages, MAX_PIXELS)
    return caught.value


def _pixel_size(path: str) -> tuple[int, int]:
    with Image.open(path) as image:
        return image.size


# --- inspection ----------------------------------------------------------------------------


def test_text_pdf_reports_its_page_count(tmp_path: Path) -> None:
    assert inspect_document(_write(tmp_path, text_pdf(pages=5)), PDF, 100, MAX_PIXELS) == 5


def test_encrypted_pdf_fails_with_encrypted_document(tmp_path: Path) -> None:
    error = _inspect_error(_write(tmp_path, encrypted_pdf()))
    assert error.code is ErrorCode.ENCRYPTED_DOCUMENT


def test_truncated_pdf_fails_with_corrupt_document(tmp_path: Path) -> None:
    error = _inspect_error(_write(tmp_path, truncated_pdf()))
    assert error.code is ErrorCode.CORRUPT_DOCUMENT


def test_zero_page_pdf_fails_with_corrupt_document_saying_no_pages(tmp_path: Path) -> None:
    error = _inspect_error(_write(tmp_path, zero_page_pdf()))
    assert error.code is ErrorCode.CORRUPT_DOCUMENT
    assert "no pages" in error.message


def test_garbage_after_a_pdf_header_fails_with_corrupt_document(tmp_path: Path) -> None:
    error = _inspect_error(_write(tmp_path, garbage_pdf()))
    assert error.code is ErrorCode.CORRUPT_DOCUMENT


def test_pdf_over_max_pages_fails_with_too_many_pages(tmp_path: Path) -> None:
    error = _inspect_error(_write(tmp_path, text_pdf(pages=4)), max_pages=3)
    assert error.code is ErrorCode.TOO_MANY_PAGES
    assert "4 pages" in error.message


@pytest.mark.parametrize(
    ("media_type", "data"),
    [
        ("image/png", text_png()),
        ("image/jpeg", jpeg(320, 200)),
        ("image/webp", webp()),
        ("image/tiff", tiff()),
        ("image/bmp", bmp()),
    ],
)
def test_an_image_is_one_page(tmp_path: Path, media_type: str, data: bytes) -> None:
    assert inspect_document(_write(tmp_path, data), media_type, 1, MAX_PIXELS) == 1


def test_image_over_max_pixels_fails_with_image_too_large(tmp_path: Path) -> None:
    path = _write(tmp_path, png(2000, 1000))
    with pytest.raises(OcrqError) as caught:
        inspect_document(path, "image/png", 1, max_image_pixels=1_000_000)
    assert caught.value.code is ErrorCode.IMAGE_TOO_LARGE


def test_undecodable_image_fails_with_corrupt_document(tmp_path: Path) -> None:
    error = _inspect_error(_write(tmp_path, b"\x89PNG\r\n\x1a\n" + b"junk" * 50), "image/png")
    assert error.code is ErrorCode.CORRUPT_DOCUMENT


_BOMB_PROBE = """
import resource, sys
from ocrq.consumer.raster import inspect_document, normalise_image
from ocrq.shared.errors import OcrqError
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
codes = []
for attempt in (
    lambda: inspect_document(sys.argv[1], "image/png", 1, 80_000_000),
    lambda: normalise_image(sys.argv[1], sys.argv[2], 80_000_000, 4096),
):
    try:
        attempt()
        codes.append("accepted")
    except OcrqError as e:
        codes.append(e.code.value)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(",".join(codes), (after - before) // 1024)
"""


@pytest.mark.parametrize("side", [30_000, 12_000])  # over Pillow's own limit, and only ours
def test_bomb_png_is_refused_without_decoding_its_pixels(tmp_path: Path, side: int) -> None:
    path = _write(tmp_path, bomb_png(side, side), "bomb.png")
    assert Path(path).stat().st_size < 200_000
    # Growth of a fresh process's peak RSS: decoding needs side² bytes even in greyscale.
    probe = subprocess.run(
        [sys.executable, "-c", _BOMB_PROBE, path, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    codes, growth_mib = probe.stdout.split()
    assert codes == "image_too_large,image_too_large"
    assert int(growth_mib) < side * side // 2**20 // 4
    assert list(tmp_path.glob("page-*")) == []


# --- PDF rendering -------------------------------------------------------------------------

SIZES = [(144, 288), (216, 360), (288, 144)]


@pytest.mark.parametrize(
    ("dpi", "expected"),
    [(72, SIZES), (150, [(300, 600), (450, 750), (600, 300)])],
)
def test_each_page_renders_at_its_own_size(
    tmp_path: Path, dpi: int, expected: list[tuple[int, int]]
) -> None:
    path = _write(tmp_path, sized_pdf(SIZES), "sized.pdf")
    for index, size in enumerate(expected):
        page = render_pdf_page(path, index, dpi, str(tmp_path), MAX_PIXELS)
        assert page.number == index + 1
        assert page.path == str(tmp_path / f"page-{index + 1:04d}.png")
        assert page.media_type == "image/png"
        assert (page.width, page.height) == size
        assert _pixel_size(page.path) == size


@pytest.mark.parametrize("dpi", [100, 150, 300])
def test_a_rendered_page_says_its_true_resolution(tmp_path: Path, dpi: int) -> None:
    # Tesseract sizes its layout analysis by the file's DPI: a 150 DPI page labelled 96 DPI
    # read measurably worse.
    page = render_pdf_page(_write(tmp_path, text_pdf(), "t.pdf"), 0, dpi, str(tmp_path), MAX_PIXELS)
    with Image.open(page.path) as image:
        assert tuple(round(v) for v in image.info["dpi"]) == (dpi, dpi)


def test_a_downscaled_image_keeps_its_resolution_scaled_with_it(tmp_path: Path) -> None:
    scan = tmp_path / "scan.png"
    Image.new("RGB", (2000, 1000), "white").save(scan, dpi=(300, 300))
    page = normalise_image(str(scan), str(tmp_path), MAX_PIXELS, max_side=1000)
    with Image.open(page.path) as image:
        assert image.size == (1000, 500)
        assert tuple(round(v) for v in image.info["dpi"]) == (150, 150)


def test_page_seven_of_twelve_renders_alone(tmp_path: Path) -> None:
    sizes = [(100 + 10 * n, 200) for n in range(12)]
    path = _write(tmp_path, sized_pdf(sizes), "long.pdf")
    out = tmp_path / "out"
    out.mkdir()
    page = render_pdf_page(path, 6, 72, str(out), MAX_PIXELS)
    assert page.number == 7
    assert [p.name for p in out.iterdir()] == ["page-0007.png"]
    assert _pixel_size(page.path) == (160, 200)


def test_huge_page_is_rendered_at_a_lower_dpi_within_max_pixels(tmp_path: Path) -> None:
    path = _write(tmp_path, sized_pdf([(14_400, 14_400)]), "poster.pdf")
    page = render_pdf_page(path, 0, 150, str(tmp_path), max_pixels=1_000_000)
    assert page.width * page.height <= 1_000_000
    assert page.width * page.height > 900_000  # lowered only as far as needed
    assert _pixel_size(page.path) == (page.width, page.height)


def test_rendering_a_page_past_the_end_fails_with_corrupt_document(tmp_path: Path) -> None:
    path = _write(tmp_path, text_pdf(pages=2), "short.pdf")
    with pytest.raises(OcrqError) as caught:
        render_pdf_page(path, 2, 72, str(tmp_path), MAX_PIXELS)
    assert caught.value.code is ErrorCode.CORRUPT_DOCUMENT


# --- image normalisation -------------------------------------------------------------------


def test_large_png_is_downscaled_to_max_side(tmp_path: Path) -> None:
    page = normalise_image(_write(tmp_path, png(1200, 600)), str(tmp_path), MAX_PIXELS, 500)
    assert (page.number, page.media_type) == (1, "image/png")
    assert (page.width, page.height) == (500, 250)
    with Image.open(page.path) as image:
        assert (image.format, image.mode, image.size) == ("PNG", "RGB", (500, 250))


def test_large_jpeg_is_downscaled_and_reencoded_as_png(tmp_path: Path) -> None:
    page = normalise_image(_write(tmp_path, jpeg(1600, 800)), str(tmp_path), MAX_PIXELS, 400)
    assert page.media_type == "image/png"
    assert _pixel_size(page.path) == (400, 200) == (page.width, page.height)


def test_small_jpeg_is_passed_through_unchanged(tmp_path: Path) -> None:
    data = jpeg(320, 200)
    page = normalise_image(_write(tmp_path, data), str(tmp_path), MAX_PIXELS, MAX_SIDE)
    assert page.media_type == "image/jpeg"
    assert page.path.endswith("page-0001.jpg")
    assert (page.width, page.height) == (320, 200)
    assert Path(page.path).read_bytes() == data


@pytest.mark.parametrize("data", [webp(), tiff(), bmp()], ids=["webp", "tiff", "bmp"])
def test_other_formats_become_rgb_png(tmp_path: Path, data: bytes) -> None:
    page = normalise_image(_write(tmp_path, data), str(tmp_path), MAX_PIXELS, MAX_SIDE)
    assert page.media_type == "image/png"
    with Image.open(page.path) as image:
        assert (image.format, image.mode, image.size) == ("PNG", "RGB", (64, 48))
        assert image.getpixel((10, 10)) == (30, 120, 200)


def test_every_frame_of_a_tiff_is_a_page(tmp_path: Path) -> None:
    path = _write(tmp_path, multipage_tiff([(300, 400), (400, 300), (200, 200)]))
    assert inspect_document(path, "image/tiff", 10, MAX_PIXELS) == 3
    pages = [normalise_image(path, str(tmp_path), MAX_PIXELS, MAX_SIDE, i) for i in range(3)]
    assert [(p.number, p.width, p.height) for p in pages] == [
        (1, 300, 400), (2, 400, 300), (3, 200, 200)
    ]  # fmt: skip
    assert [Path(p.path).name for p in pages] == [f"page-000{n}.png" for n in (1, 2, 3)]


def test_a_tiff_with_more_pages_than_allowed_fails_with_too_many_pages(tmp_path: Path) -> None:
    path = _write(tmp_path, multipage_tiff([(50, 50)] * 4))
    with pytest.raises(OcrqError) as caught:
        inspect_document(path, "image/tiff", 3, MAX_PIXELS)
    assert caught.value.code is ErrorCode.TOO_MANY_PAGES and "4 pages" in caught.value.message


def test_a_tiff_page_over_the_pixel_limit_fails_before_any_is_decoded(tmp_path: Path) -> None:
    path = _write(tmp_path, multipage_tiff([(50, 50), (2000, 2000)]))
    with pytest.raises(OcrqError) as caught:
        inspect_document(path, "image/tiff", 10, max_image_pixels=1_000_000)
    assert caught.value.code is ErrorCode.IMAGE_TOO_LARGE


def test_an_animated_webp_is_read_as_its_first_frame_only(tmp_path: Path) -> None:
    frames = [Image.new("RGB", (40, 30), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    buffer = io.BytesIO()
    frames[0].save(buffer, "WEBP", save_all=True, append_images=frames[1:], lossless=True)
    path = _write(tmp_path, buffer.getvalue())
    assert inspect_document(path, "image/webp", 10, MAX_PIXELS) == 1
    with pytest.raises(OcrqError):
        normalise_image(path, str(tmp_path), MAX_PIXELS, MAX_SIDE, 1)


def test_transparent_png_is_flattened_onto_white(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    Image.new("RGBA", (40, 20), (0, 0, 0, 0)).save(buffer, "PNG")
    page = normalise_image(_write(tmp_path, buffer.getvalue()), str(tmp_path), MAX_PIXELS, 100)
    with Image.open(page.path) as image:
        assert image.getpixel((5, 5)) == (255, 255, 255)


def test_truncated_png_fails_with_corrupt_document(tmp_path: Path) -> None:
    data = text_png(width=600, height=300)
    path = _write(tmp_path, data[: len(data) // 2])
    with pytest.raises(OcrqError) as caught:
        normalise_image(path, str(tmp_path), MAX_PIXELS, MAX_SIDE)
    assert caught.value.code is ErrorCode.CORRUPT_DOCUMENT


# --- async facade --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def process_pool() -> Iterator[RecyclingPool]:
    pool = RecyclingPool(lambda: concurrent.futures.ProcessPoolExecutor(max_workers=1), 1)
    yield pool
    asyncio.run(pool.aclose())


async def test_rasteriser_inspects_and_renders_in_a_process_pool(
    tmp_path: Path, process_pool: RecyclingPool
) -> None:
    rasteriser = Rasteriser(process_pool, MAX_PIXELS, MAX_SIDE)
    path = _write(tmp_path, sized_pdf(SIZES), "sized.pdf")
    assert await rasteriser.inspect(path, PDF, 10) == 3
    page = await rasteriser.render(path, PDF, 1, 150, str(tmp_path))
    assert (page.number, page.width, page.height) == (2, 450, 750)


async def test_rasteriser_normalises_an_image_as_page_one(
    tmp_path: Path, process_pool: RecyclingPool
) -> None:
    rasteriser = Rasteriser(process_pool, MAX_PIXELS, 300)
    path = _write(tmp_path, png(600, 200))
    page = await rasteriser.render(path, "image/png", 0, 150, str(tmp_path))
    assert (page.number, page.width, page.height) == (1, 300, 100)


async def test_rasteriser_carries_error_codes_back_from_the_pool(
    tmp_path: Path, process_pool: RecyclingPool
) -> None:
    rasteriser = Rasteriser(process_pool, MAX_PIXELS, MAX_SIDE)
    with pytest.raises(OcrqError) as caught:
        await rasteriser.inspect(_write(tmp_path, encrypted_pdf()), PDF, 10)
    assert caught.value.code is ErrorCode.ENCRYPTED_DOCUMENT


async def test_rasteriser_reads_a_good_text_layer(
    tmp_path: Path, process_pool: RecyclingPool
) -> None:
    rasteriser = Rasteriser(process_pool, MAX_PIXELS, MAX_SIDE)
    found = await rasteriser.text_layer(_write(tmp_path, text_pdf(pages=2)), 1, 72)
    assert found is not None
    page, figures = found
    assert page.markdown is not None and "Page 2" in page.markdown
    assert figures == {}  # a page of text has no picture to crop


async def test_a_document_that_kills_the_renderer_fails_as_corrupt(
    tmp_path: Path, process_pool: RecyclingPool
) -> None:
    rasteriser = Rasteriser(process_pool, MAX_PIXELS, MAX_SIDE)
    with pytest.raises(OcrqError) as caught:
        await rasteriser._run("rendering page 1", os._exit, 1)  # a MuPDF segfault's effect
    assert caught.value.code is ErrorCode.CORRUPT_DOCUMENT
    path = _write(tmp_path, sized_pdf(SIZES), "sized.pdf")
    assert await rasteriser.inspect(path, PDF, 10) == 3  # the pool healed


def test_a_photo_turned_by_its_exif_orientation_is_read_upright(tmp_path: Path) -> None:
    # Phones store the sensor's pixels and say in EXIF how to turn them: 6 is a quarter turn
    # clockwise, so the red band at the stored image's left is the upright page's top.
    stored = Image.new("RGB", (200, 100), "white")
    stored.paste((255, 0, 0), (0, 0, 20, 100))
    exif = Image.Exif()
    exif[0x0112] = 6
    source = tmp_path / "photo.jpg"
    stored.save(source, format="JPEG", exif=exif, quality=95)

    page = normalise_image(str(source), str(tmp_path), 10_000_000, 4096)

    with Image.open(page.path) as upright:
        top, bottom = upright.getpixel((50, 5)), upright.getpixel((50, 195))
    assert (page.width, page.height) == (100, 200) and page.media_type == "image/png"
    assert top[0] > 200 and top[1] < 60  # type: ignore[index]
    assert bottom == (255, 255, 255) or min(bottom) > 240  # type: ignore[arg-type]
