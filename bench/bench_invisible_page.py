"""The scanned layout step's invisible-text page: ocrq's operator writer against Shape.insert_text.

    .venv/bin/python -m bench.bench_invisible_page --pdf ../shared/corpus/documents/tracemonkey.pdf

Renders the PDF's first --pages pages at --dpi and reads their words with Tesseract once.
Then, per page and alternately, it builds the invisible-text page that the layout model reads
(consumer/layout/scanned.py) both ways: with ocrq's writer, and with PyMuPDF's
``Shape.insert_text``, one call a word, which is how ocrq wrote it before. It prints the best of
--rounds times for each, and checks that both pages give the same characters, sizes and boxes.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.scanned_inputs import add_page_arguments, read_pages


def shape_page(image_path: str, width: int, height: int, words: Sequence[Any]) -> Any:
    """The invisible page written one word at a time through Shape.insert_text."""
    import pymupdf

    from ocrq.consumer.layout import scanned
    from ocrq.consumer.layout.words import engine_lines

    scale = scanned.page_scale(width, height)
    doc = pymupdf.open()
    page = doc.new_page(width=width * scale, height=height * scale)
    page.insert_image(page.rect, filename=image_path)
    shape = page.new_shape()
    fallback, fallback_added = scanned._FALLBACK, False
    for line in engine_lines(words):
        line = [word for word in line if word.text.strip()]
        if not line:
            continue
        latin = all(ord(char) < 256 for word in line for char in word.text)
        if not latin and not fallback_added:
            page.insert_font(fontname=scanned._FALLBACK_NAME, fontbuffer=fallback.buffer)
            fallback_added = True
        font, name = (scanned._LATIN, "helv") if latin else (fallback, scanned._FALLBACK_NAME)
        size, baseline = scanned._size_and_baseline(line, scale, font)
        for word in line:
            natural = font.text_length(word.text, fontsize=size)
            stretch = (word.box[2] - word.box[0]) * scale / natural if natural > 0 else 1.0
            origin = pymupdf.Point(word.box[0] * scale, baseline)
            morph = (origin, pymupdf.Matrix(max(stretch, 0.05), 1))
            shape.insert_text(
                origin, word.text, fontsize=size, fontname=name, render_mode=3, morph=morph
            )
    shape.commit()
    return doc


def characters(doc: Any) -> list[tuple[Any, ...]]:
    """Every character of the page's text with its span's size and its box."""
    raw = doc[0].get_text("rawdict")
    return [
        (span["size"], char["c"], tuple(char["bbox"]))
        for block in raw["blocks"]
        if block["type"] == 0
        for line in block["lines"]
        for span in line["spans"]
        for char in span["chars"]
    ]


def best_times(
    builders: Sequence[Callable[..., Any]], page: tuple[Any, ...], rounds: int
) -> list[float]:
    """Each builder's least wall time over ``rounds`` builds of the page, taking turns."""
    best = [float("inf")] * len(builders)
    for _ in range(rounds):
        for i, build in enumerate(builders):
            started = time.perf_counter()
            build(*page).close()
            best[i] = min(best[i], time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_page_arguments(parser, rounds=5)
    args = parser.parse_args()
    from ocrq.consumer.layout.scanned import invisible_text_page

    with read_pages(args.pdf, args.pages, args.dpi) as pages:
        for number, page in enumerate(pages, 1):
            with invisible_text_page(*page) as ours, shape_page(*page) as theirs:
                same = characters(ours) == characters(theirs)
            writer, shape = best_times([invisible_text_page, shape_page], page, args.rounds)
            print(
                f"page {number}: {len(page[3])} words, ocrq's writer {writer:.3f} s, "
                f"Shape.insert_text {shape:.3f} s (x{writer / shape:.2f}), "
                f"same characters, sizes and boxes: {same}"
            )


if __name__ == "__main__":
    main()
