"""Figures on scanned pages: pictures without words become figure blocks, with captions."""
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image, ImageDraw
from support.tesseract_scans import read_scan

from ocrq.consumer.engines.tesseract import TesseractEngine
from ocrq.consumer.layout.scan_figures import find_figures
from ocrq.consumer.layout.scanned import ReadWord

PX_PER_PT = 200 / 72


def _overlap(a: list[int], b: tuple[float, ...]) -> float:
    """Intersection over union of two boxes."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union


@pytest.mark.parametrize("name", ["chart_and_photo", "logo_and_stamp"])
async def test_pictures_without_words_become_figures_where_they_lie(
    engine: TesseractEngine,
    scans: dict[str, Path],
    drawn_figures: dict[str, list[tuple[float, float, float, float]]],
    name: str,
) -> None:
    page = await read_scan(engine, scans[name])

    figures = [b.bbox_px for b in page.blocks if b.label == "figure"]
    assert len(figures) == len(drawn_figures[name])
    for drawn in drawn_figures[name]:
        expected = tuple(v * PX_PER_PT for v in drawn)
        assert max(_overlap(found, expected) for found in figures) > 0.6


async def test_captions_below_figures_are_labelled_and_follow_their_figure(
    engine: TesseractEngine, scans: dict[str, Path]
) -> None:
    page = await read_scan(engine, scans["chart_and_photo"])

    labels = [b.label for b in page.blocks]
    captions = [b.text for b in page.blocks if b.label == "caption"]
    assert captions == ["Figure 1: Vessels per quarter.", "Fig. 2: The inner basin at dawn."]
    assert labels.count("figure") == 2
    chart, photo = (i for i, label in enumerate(labels) if label == "figure")
    # The chart's own words come between it and its caption; the photo has none.
    assert labels[chart : chart + 3] == ["figure", "text", "caption"]
    assert labels[photo : photo + 2] == ["figure", "caption"]
    assert labels[0] == "heading" and labels[-1] == "text"


async def test_words_inside_a_captioned_chart_follow_it_before_its_caption(
    engine: TesseractEngine, scans: dict[str, Path]
) -> None:
    page = await read_scan(engine, scans["chart_and_photo"])

    at = next(i for i, b in enumerate(page.blocks) if b.label == "figure")
    # Tesseract reads four of the chart's eight labels at 200 DPI (not Q3 to Q5, nor 0).
    assert set(page.blocks[at + 1].text.split()) == {"Q1", "Q2", "50", "100"}
    prose = [b.text for b in page.blocks if "harbour authority" in b.text]
    assert len(prose) == 3 and not any("Q1" in text or "Q2" in text for text in prose)


async def test_words_inside_a_figure_without_a_caption_are_left_out(
    engine: TesseractEngine, scans: dict[str, Path]
) -> None:
    # Such "figures" are receipts' stamps and forms' boxes as often as charts: their words,
    # kept, cost more than they gave (BENCHMARKS.md, "Reading quality", twelfth pass).
    page = await read_scan(engine, scans["uncaptioned_chart"])

    assert [b.label for b in page.blocks].count("figure") == 2
    body = " ".join(b.text for b in page.blocks if b.label != "figure").split()
    assert "Q1" not in body and "Q2" not in body and "100" not in body
    assert "harbour" in body


@pytest.mark.parametrize("name", ["text_only", "two_column", "bulleted_list", "unruled_table"])
async def test_pages_of_text_and_tables_have_no_figure(
    engine: TesseractEngine, scans: dict[str, Path], name: str
) -> None:
    page = await read_scan(engine, scans[name])

    assert [b for b in page.blocks if b.label == "figure"] == []


async def test_a_ruled_table_stays_a_table_not_a_figure(
    engine: TesseractEngine, report_scan: Path, report_picture: tuple[float, ...]
) -> None:
    page = await read_scan(engine, report_scan)

    [table] = [b for b in page.blocks if b.label == "table"]
    assert table.table is not None and (table.table.rows, table.table.cols) == (4, 3)
    [figure] = [b.bbox_px for b in page.blocks if b.label == "figure"]
    assert _overlap(figure, tuple(v * PX_PER_PT for v in report_picture)) > 0.8


def _page(tmp_path: Path, box: tuple[int, int, int, int]) -> str:
    path = tmp_path / "page.png"
    image = Image.new("L", (1000, 1400), 250)
    ImageDraw.Draw(image).rectangle(box, fill=90)
    image.save(path)
    return str(path)


def test_a_dark_region_with_no_words_is_a_figure(tmp_path: Path) -> None:
    path = _page(tmp_path, (200, 300, 600, 600))

    [figure] = find_figures(path, [])

    assert figure == pytest.approx((200, 300, 600, 600), abs=8)


def test_a_region_the_engine_read_as_words_is_no_figure(tmp_path: Path) -> None:
    path = _page(tmp_path, (200, 300, 600, 600))
    words = [
        ReadWord("ink", (200.0, y, 600.0, min(y + 30.0, 601.0)), 0.9, k)
        for k, y in enumerate(range(300, 601, 30))
    ]

    assert find_figures(path, words) == []


def test_rules_and_small_specks_are_no_figures(tmp_path: Path) -> None:
    path = _page(tmp_path, (100, 700, 900, 706))  # a horizontal rule
    with Image.open(path) as image:
        ImageDraw.Draw(image).rectangle((50, 50, 80, 80), fill=0)  # a speck
        image.save(path)

    assert find_figures(path, []) == []


def test_a_forms_dotted_entry_fields_are_no_figure(tmp_path: Path) -> None:
    path = tmp_path / "form.png"
    image = Image.new("L", (1000, 1400), 255)
    draw = ImageDraw.Draw(image)
    for x in range(100, 900, 8):  # comb fields: a dot every 8 px, rows 30 px apart
        for y in range(300, 700, 30):
            draw.point((x, y), fill=60)
    image.save(path)

    assert find_figures(str(path), []) == []


def _lines_of_words(lines: list[tuple[str, ...]], top: float) -> list[ReadWord]:
    return [
        ReadWord(text, (210.0 + 120 * i, top + 90 * k, 300.0 + 120 * i, top + 20 + 90 * k), 0.9, k)
        for k, line in enumerate(lines)
        for i, text in enumerate(line)
    ]


def test_a_mark_over_lines_of_confident_text_leaves_the_text_as_text(tmp_path: Path) -> None:
    # A receipt's totals with a handwritten sum circled over them: the dark mark is big
    # enough to be a figure, but the lines in its box are lines of confidently read words.
    path = _page(tmp_path, (200, 300, 600, 600))
    lines = [("Total", "Amount:", "31.00"), ("Cash", "Received:", "101.00"), ("Change", "70.00")]

    assert find_figures(path, _lines_of_words(lines, 320.0)) == []


def test_lines_weakly_read_but_surely_read_again_are_text_not_a_figure(tmp_path: Path) -> None:
    # A receipt's GST summary under a smudge: Tesseract read its lines at 0.3, PP-OCRv6 read
    # them again at 0.9. Read only weakly, the same lines are a picture's texture.
    path = _page(tmp_path, (200, 300, 600, 600))
    lines = [("GST", "Summary", "Amount"), ("SR", "GST", "7.74"), ("GST", "REG", "#0006561")]
    weak = [w._replace(confidence=0.3) for w in _lines_of_words(lines, 320.0)]
    surely = [w._replace(second_confidence=0.9) for w in weak]

    assert len(find_figures(path, weak)) == 1
    assert find_figures(path, surely) == []


def test_a_diagram_with_a_few_labels_among_many_marks_stays_a_figure(tmp_path: Path) -> None:
    path = _page(tmp_path, (200, 300, 600, 600))
    labels = _lines_of_words([("LIR", "Trace"), ("loop", "edge"), ("Compiled", "Trace")], 320.0)
    marks = [
        ReadWord("~", (220.0 + 40 * i, 330.0 + 30 * i, 230.0 + 40 * i, 340.0 + 30 * i), 0.3, 10 + i)
        for i in range(8)
    ]

    assert len(find_figures(path, labels + marks)) == 1


def test_a_box_of_text_lines_with_a_caption_beside_it_is_a_figure(tmp_path: Path) -> None:
    # A diagram straightened from a skewed scan: its labels read as confident lines of two
    # words, as a receipt's totals do; its caption says what it is.
    path = _page(tmp_path, (200, 300, 600, 600))
    labels = _lines_of_words([("LIR", "Trace"), ("loop", "edge"), ("Compiled", "Trace")], 320.0)
    caption = [
        ReadWord(text, (200.0 + 110 * i, 620.0, 300.0 + 110 * i, 645.0), 0.95, 9)
        for i, text in enumerate(("Figure", "2.", "States"))
    ]
    far_below = [
        w._replace(box=(w.box[0], w.box[1] + 300, w.box[2], w.box[3] + 300)) for w in caption
    ]

    assert find_figures(path, labels) == []
    assert len(find_figures(path, labels + caption)) == 1
    assert find_figures(path, labels + far_below) == []


def test_a_weak_word_surely_read_again_is_wiped_off_a_mark_beside_it(tmp_path: Path) -> None:
    # sroie-005: a circled handwritten sum right of "non-refundable*", which Tesseract read
    # at 0.26 and PP-OCRv6 again surely. Left as ink, the word joined the circle into one
    # figure reaching over the ends of the lines below it, whose words were left out.
    path = _page(tmp_path, (600, 300, 800, 500))
    with Image.open(path) as image:
        ImageDraw.Draw(image).rectangle((400, 380, 592, 410), fill=90)  # the word's ink
        image.save(path)
    weak = ReadWord("non-refundable*", (400.0, 380.0, 592.0, 410.0), 0.26, 0)

    [joined] = find_figures(path, [weak])
    [circle] = find_figures(path, [weak._replace(second_confidence=0.95)])

    assert joined[0] == pytest.approx(400, abs=8)
    assert circle == pytest.approx((600, 300, 800, 500), abs=8)


async def test_a_receipts_line_ends_beside_a_circled_sum_stay_text(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # sroie-005: "non-refundable*", "You***" and "Again***" end three lines right beside a
    # handwritten "31.00" circled on the receipt; the circle alone is the figure.
    path = tmp_path / "sroie-005.png"
    with Image.open(Path(__file__).parents[2] / "data" / "sroie-005.jpg") as image:
        image.convert("RGB").save(path)

    page = await read_scan(engine, path)

    text = " ".join(b.text for b in page.blocks if b.label != "figure")
    # "gain***": the re-read (PP-OCRv6) gives "Ágain" on some machines, "Again" on others
    # (float or integer model alike); the line's end kept as text is what is tested here.
    assert "non-refund" in text and "You***" in text and "gain***" in text
    [figure] = [b.bbox_px for b in page.blocks if b.label == "figure"]
    assert figure[0] > 300  # the circle's left edge, right of the line ends (x 232-342)
