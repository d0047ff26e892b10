"""Generated pages with known figures and tables: a chart and a photo with captions (and
without), a logo and a stamp, text only, two columns, a bulleted list, an unruled table (PDF
bytes)."""
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import math
from collections.abc import Callable

import pymupdf

BODY_PT = 10.5
PROSE = (
    "The harbour authority counted every vessel that entered the port during the spring "
    "season and recorded its cargo, its flag and the berth it used. A second survey "
    "repeated the counts in autumn, when the fishing fleet returns to the inner basin and "
    "the ferries run a reduced timetable for the winter months ahead of the storms."
)
UNRULED = [
    ["Vessel", "Berth", "Tonnes", "Days"],
    ["Aurora", "East 4", "1200", "3"],
    ["Borealis", "West 1", "860", "2"],
    ["Cormorant", "East 2", "15300", "6"],
    ["Dunlin", "North 7", "410", "1"],
]
# Where each page's figures lie, in points (x0, y0, x1, y1).
FIGURES: dict[str, list[tuple[float, float, float, float]]] = {
    "chart_and_photo": [(110.0, 170.0, 430.0, 370.0), (72.0, 520.0, 312.0, 680.0)],
    "logo_and_stamp": [(72.0, 60.0, 162.0, 150.0), (380.0, 620.0, 520.0, 700.0)],
}


def paragraph(page: pymupdf.Page, rect: pymupdf.Rect, text: str = PROSE) -> None:
    """Body text wrapped into a rectangle."""
    left = page.insert_textbox(rect, text, fontsize=BODY_PT, fontname="helv")
    assert left >= 0, "the paragraph does not fit"


def photo(width: int = 240, height: int = 160) -> pymupdf.Pixmap:
    """A photo-like picture: smooth colour waves with a light sky at the top."""
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, width, height), False)
    for x in range(width):
        for y in range(height):
            sky = max(0.0, 1.0 - y / (0.4 * height))
            red = int(120 + 100 * math.sin(x / 17.0))
            green = int(110 + 90 * math.cos(y / 13.0))
            blue = (x * y) % 200 + 40
            pixmap.set_pixel(x, y, tuple(int(v + (235 - v) * sky) for v in (red, green, blue)))
    return pixmap


def bar_chart(page: pymupdf.Page, rect: pymupdf.Rect) -> None:
    """A bar chart drawn with shapes: axes, five bars, tick labels and a legend word."""
    x0, y0, x1, y1 = rect.x0 + 30, rect.y0 + 10, rect.x1 - 10, rect.y1 - 20
    page.draw_line((x0, y0), (x0, y1), width=1)
    page.draw_line((x0, y1), (x1, y1), width=1)
    heights = [0.35, 0.8, 0.55, 0.95, 0.6]
    step = (x1 - x0) / len(heights)
    for i, share in enumerate(heights):
        bar = pymupdf.Rect(x0 + i * step + 8, y1 - share * (y1 - y0), x0 + (i + 1) * step - 8, y1)
        page.draw_rect(bar, color=None, fill=(0.2, 0.4, 0.7))
        page.insert_text((bar.x0 + 4, y1 + 13), f"Q{i + 1}", fontsize=8, fontname="helv")
    for k in range(3):
        y = y1 - k * (y1 - y0) / 2
        page.insert_text((rect.x0 + 4, y + 3), str(k * 50), fontsize=8, fontname="helv")


def chart_and_photo_pdf(captions: bool = True) -> bytes:
    """Heading, prose, a bar chart with its caption below, prose, a photo with its caption
    (``captions=False``: the same page without the two captions)."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 80), "Harbour Traffic in Pictures", fontsize=16, fontname="hebo")
    paragraph(page, pymupdf.Rect(72, 95, 523, 165))
    bar_chart(page, pymupdf.Rect(*FIGURES["chart_and_photo"][0]))
    if captions:
        page.insert_text((110, 388), "Figure 1: Vessels per quarter.", fontsize=9, fontname="helv")
    paragraph(page, pymupdf.Rect(72, 410, 523, 500))
    page.insert_image(pymupdf.Rect(*FIGURES["chart_and_photo"][1]), pixmap=photo())
    if captions:
        page.insert_text((72, 696), "Fig. 2: The inner basin at dawn.", fontsize=9, fontname="helv")
    paragraph(page, pymupdf.Rect(72, 715, 523, 800))
    return bytes(doc.tobytes())


def logo_and_stamp_pdf() -> bytes:
    """A letterhead logo (shapes, no words), a letter's prose and a round stamp."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    logo = pymupdf.Rect(*FIGURES["logo_and_stamp"][0])
    page.draw_circle(
        pymupdf.Point(logo.x0 + logo.width / 2, logo.y0 + logo.height / 2),
        44,
        color=None,
        fill=(0.8, 0.1, 0.1),
    )
    page.draw_rect(
        pymupdf.Rect(logo.x0 + 25, logo.y0 + 25, logo.x1 - 25, logo.y1 - 25),
        color=None,
        fill=(1, 1, 1),
    )
    page.insert_text((190, 100), "Port of Lowmere Authority", fontsize=14, fontname="hebo")
    paragraph(page, pymupdf.Rect(72, 200, 523, 300))
    paragraph(page, pymupdf.Rect(72, 320, 523, 420))
    paragraph(page, pymupdf.Rect(72, 440, 523, 540))
    stamp = pymupdf.Rect(*FIGURES["logo_and_stamp"][1])
    page.draw_oval(stamp, color=(0.1, 0.2, 0.7), width=3)
    page.draw_oval(
        pymupdf.Rect(stamp.x0 + 8, stamp.y0 + 8, stamp.x1 - 8, stamp.y1 - 8),
        color=(0.1, 0.2, 0.7),
        width=1,
    )
    for k in range(12):
        angle = k * math.pi / 6
        cx, cy = stamp.x0 + stamp.width / 2, stamp.y0 + stamp.height / 2
        page.draw_line(
            (cx + 20 * math.cos(angle), cy + 12 * math.sin(angle)),
            (cx + 50 * math.cos(angle), cy + 26 * math.sin(angle)),
            color=(0.1, 0.2, 0.7),
            width=2,
        )
    return bytes(doc.tobytes())


def text_only_pdf() -> bytes:
    """A heading, three paragraphs, a horizontal rule and a page number: no figure."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 80), "Annual Summary", fontsize=18, fontname="hebo")
    page.draw_line((72, 92), (523, 92), width=1.5)
    for k in range(4):
        paragraph(page, pymupdf.Rect(72, 110 + 150 * k, 523, 250 + 150 * k))
    page.insert_text((290, 810), "3", fontsize=10, fontname="helv")
    return bytes(doc.tobytes())


def two_column_pdf() -> bytes:
    """Prose in two columns: neither a table nor a figure."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 70), "Two Columns of Prose", fontsize=16, fontname="hebo")
    for k in range(4):
        paragraph(page, pymupdf.Rect(72, 90 + 170 * k, 290, 250 + 170 * k))
        paragraph(page, pymupdf.Rect(310, 90 + 170 * k, 523, 250 + 170 * k))
    return bytes(doc.tobytes())


def bulleted_list_pdf() -> bytes:
    """A heading and a bulleted list whose items wrap: not a table."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 80), "Checklist", fontsize=16, fontname="hebo")
    items = [
        "Inspect the mooring lines at every change of tide",
        "Log the arrival and departure of each ferry",
        "Report damaged fenders to the harbour master before noon",
        "Keep the fuel berth clear for the lifeboat",
        "Record the water depth at the inner basin gauge",
        "Close the lock gates when the wind exceeds force eight",
    ]
    y = 120.0
    for item in items:
        page.insert_text((80, y), "\u2022", fontsize=BODY_PT, fontname="helv")
        page.insert_text((96, y), item, fontsize=BODY_PT, fontname="helv")
        y += BODY_PT * 1.8
    return bytes(doc.tobytes())


def unruled_table_pdf() -> bytes:
    """Prose, a table with no rules (columns by alignment only), prose."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 80), "Berth Allocation", fontsize=16, fontname="hebo")
    paragraph(page, pymupdf.Rect(72, 95, 523, 165))
    xs = [72.0, 200.0, 310.0, 410.0]
    y = 200.0
    for r, row in enumerate(UNRULED):
        for x, text in zip(xs, row, strict=True):
            font = "hebo" if r == 0 else "helv"
            page.insert_text((x, y), text, fontsize=BODY_PT, fontname=font)
        y += BODY_PT * 1.6
    paragraph(page, pymupdf.Rect(72, y + 20, 523, y + 110))
    return bytes(doc.tobytes())


PAGES: dict[str, Callable[[], bytes]] = {
    "chart_and_photo": chart_and_photo_pdf,
    "uncaptioned_chart": lambda: chart_and_photo_pdf(captions=False),
    "logo_and_stamp": logo_and_stamp_pdf,
    "text_only": text_only_pdf,
    "two_column": two_column_pdf,
    "bulleted_list": bulleted_list_pdf,
    "unruled_table": unruled_table_pdf,
}
