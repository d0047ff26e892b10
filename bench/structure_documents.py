"""The structure benchmark's documents: authored Markdown rendered to PDF, its structure the truth.

    .venv/bin/python -m bench.structure_documents      # rebuild every PDF and truth file

Each `bench/documents/structure/NAME.md` (an excerpt of a real document: SOURCES.md) is
rendered through markdown-it-py's HTML and PyMuPDF's Story onto A4 pages (`NAME.pdf`, kept
in the repository so that every run reads the same pages), and its structure, read by
`document_structure.structure_of_markdown`, is written to `NAME.truth.json`. A document named
in LAYOUTS is set in two columns under a full-width title, with a running header and a page
number on every page: furniture, listed in its truth apart from the body. Scans are made at
run time: `scanned_pdf` renders the PDF's pages into an image-only PDF.
"""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path
from typing import Any

import pymupdf

from bench.document_structure import (
    PARSER,
    FurnitureLine,
    Structure,
    normalise,
    structure_from_json,
    structure_of_markdown,
)

FOLDER = Path(__file__).resolve().parent / "documents" / "structure"
A4 = pymupdf.paper_rect("a4")
MARGIN = 56  # points: about 2 cm
# Story's defaults, made to look like a rendered docs page: tables ruled, code in a box.
CSS = """
body { font-family: sans-serif; font-size: 11pt; }
h1 { font-size: 20pt; } h2 { font-size: 16pt; } h3 { font-size: 13.5pt; }
h4 { font-size: 12pt; } h5 { font-size: 11pt; }
table { border-collapse: collapse; margin-top: 4pt; margin-bottom: 8pt; }
th, td { border: 0.6pt solid #555; padding: 2pt 5pt; text-align: left; }
th { font-weight: bold; background-color: #eee; }
pre { font-family: monospace; font-size: 9.5pt; background-color: #f4f4f4; padding: 4pt; }
code { font-family: monospace; }
blockquote { margin-left: 12pt; padding-left: 8pt; border-left: 2pt solid #999; }
"""
FURNITURE_CSS = "body { font-family: sans-serif; font-size: 8.5pt; color: #555; }"
COLUMN_GAP = 20  # points between the two columns
TITLE_GAP = 10  # points between the full-width title and the columns
FURNITURE_BAND = 20  # points: the header's and the footer's height, inside the margin
MARGIN_BELOW = 14  # points a column's filled box may end below it: the last paragraph's margin


@dataclass(frozen=True)
class Layout:
    """How a document is set: in columns or not, and the furniture drawn on every page."""

    columns: int = 1  # side by side; with more than one, a leading `# ` title spans them all
    header: str = ""  # a running header (page_header), the same on every page
    footer: str = ""  # a page number (page_number): `{page}` and `{pages}` filled in

    @property
    def plain(self) -> bool:
        """One column and no furniture: the single-column render, unchanged."""
        return self.columns == 1 and not self.header and not self.footer


LAYOUTS = {
    "rust-introduction": Layout(
        columns=2,
        header="The Book: Front Matter",
        footer="Page {page} of {pages}",
    ),
}


@dataclass(frozen=True)
class StructureDocument:
    name: str
    pdf: bytes
    truth: Structure
    pages: int


def render_pdf(markdown: str, layout: Layout = Layout()) -> bytes:
    """The Markdown as HTML laid out by PyMuPDF's Story on A4 pages, as the layout says."""
    if layout.plain:
        return subset(single_column_pdf(markdown))
    pages = page_count(laid_out_pdf(markdown, layout, 0))  # the footer says "of N": count first
    return subset(laid_out_pdf(markdown, layout, pages))


def single_column_pdf(markdown: str) -> bytes:
    """The Markdown in one column between the margins, nothing else on the page."""
    story = pymupdf.Story(html=PARSER.render(markdown), user_css=CSS)
    out = io.BytesIO()
    writer = pymupdf.DocumentWriter(out)
    where = pymupdf.Rect(MARGIN, MARGIN, A4.width - MARGIN, A4.height - MARGIN)
    more = True
    while more:
        device = writer.begin_page(A4)
        more, _ = story.place(where)
        story.draw(device)
        writer.end_page()
    writer.close()
    return out.getvalue()


def split_title(markdown: str) -> tuple[str, str]:
    """A leading `# ` title line and the rest (no title: empty and the whole)."""
    first, _, rest = markdown.partition("\n")
    return (first, rest) if first.startswith("# ") else ("", markdown)


def column_rects(top: float, columns: int) -> list[pymupdf.Rect]:
    """The columns between `top` and the bottom margin, left to right."""
    width = (A4.width - 2 * MARGIN - (columns - 1) * COLUMN_GAP) / columns
    lefts = [MARGIN + i * (width + COLUMN_GAP) for i in range(columns)]
    return [pymupdf.Rect(x, top, x + width, A4.height - MARGIN) for x in lefts]


def draw_html(device: Any, html: str, css: str, where: pymupdf.Rect) -> pymupdf.Rect:
    """One short piece of HTML drawn into `where`; the rectangle it filled."""
    story = pymupdf.Story(html=html, user_css=css)
    _, filled = story.place(where)
    story.draw(device)
    return pymupdf.Rect(filled)


def header_band() -> pymupdf.Rect:
    """Where the running header goes: above the body, inside the top margin."""
    bottom = MARGIN - 6
    return pymupdf.Rect(MARGIN, bottom - FURNITURE_BAND, A4.width - MARGIN, bottom)


def footer_band() -> pymupdf.Rect:
    """Where the page number goes: below the body, inside the bottom margin."""
    top = A4.height - MARGIN + 10
    return pymupdf.Rect(MARGIN, top, A4.width - MARGIN, top + FURNITURE_BAND)


def body_band() -> pymupdf.Rect:
    """The body's part of a page, full width: between the running header and the page number."""
    return pymupdf.Rect(0, header_band().y1, A4.width, footer_band().y0)


def laid_out_pdf(markdown: str, layout: Layout, pages: int) -> bytes:
    """The layout's pages: header, title (page 1), columns, footer saying page of `pages`."""
    title, body = split_title(markdown) if layout.columns > 1 else ("", markdown)
    story = pymupdf.Story(html=PARSER.render(body), user_css=CSS)
    out = io.BytesIO()
    writer = pymupdf.DocumentWriter(out)
    number, more = 0, True
    while more:
        number += 1
        device = writer.begin_page(A4)
        if layout.header:
            html = f"<p>{escape(layout.header)}</p>"
            draw_html(device, html, FURNITURE_CSS, header_band())
        top: float = MARGIN
        if title and number == 1:  # the title spans the columns, then the columns start
            full = pymupdf.Rect(MARGIN, MARGIN, A4.width - MARGIN, A4.height / 3)
            top = draw_html(device, PARSER.render(title), CSS, full).y1 + TITLE_GAP
        for column in column_rects(top, layout.columns):
            if more:  # the last page's right column stays empty once the text is out
                more, filled = story.place(column)
                # MuPDF 1.28's Story, at 10 pt in these columns, ends some columns hundreds
                # of points below their foot and drops the text it put there: refuse that.
                if filled[3] > column.y1 + MARGIN_BELOW:
                    raise ValueError(f"Story ran to {filled} past column {column} on page {number}")
                story.draw(device)
        if layout.footer:
            text = layout.footer.format(page=number, pages=pages)
            html = f'<p style="text-align: center">{escape(text)}</p>'
            draw_html(device, html, FURNITURE_CSS, footer_band())
        writer.end_page()
    writer.close()
    return out.getvalue()


def page_count(pdf: bytes) -> int:
    """How many pages a PDF has."""
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        count: int = doc.page_count
    return count


def subset(pdf: bytes) -> bytes:
    """The PDF with its fonts cut to the glyphs used, compressed."""
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        doc.subset_fonts()  # the whole Nimbus fonts are 50 KiB each per document
        # no_new_id: no random /ID in the trailer, so that a rebuild gives the same bytes
        data: bytes = doc.tobytes(garbage=4, deflate=True, no_new_id=True)
    return data


def furniture_of(layout: Layout, pages: int) -> list[FurnitureLine]:
    """The header and footer the layout draws on each page, as the truth lists them."""
    lines = []
    for page in range(1, pages + 1):
        if layout.header:
            lines.append(FurnitureLine(page, "page_header", normalise(layout.header)))
        if layout.footer:
            text = normalise(layout.footer.format(page=page, pages=pages))
            lines.append(FurnitureLine(page, "page_number", text))
    return lines


def truth_of(markdown: str, layout: Layout = Layout(), pages: int = 0) -> Structure:
    """The authored structure: the Markdown's headings, tables and text; the layout's furniture."""
    truth = structure_of_markdown(markdown)
    truth.furniture = furniture_of(layout, pages)
    return truth


def truth_json(truth: Structure) -> str:
    """A truth file's text; `furniture` only where there is some (older files have none)."""
    data = asdict(truth)
    if not truth.furniture:
        del data["furniture"]
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def build(folder: Path = FOLDER) -> list[str]:
    """Render every NAME.md in the folder to NAME.pdf and write NAME.truth.json; the names."""
    names = []
    for source in sorted(folder.glob("*.md")):
        if source.stem.isupper():  # SOURCES.md, LICENCES.md
            continue
        markdown, layout = source.read_text(), LAYOUTS.get(source.stem, Layout())
        pdf = render_pdf(markdown, layout)
        source.with_suffix(".pdf").write_bytes(pdf)
        truth = truth_of(markdown, layout, page_count(pdf))
        source.with_suffix(".truth.json").write_text(truth_json(truth))
        names.append(source.stem)
    return names


def load(folder: Path = FOLDER, only: str | None = None) -> list[StructureDocument]:
    """The built documents: each PDF with its truth."""
    documents = []
    for pdf in sorted(folder.glob("*.pdf")):
        if only and only not in pdf.stem:
            continue
        truth = structure_from_json(json.loads(pdf.with_suffix(".truth.json").read_text()))
        data = pdf.read_bytes()
        with pymupdf.open(stream=data, filetype="pdf") as doc:
            pages = doc.page_count
        documents.append(StructureDocument(pdf.stem, data, truth, pages))
    return documents


def scanned_pdf(pdf: bytes, dpi: int) -> bytes:
    """The PDF's pages rendered at `dpi` into an image-only PDF (a scan: no text layer)."""
    out = pymupdf.open()
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        for page in doc:
            pixmap = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
            target = out.new_page(width=page.rect.width, height=page.rect.height)
            target.insert_image(target.rect, stream=pixmap.tobytes("png"))
    data: bytes = out.tobytes(deflate=True, garbage=3)
    out.close()
    return data


def main() -> None:
    """Rebuild the PDFs and truth files, and say how well each PDF's own text layer matches."""
    for name in build():
        pdf = (FOLDER / f"{name}.pdf").read_bytes()
        with pymupdf.open(stream=pdf, filetype="pdf") as doc:
            print(f"{name}: {doc.page_count} pages, {len(pdf) // 1024} KiB")


if __name__ == "__main__":
    main()
