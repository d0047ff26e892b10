"""The confidence-gated re-read: weak lines read again by PP-OCRv6, the surer reading kept."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest
from PIL import Image
from support.tesseract_scans import markdown_cer, png_page, read_scan, running_tesseract

from bench.edit_distance import levenshtein
from ocrq.consumer.engines import line_rereads
from ocrq.consumer.engines.line_reader import LineReader, LineText
from ocrq.consumer.engines.line_rereads import (
    better_line,
    not_text,
    reread_weak_lines,
    weakest_lines,
)
from ocrq.consumer.engines.tesseract import TesseractEngine
from ocrq.consumer.layout.words import ReadWord
from ocrq.shared.schemas import Page

DATA = Path(__file__).parent / "data"


def words(*texts: tuple[str, float], top: float = 100.0, line: int = 0) -> list[ReadWord]:
    """One line of words, 20 px a character with 10 px between words."""
    out, x = [], 10.0
    for text, confidence in texts:
        out.append(ReadWord(text, (x, top, x + 20 * len(text), top + 30), confidence, line))
        x += 20 * len(text) + 10
    return out


def second(text: str, confidence: float, left: float = 10.0) -> LineText:
    """A second reading with one character every 20 px from `left` (spaces included)."""
    centres = [left + 10 + 20 * i for i in range(len(text))]
    return LineText(list(text), [confidence] * len(text), centres)


def test_the_surer_reading_keeps_its_characters_and_the_first_readings_spaces() -> None:
    line = words(("T0TAL", 0.55), ("RM", 0.8), ("3O.91", 0.5))

    merged = better_line(line, second("TOTALRM 30.91", 0.97), left=0.0)

    assert merged is not None
    assert [w.text for w in merged] == ["TOTAL", "RM", "30.91"]
    # The same words keep the first reading's boxes and confidences (the layout steps read
    # Tesseract's confidence); the line number stays.
    assert [w.box for w in merged] == [w.box for w in line]
    assert [w.confidence for w in merged] == [0.55, 0.8, 0.5]
    assert {w.line for w in merged} == {0}
    # The second reading's own confidence goes with them: a figure test reads it.
    assert {w.second_confidence for w in merged} == {0.97}


def test_a_space_only_the_second_reading_saw_splits_a_word_with_boxes_in_order() -> None:
    line = words(("SdnBhd", 0.4))

    merged = better_line(line, second("Sdn Bhd", 0.95), left=10.0)

    assert merged is not None
    assert [w.text for w in merged] == ["Sdn", "Bhd"]
    first, then = merged[0].box, merged[1].box
    assert line[0].box[0] <= first[0] < first[2] <= then[0] < then[2] <= line[0].box[2]


@pytest.mark.parametrize(
    ("first", "read_again", "expected"),
    [
        (
            [("|", 0.3), ("Rounding", 0.7), (":", 0.5), ("0.00", 0.6)],
            "Rounding0.00",
            ["Rounding", "0.00"],
        ),
        ([("~~", 0.2), ("TotalGty", 0.6), ("3", 0.9)], "Total Qty3", ["Total", "Qty", "3"]),
        ([("|", 0.2), ("|", 0.2), ("SR", 0.8), ("6", 0.9)], "SR6", ["SR", "6"]),
    ],
)
def test_a_rule_the_second_reading_left_out_does_not_split_the_word_after_it(
    first: list[tuple[str, float]], read_again: str, expected: list[str]
) -> None:
    # SROIE receipt 125: Tesseract read a table's rule before a line as "|" or "~~", PP-OCRv6
    # left it out, and its end was taken for a space after the next word's first letter.
    merged = better_line(words(*first), second(read_again, 0.97), left=10.0)

    assert merged is not None
    assert [w.text for w in merged] == expected


def test_a_second_reading_less_sure_than_the_first_is_dropped() -> None:
    line = words(("Invoice", 0.9))

    assert better_line(line, second("lnvoice", 0.85), left=10.0) is None


def test_a_second_reading_of_another_length_is_of_something_else_and_dropped() -> None:
    line = words(("Total", 0.5))

    assert better_line(line, second("Total 12.50 Cash 20.00 Change", 0.99), left=10.0) is None
    assert better_line(line, second("", 0.99), left=10.0) is None


def test_a_sure_shorter_reading_of_a_weak_line_leaves_the_noise_the_first_read_out() -> None:
    # SROIE 125: a dashed rule after the heading, read as text by Tesseract alone.
    line = words(("GST", 0.55), ("SUMMARY", 0.6), ("ssi—(C;C;*;~—~S", 0.05))

    merged = better_line(line, second("GST SUMMARY", 0.97), left=10.0)

    assert [word.text for word in merged or []] == ["GST", "SUMMARY"]


def test_a_shorter_reading_is_not_kept_over_a_line_read_with_some_confidence() -> None:
    # The first reading's extra words may be text the crop cut short: kept as read.
    line = words(("Thank", 0.4), ("You", 0.9), ("Please", 0.8), ("Come", 0.9), ("Again", 0.9))

    assert better_line(line, second("31-00", 0.99), left=10.0) is None
    assert (
        better_line(
            words(("GST", 0.3), ("SUMMARY", 0.4), ("ssi—(C;*", 0.05)),
            second("GST", 0.85),
            left=10.0,
        )
        is None
    )


def test_a_weak_line_the_second_reader_finds_next_to_nothing_in_is_not_text() -> None:
    # A dashed rule read as 45 letters at 0.33; PP-OCRv6 reads "2" (SROIE 307).
    rule = words(("de", 0.3), ("AA", 0.3), ("EE", 0.3), ("AR", 0.3), ("mn", 0.3), ("QU", 0.3))

    assert not_text(rule, second("2", 0.34))
    assert not not_text(rule, second("deAAEE", 0.34))  # half the letters: a faint text line
    assert not not_text(words(("TOTAL", 0.6), ("RM", 0.6)), second("T", 0.9))  # not weak


def test_a_rule_read_as_chinese_characters_is_dropped_on_a_latin_page() -> None:
    # PP-OCRv6 reads Chinese too: a dashed rule comes back as 一 and 十.
    line = words(("---.-----", 0.2))

    assert better_line(line, second("十-一-----", 0.9), left=10.0) is None


def test_full_width_forms_come_back_as_ascii() -> None:
    line = words(("(SUNGAI", 0.5), ("RENGIT)", 0.5))

    full_width = "\uff08SUNGAI RENGIT\uff09"  # what PP-OCRv6 wrote on a Malaysian receipt
    merged = better_line(line, second(full_width, 0.97), left=10.0)

    assert merged is not None
    assert [w.text for w in merged] == ["(SUNGAI", "RENGIT)"]


def test_only_weak_lines_are_read_weakest_first_within_the_page_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [
        words(("clear", 0.99), line=0),
        words(("faint", 0.7), line=1),
        words(("fainter", 0.4), line=2),
        words(("smudged", 0.6), line=3),
    ]
    assert weakest_lines(lines) == [2, 3, 1]

    # A line costs 48 * width / height columns: 224, 160 and 224 for lines 2, 1 and 3.
    monkeypatch.setattr(line_rereads, "BUDGET_COLUMNS", 500)
    assert weakest_lines(lines) == [2, 3]


class Recorder:
    """A second recogniser that says what it was shown and reads every line as 'READ'."""

    def __init__(self) -> None:
        self.sizes: list[tuple[int, int]] = []

    def read(self, line: Image.Image) -> LineText:
        self.sizes.append(line.size)
        return LineText(list("READ"), [0.99] * 4, [10.0, 20.0, 30.0, 40.0])


def test_a_confident_page_is_not_read_again(tmp_path: Path) -> None:
    image = tmp_path / "page.png"
    Image.new("RGB", (400, 300), "white").save(image)
    recorder = Recorder()

    reread = reread_weak_lines(str(image), words(("sure", 0.97), ("words", 0.99)), recorder)

    assert (reread.lines_read, reread.lines_kept, recorder.sizes) == (0, 0, [])


def test_a_weak_line_is_cut_out_with_a_margin_and_replaced(tmp_path: Path) -> None:
    image = tmp_path / "page.png"
    Image.new("RGB", (400, 300), "white").save(image)
    page = words(("sure", 0.97), line=0) + words(("REAO", 0.3), top=150.0, line=1)
    recorder = Recorder()

    reread = reread_weak_lines(str(image), page, recorder)

    assert (reread.lines_read, reread.lines_kept) == (1, 1)
    [(width, height)] = recorder.sizes
    # The line is 80 x 30 px at (10, 150); 15 % of its height is 4.5 px a side, and the crop
    # rounds its edges (5.5 -> 6, 94.5 -> 94).
    assert (width, height) == (94 - 6, 184 - 146)
    assert [w.text for w in reread.words] == ["sure", "READ"]


class Blind:
    """A second recogniser that reads text only in crops at least `tall` pixels high."""

    def __init__(self, tall: int = 1000, text: str = "READ") -> None:
        self.tall, self.text = tall, text

    def read(self, line: Image.Image) -> LineText:
        text = self.text if line.height >= self.tall else ""
        return LineText(list(text), [0.99] * len(text), [10.0 + 20 * i for i in range(len(text))])


def blank_page(tmp_path: Path) -> str:
    image = tmp_path / "page.png"
    Image.new("RGB", (600, 300), "white").save(image)
    return str(image)


def test_a_weak_line_the_second_reader_finds_no_text_in_is_dropped(tmp_path: Path) -> None:
    # A dashed rule crossed by a stamp, read by Tesseract as symbols and stray letters.
    page = words(("TOTAL", 0.97), line=0) + words(("+--+", 0.3), ("eet", 0.1), top=150, line=1)

    reread = reread_weak_lines(blank_page(tmp_path), page, Blind())

    assert [w.text for w in reread.words] == ["TOTAL"]
    assert (reread.lines_read, reread.lines_kept) == (1, 1)


def test_a_line_read_with_some_confidence_stays_though_the_second_reader_sees_nothing(
    tmp_path: Path,
) -> None:
    page = words(("Subtotal", 0.7), ("12.50", 0.6), line=0)

    reread = reread_weak_lines(blank_page(tmp_path), page, Blind())

    assert [w.text for w in reread.words] == ["Subtotal", "12.50"]
    assert reread.lines_kept == 0


def test_a_taller_word_beside_a_rule_is_read_on_its_own_and_kept(tmp_path: Path) -> None:
    # The rule's pieces are 30 px high, the banner's word 60: the line's cut is as high as
    # the rule, in which the second reader finds nothing; the banner, read alone, is text.
    rule = words(("----", 0.2), ("==", 0.1), ("----", 0.2), top=150, line=1)
    banner = ReadWord("INVOIGE", (400.0, 130.0, 540.0, 190.0), 0.0, 1)

    reread = reread_weak_lines(blank_page(tmp_path), [*rule, banner], Blind(60, "INVOICE"))

    assert [w.text for w in reread.words] == ["INVOICE"]
    assert reread.words[0].box == banner.box


@pytest.fixture(scope="module")
def reader() -> LineReader:
    return LineReader()


def rendered_line(text: str, tmp_path: Path, size: float = 14) -> Path:
    """A line of text rendered at 150 DPI, as a born-digital page's line is."""
    doc = pymupdf.open()
    page = doc.new_page(width=360, height=size * 1.5)  # cut as close as a line's box
    page.insert_text((6, size * 1.1), text, fontsize=size, fontname="helv")
    target = tmp_path / "line.png"
    page.get_pixmap(dpi=150).save(target)
    return target


def test_the_line_reader_reads_a_rendered_line_with_its_characters_in_place(
    reader: LineReader, tmp_path: Path
) -> None:
    text = "Invoice 2024-117: total due 1,250.00 EUR"
    with Image.open(rendered_line(text, tmp_path)) as image:
        reading = reader.read(image)
        width = image.width

    assert levenshtein(reading.text, text) <= 2
    assert reading.confidence > 0.9
    assert reading.centres == sorted(reading.centres)
    assert 0 < reading.centres[0] < reading.centres[-1] < width


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[TesseractEngine, TesseractEngine]]:
    """The engine as shipped (lines re-read) and with OCRQ_LOCAL_REREAD off."""
    with running_tesseract(workers=1) as rereading, running_tesseract(1, reread=False) as plain:
        yield rereading, plain


def png_copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / f"{Path(name).stem}.png"
    with Image.open(DATA / name) as image:
        image.convert("RGB").save(target)
    return target


def receipt_and_truth(name: str, tmp_path: Path) -> tuple[Path, str]:
    """A receipt of tests/consumer/data as a PNG page, and its transcript."""
    return png_copy(f"{name}.jpg", tmp_path), (DATA / f"{name}.txt").read_text()


@pytest.mark.parametrize("receipt", ["sroie-001", "sroie-003"])
async def test_a_receipts_weak_lines_read_again_read_closer_to_its_print(
    engines: tuple[TesseractEngine, TesseractEngine], tmp_path: Path, receipt: str
) -> None:
    # Thermal and dot-matrix print: Tesseract's fast models misread its letters and digits
    # (measured: sroie-001 24.4 % CER, sroie-003 9.8 %), PP-OCRv6 reads them again.
    rereading, plain = engines
    path, truth = receipt_and_truth(receipt, tmp_path)

    before, after = await read_scan(plain, path), await read_scan(rereading, path)

    assert before.lines_reread == 0
    assert after.lines_reread > 0 and after.reread is True
    assert markdown_cer(after, truth) < markdown_cer(before, truth) - 0.02


async def test_a_dashed_rule_under_a_stamp_leaves_no_symbols_in_the_text(
    engines: tuple[TesseractEngine, TesseractEngine], tmp_path: Path
) -> None:
    # sroie-002: "*-------*" crossed by a handwritten circle, which Tesseract reads as
    # "Fone nn 2 +--+ = eet - +--+ ==" and PP-OCRv6 as no text.
    rereading, plain = engines
    path, truth = receipt_and_truth("sroie-002", tmp_path)

    before, after = await read_scan(plain, path), await read_scan(rereading, path)

    def junk(page: Page) -> list[str]:
        return [line for line in page.markdown.splitlines() if "+--+" in line or "eet" in line]

    assert junk(before), "Tesseract alone reads the rule as symbols"
    assert junk(after) == []
    assert "CHANGE RM 16.10" in after.markdown and "21:13" in after.markdown
    assert markdown_cer(after, truth) < markdown_cer(before, truth) - 0.03


async def test_a_rule_read_as_words_leaves_the_receipt_when_the_second_reading_sees_none(
    engines: tuple[TesseractEngine, TesseractEngine], tmp_path: Path
) -> None:
    # sroie-000: a dashed rule that Tesseract reads "LUE MARRON AA" at 0.19 and PP-OCRv6
    # "10": 2 letters and digits for 11. The receipt keeps every line of its print.
    rereading, _ = engines
    path, truth = receipt_and_truth("sroie-000", tmp_path)

    page = await read_scan(rereading, path)

    assert "MARRON" not in page.markdown
    assert "EXCHANGEABLE" in page.markdown and "THANK YOU" in page.markdown
    assert "KIDDY FISH" in page.markdown.upper()
    assert markdown_cer(page, truth) < 0.10


def overlaps(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


async def test_words_read_again_lie_where_the_first_reading_found_ink(
    engines: tuple[TesseractEngine, TesseractEngine], tmp_path: Path
) -> None:
    # A re-read line's words keep Tesseract's boxes where they are the same words, and are
    # placed by where PP-OCRv6 read their characters where they are not: either way on the
    # line's own ink, which the searchable PDF and the fields' boxes rely on. A word only
    # the second reading found (the ":" of "Total :   80.91") lies on ink of its own.
    rereading, plain = engines
    path = png_copy("sroie-003.jpg", tmp_path)

    after = await rereading.recognise([png_page(path)])
    before = await plain.recognise([png_page(path)])

    assert after.pages[0].lines_reread > 0
    changed = [w for w in after.words[1] if w.text not in {v.text for v in before.words[1]}]
    assert changed, "some words read differently the second time"
    with Image.open(path) as image:
        grey = image.convert("L")
    for word in after.words[1]:
        on_a_first_word = any(overlaps(word.box, first.box) for first in before.words[1])
        assert on_a_first_word or has_ink(grey, word.box), word


def has_ink(grey: Image.Image, box: tuple[float, float, float, float]) -> bool:
    """True when some pixel inside the box is dark (below half the grey scale)."""
    crop = grey.crop((round(box[0]), round(box[1]), round(box[2]), round(box[3])))
    darkest, _ = crop.getextrema()
    return bool(darkest < 128)


Box = tuple[float, float, float, float]


def rendered_words(
    target: Path, size: tuple[float, float], *placed: tuple[tuple[float, float], str]
) -> dict[str, Box]:
    """Texts drawn at their points (12 pt Helvetica) on a page of ``size`` points, saved at
    150 DPI to ``target``; each word's box in its pixels."""
    page = pymupdf.open().new_page(width=size[0], height=size[1])
    for point, text in placed:
        page.insert_text(point, text, fontsize=12, fontname="helv")
    page.get_pixmap(dpi=150).save(target)
    scale = 150 / 72
    return {
        w[4]: (w[0] * scale, w[1] * scale, w[2] * scale, w[3] * scale)
        for w in page.get_text("words")
    }


def form_row(tmp_path: Path) -> tuple[str, list[ReadWord], list[ReadWord]]:
    """A form's row rendered at 150 DPI, read as Tesseract read 160F's: the words at the
    row's two ends on one (weak) line, the words between them on a line of their own."""
    target = tmp_path / "row.png"
    placed = (((10, 36), "fiduciaire"), ((180, 40), "cotisations sociales"))
    boxes = rendered_words(target, (560, 60), *placed, ((400, 36), "personne"))
    ends = [
        ReadWord("fiduclaire", boxes["fiduciaire"], 0.6, 0),
        ReadWord("persorne", boxes["personne"], 0.6, 0),
    ]
    between = [ReadWord(text, boxes[text], 0.97, 1) for text in ("cotisations", "sociales")]
    return str(target), ends, between


def test_a_weak_lines_cut_leaves_out_another_lines_words_between_its_own(
    reader: LineReader, tmp_path: Path
) -> None:
    # 160F: "el . 4 1) fiduciaire ..." was one line and "cotisations sociales" another;
    # the first line's cut spans the second's words, which its re-read wrote a second time.
    image, ends, between = form_row(tmp_path)

    reread = reread_weak_lines(image, [*ends, *between], reader)

    assert reread.lines_kept == 1
    assert [w.text for w in reread.words] == [
        "fiduciaire",
        "personne",
        "cotisations",
        "sociales",
    ]


class Cuts:
    """A second recogniser that keeps the cuts it is shown and reads nothing in them."""

    def __init__(self) -> None:
        self.shown: list[Image.Image] = []

    def read(self, line: Image.Image) -> LineText:
        self.shown.append(line.copy())
        return LineText([], [], [])


def test_where_another_lines_word_meets_the_lines_own_the_own_word_keeps_its_ink(
    tmp_path: Path,
) -> None:
    image, ends, between = form_row(tmp_path)
    # Another line's box that covers a corner of "fiduciaire" (the rest is blank paper).
    corner = ReadWord("x", (ends[0].box[0] + 30, 40.0, ends[0].box[2] + 60, 90.0), 0.97, 2)
    cuts = Cuts()
    reread_weak_lines(image, [*ends, corner, *between], cuts)

    with Image.open(image) as page:
        own = sum(ink(page.crop(tuple(round(v) for v in word.box))) for word in ends)
    [cut] = cuts.shown
    # The cut shows all of the line's own ink, and none of "cotisations sociales".
    assert own > 0 and ink(cut) == own


def ink(picture: Image.Image) -> int:
    """The dark pixels of a picture."""
    return sum(picture.convert("L").point(lambda v: 255 if v < 128 else 0).histogram()[255:])


def test_the_next_lines_words_under_a_tall_lines_own_stay_in_its_cut(tmp_path: Path) -> None:
    # SROIE 005: a circled sum beside "***Thank You***" made the line's box tall enough to
    # take in the next line's words. Painted over, PP-OCRv6 read the line surer and without
    # its asterisks: under the line's own words, nothing is painted.
    path = tmp_path / "receipt.png"
    boxes = rendered_words(path, (400, 80), ((10, 30), "Thank You"), ((10, 50), "Please Come"))
    scale = 150 / 72
    sum_box = (270 * scale, 15 * scale, 330 * scale, 65 * scale)  # the circled sum (no ink)
    line = [
        ReadWord("Thank", boxes["Thank"], 0.5, 0),
        ReadWord("You", boxes["You"], 0.5, 0),
        ReadWord("3", (sum_box[0], sum_box[1], sum_box[0] + 40, sum_box[3]), 0.3, 0),
        ReadWord(").a0", (sum_box[0] + 50, sum_box[1], sum_box[2], sum_box[3]), 0.3, 0),
    ]
    below = [ReadWord(text, boxes[text], 0.97, 1) for text in ("Please", "Come")]
    cuts = Cuts()
    reread_weak_lines(str(path), [*line, *below], cuts)

    with Image.open(path) as image:
        own, theirs = (
            sum(ink(image.crop(tuple(round(v) for v in w.box))) for w in words)
            for words in (line[:2], below)
        )
    [cut] = cuts.shown
    assert own > 0 and theirs > 0
    assert ink(cut) == own + theirs  # the next line's ink is all there, as on the page
