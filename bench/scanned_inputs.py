"""What the scanned layout benchmarks share: their options, and a PDF's pages read once."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ScannedPage = tuple[str, int, int, list[Any]]  # image path, width, height, words read


def add_page_arguments(parser: argparse.ArgumentParser, rounds: int) -> None:
    """--pdf, --pages, --dpi and --rounds (``rounds`` by default)."""
    parser.add_argument("--pdf", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--dpi", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=rounds)


@contextlib.contextmanager
def read_pages(pdf: Path, pages: int, dpi: int) -> Iterator[list[ScannedPage]]:
    """The PDF's first ``pages`` pages as PNG files at ``dpi`` in a temporary folder, each
    with the words Tesseract reads there (eng+fra, automatic layout, in this process)."""
    import pymupdf

    from ocrq.consumer.engines import tesseract
    from ocrq.consumer.engines.readings import PSM_AUTO, read_image

    tesseract.load_worker("eng+fra", reread=False)
    api = tesseract._api_for("eng+fra", PSM_AUTO)
    with tempfile.TemporaryDirectory(prefix="ocrq-bench-") as folder, pymupdf.open(pdf) as doc:
        read = []
        for index in range(min(pages, doc.page_count)):
            path = f"{folder}/page-{index}.png"
            pixmap = doc[index].get_pixmap(dpi=dpi)
            pixmap.pil_save(path, dpi=(dpi, dpi))
            read.append((path, pixmap.width, pixmap.height, read_image(api, path).words))
        yield read
