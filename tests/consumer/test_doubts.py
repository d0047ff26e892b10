"""Pages whose text may be wrong say so, in the result and in their Markdown."""

from __future__ import annotations

from ocrq.consumer.assemble import assemble
from ocrq.consumer.doubts import NOTE, review_pages
from ocrq.consumer.engines.base import EngineOutput, PageImage
from ocrq.shared.schemas import EngineInfo, Page, Timings

LATIN = frozenset({"Latin"})


def page(number: int, confidence: float | None, scripts: list[str]) -> Page:
    return Page(
        number=number, width=100, height=100, markdown="some text",
        confidence=confidence, scripts=scripts,
    )  # fmt: skip


def image(number: int, rotation: int = 0) -> PageImage:
    return PageImage(
        number=number, path=f"p{number}.png", media_type="image/png",
        width=100, height=100, rotation=rotation,
    )  # fmt: skip


def test_a_confident_page_in_a_readable_script_has_no_warning() -> None:
    clean = page(1, 0.93, ["Latin"])
    review_pages([clean], [image(1)], LATIN, 0.6)
    assert (clean.warnings, clean.markdown) == ([], "some text")


def test_a_low_confidence_page_is_flagged_in_its_result_and_its_markdown() -> None:
    shaky = page(1, 0.41, ["Latin"])
    review_pages([shaky], [image(1)], LATIN, 0.6)
    [warning] = shaky.warnings
    assert "confidence is low (0.41, below 0.60)" in warning
    assert shaky.markdown == f"{NOTE}{warning}\n\nsome text"


def test_a_script_the_engine_cannot_read_is_named() -> None:
    cyrillic = page(1, 0.9, ["Cyrillic"])
    review_pages([cyrillic], [image(1)], LATIN, 0.6)
    [warning] = cyrillic.warnings
    assert "Cyrillic script, which this engine cannot read (it reads Latin)" in warning


def test_an_engine_that_reads_any_script_flags_none() -> None:
    any_script = page(1, None, ["Cyrillic"])
    review_pages([any_script], [image(1)], None, 0.6)
    assert any_script.warnings == []


def test_each_page_carries_the_rotation_its_image_was_turned_by() -> None:
    pages = [page(1, 0.9, []), page(2, 0.9, [])]
    review_pages(pages, [image(1, 0), image(2, 270)], LATIN, 0.6)
    assert [p.rotation for p in pages] == [0, 270]


def test_the_result_counts_the_doubtful_pages() -> None:
    pages = [page(1, 0.95, ["Latin"]), page(2, 0.3, ["Latin"]), page(3, 0.9, ["Hebrew"])]
    review_pages(pages, [image(1), image(2), image(3)], LATIN, 0.6)
    result = assemble(
        job_id="j", media_type="application/pdf", text_pages=[],
        outputs=[EngineOutput(pages=pages)], engine=EngineInfo(name="tesseract", model="m",
        profile="local"), timings=Timings(),
    )  # fmt: skip
    assert result.doubtful_pages == 2
    assert result.markdown.count(NOTE) == 2
