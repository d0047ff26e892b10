"""A generated report page with known structure, as a PDF and as a 200 DPI scan."""
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest
from support.report_document import PICTURE_PT, TABLE, report_pdf
from support.tesseract_scans import running_tesseract

from ocrq.consumer.engines.tesseract import TesseractEngine


@pytest.fixture(scope="module")
def engine() -> Iterator[TesseractEngine]:
    """One one-process Tesseract engine per test module that reads scans."""
    with running_tesseract(workers=1) as tesseract:
        yield tesseract


@pytest.fixture(scope="session")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report page as a PDF file."""
    path = tmp_path_factory.mktemp("layout") / "report.pdf"
    path.write_bytes(report_pdf())
    return path


@pytest.fixture(scope="session")
def report_scan(report: Path) -> Path:
    """The report page rendered at 200 DPI: what a scanner would hand over."""
    path = report.with_name("report-200dpi.png")
    with pymupdf.open(report) as doc:
        doc[0].get_pixmap(dpi=200).save(str(path))
    return path


@pytest.fixture(scope="session")
def report_table() -> list[list[str]]:
    """The report's table, row by row."""
    return [list(row) for row in TABLE]


@pytest.fixture(scope="session")
def report_picture() -> tuple[float, float, float, float]:
    """Where the report's picture lies on its page, in points."""
    return PICTURE_PT
