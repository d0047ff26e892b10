"""Generated pages with known figures and tables, rendered at 200 DPI as a scanner would."""
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest
from support.figure_pages import FIGURES, PAGES, UNRULED

DPI = 200


def render(pdf: bytes, path: Path) -> Path:
    """The PDF's first page as a 200 DPI PNG."""
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        doc[0].get_pixmap(dpi=DPI).save(str(path))
    return path


@pytest.fixture(scope="session")
def scans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every generated page as a 200 DPI scan, by name."""
    folder = tmp_path_factory.mktemp("scans")
    return {name: render(make(), folder / f"{name}.png") for name, make in PAGES.items()}


@pytest.fixture(scope="session")
def drawn_figures() -> dict[str, list[tuple[float, float, float, float]]]:
    """Where each page's figures were drawn, in points."""
    return FIGURES


@pytest.fixture(scope="session")
def unruled_rows() -> list[list[str]]:
    """The unruled table's cells, row by row."""
    return [list(row) for row in UNRULED]
