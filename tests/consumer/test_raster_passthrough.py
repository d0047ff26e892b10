"""Uploads engines read as they are (small, upright, opaque JPEG and PNG) are not re-encoded."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from support.documents import png

from ocrq.consumer.raster import normalise_image

MAX_PIXELS = 80_000_000
MAX_SIDE = 4096


def upload(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "upload"
    path.write_bytes(data)
    return str(path)


def encoded(image: Image.Image, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG", **options)
    return buffer.getvalue()


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_a_small_opaque_png_is_passed_through_unchanged(tmp_path: Path, mode: str) -> None:
    data = encoded(Image.new(mode, (320, 200), 90), dpi=(300, 300))
    page = normalise_image(upload(tmp_path, data), str(tmp_path), MAX_PIXELS, MAX_SIDE)
    assert (page.media_type, page.width, page.height) == ("image/png", 320, 200)
    assert page.path.endswith("page-0001.png") and Path(page.path).read_bytes() == data


def test_a_png_with_a_transparent_colour_is_flattened(tmp_path: Path) -> None:
    data = encoded(Image.new("RGB", (40, 20), (0, 0, 0)), transparency=(0, 0, 0))
    page = normalise_image(upload(tmp_path, data), str(tmp_path), MAX_PIXELS, MAX_SIDE)
    assert Path(page.path).read_bytes() != data
    with Image.open(page.path) as image:
        assert image.getpixel((5, 5)) == (255, 255, 255)


def test_an_animated_png_is_read_as_its_first_frame(tmp_path: Path) -> None:
    frames = [Image.new("RGB", (40, 30), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    data = encoded(frames[0], save_all=True, append_images=frames[1:])
    page = normalise_image(upload(tmp_path, data), str(tmp_path), MAX_PIXELS, MAX_SIDE)
    assert Path(page.path).read_bytes() != data
    with Image.open(page.path) as image:
        assert not getattr(image, "is_animated", False)
        assert image.getpixel((5, 5)) == (255, 0, 0)


def test_a_png_over_max_side_is_still_downscaled(tmp_path: Path) -> None:
    page = normalise_image(upload(tmp_path, png(900, 300)), str(tmp_path), MAX_PIXELS, 300)
    assert (page.width, page.height) == (300, 100)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data + b"%PDF-1.4\n%%EOF\n",  # a polyglot: another file after the image
        lambda data: data[:92] + bytes([data[92] ^ 0xFF]) + data[93:],  # a bad IDAT CRC
    ],
    ids=["trailing-file", "bad-crc"],
)
def test_a_png_that_strict_decoders_refuse_is_re_encoded(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    damaged = damage(encoded(Image.new("RGB", (40, 40), (200, 60, 30))))
    page = normalise_image(upload(tmp_path, damaged), str(tmp_path), MAX_PIXELS, MAX_SIDE)
    written = Path(page.path).read_bytes()
    assert written != damaged and written.endswith(b"IEND\xaeB`\x82")
    with Image.open(page.path) as image:
        image.verify()  # every chunk checks out now


def test_a_jpeg_with_a_file_after_it_is_re_encoded(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (30, 120, 200)).save(buffer, "JPEG")
    damaged = buffer.getvalue() + b"PK\x03\x04" + b"\x01" * 100  # a ZIP behind the JPEG
    page = normalise_image(upload(tmp_path, damaged), str(tmp_path), MAX_PIXELS, MAX_SIDE)
    assert page.media_type == "image/png"
