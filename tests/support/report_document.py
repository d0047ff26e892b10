"""A generated report page with known structure: title, heading, paragraphs, list, table,
picture and page number (the layout tests and the end-to-end structure tests read it)."""
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import math

import pymupdf

BODY_PT = 10.5
TABLE = [
    ["Region", "Units", "Revenue"],
    ["North", "1200", "45.5"],
    ["South", "860", "31.2"],
    ["East", "1530", "58.9"],
]
PICTURE_PT = (72.0, 420.0, 312.0, 580.0)  # where the picture is placed


def _lines(page: pymupdf.Page, y: float, rows: list[str]) -> float:
    for row in rows:
        page.insert_text((72, y), row, fontsize=BODY_PT, fontname="helv")
        y += BODY_PT * 1.35
    return y


def _picture() -> pymupdf.Pixmap:
    """A photo-like picture (smooth colour waves), 240 x 160 pixels."""
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 240, 160), False)
    for x in range(240):
        for y in range(160):
            red = int(120 + 100 * math.sin(x / 17.0))
            pixmap.set_pixel(x, y, (red, int(110 + 90 * math.cos(y / 13.0)), (x * y) % 200 + 40))
    return pixmap


def _ruled_table(page: pymupdf.Page, top: float) -> None:
    xs = [72.0, 212.0, 312.0, 412.0]
    ys = [top + 18.0 * i for i in range(len(TABLE) + 1)]
    for y in ys:
        page.draw_line((xs[0], y), (xs[-1], y), width=0.8)
    for x in xs:
        page.draw_line((x, ys[0]), (x, ys[-1]), width=0.8)
    for r, row in enumerate(TABLE):
        for c, text in enumerate(row):
            font = "hebo" if r == 0 else "helv"
            page.insert_text((xs[c] + 4, ys[r] + 13), text, fontsize=10, fontname=font)


def report_pdf() -> bytes:
    """Title (24 pt), heading (14 pt), two paragraphs (one word broken at a line end),
    three bullets, a ruled table, a picture and a page number in the footer."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 100), "Harbour Traffic Report", fontsize=24, fontname="hebo")
    page.insert_text((72, 150), "1 Introduction", fontsize=14, fontname="hebo")
    y = _lines(
        page,
        175,
        [
            "The harbour authority counted every vessel that entered the port during the",
            "spring season and recorded its cargo, its flag and the berth it used. The com-",
            "pilation took three months of careful work by the night shift.",
        ],
    )
    y = _lines(
        page,
        y + 8,
        [
            "A second survey repeated the counts in autumn, when the fishing fleet returns",
            "to the inner basin and the ferries run a reduced timetable for the winter.",
        ],
    )
    for item in ["Container ships used the eastern quay", "Ferries kept to the west"]:
        y = _lines(page, y + 2, ["\u2022  " + item])
    _ruled_table(page, y + 20)
    page.insert_image(pymupdf.Rect(*PICTURE_PT), pixmap=_picture())
    page.insert_text((290, 810), "7", fontsize=10, fontname="helv")
    return bytes(doc.tobytes())


def report_document(pages: int) -> bytes:
    """``pages`` copies of the report page, each page's footer carrying its own number."""
    one = pymupdf.open(stream=report_pdf())
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        doc.insert_pdf(one)
        doc[-1].insert_text((72, 60), f"Report copy {number}", fontsize=9, fontname="helv")
    return bytes(doc.tobytes())
