"""RapidOCR (PP-OCRv4 ONNX models shipped in its wheel) in a process pool: OCRQ_ENGINE=rapidocr.

The earlier default local engine, kept as an option; Tesseract replaced it as the default
(consumer/engines/tesseract.py, and BENCHMARKS.md for the measurements). Nothing is
downloaded at run time: rapidocr-onnxruntime loads its ONNX models from its package.

onnxruntime (1.32 here) ships Microsoft 1DS usage telemetry on Linux too: it keeps a store
under ~/.cache/Microsoft/DeveloperTools and may post events to mobile.events.data.microsoft.com.
The pool's workers run with ``ORT_DISABLE_TELEMETRY=1`` unless the operator set it otherwise.
"""

from __future__ import annotations

import os
from typing import Any

from ocrq.consumer.engines.base import PageImage, Word
from ocrq.consumer.engines.cpu import Call, CpuEngine, text_block, usable_cores
from ocrq.consumer.layout.scanned import structured_blocks
from ocrq.consumer.layout.words import ReadWord
from ocrq.consumer.reading_order import Box, order_lines, to_markdown
from ocrq.shared.lifeline import die_with_parent
from ocrq.shared.schemas import Page
from ocrq.shared.settings import Settings

NAME = "rapidocr"
# The wheel's ch_PP-OCRv4 detection and recognition models (Chinese + English); its
# ch_ppocr_mobile_v2.0 direction classifier is switched off (see load_worker).
MODEL = "rapidocr-onnxruntime/PP-OCRv4"
PROFILE = "local"
TELEMETRY_ENV = "ORT_DISABLE_TELEMETRY"

# Per-process state of the pool's workers: set once by the pool initializer in each worker
# process and reused by every page that process handles. The parent process never sets it.
_ocr: Any = None


def ort_threads(workers: int) -> int:
    """onnxruntime intra-op threads per worker: the usable cores shared out, at least one."""
    return max(1, usable_cores() // max(1, workers))


def load_worker(intra_threads: int) -> None:
    """Pool initializer: die with the worker, and load RapidOCR once in this process."""
    global _ocr
    die_with_parent()
    import onnxruntime
    from rapidocr_onnxruntime import RapidOCR  # heavy imports: only in worker processes

    if os.environ.get(TELEMETRY_ENV) == "1":
        onnxruntime.disable_telemetry_events()

    # inter-op 1: the models are sequential graphs; parallelism comes from intra-op threads
    # and from the pool's processes, so cores are not oversubscribed.
    # use_cls off: the wheel's mobile direction classifier calls many upright English lines
    # "180 degrees" (measured: 11 of 25 lines of a clean 12 pt page), and the flipped crops
    # are then lost. Scanned lines are upright; page rotation is the rasteriser's business.
    _ocr = RapidOCR(intra_op_num_threads=intra_threads, inter_op_num_threads=1, use_cls=False)


def worker_ready() -> bool:
    """True once this worker process has its OCR loaded (used to warm the pool up)."""
    return _ocr is not None


def ocr_page(path: str, number: int, width: int, height: int) -> Page:
    """OCR one page image in a worker process into a Page with blocks and Markdown."""
    return read_page(path, number, width, height)[0]


def read_page(
    path: str, number: int, width: int, height: int, layout: bool = True
) -> tuple[Page, list[Word]]:
    """OCR one page image in a worker process: the page (structured blocks) and its lines.

    RapidOCR gives lines, not words: the lines stand in for words (the invisible-text page,
    the searchable PDF). Should the layout model fail, the page keeps the lines as blocks.
    """
    if _ocr is None:
        raise RuntimeError("OCR worker not initialised")
    try:
        detections, _elapsed = _ocr(path)
    except Exception as e:
        # Plain RuntimeError: the library's own exceptions need not pickle back to the parent.
        # The message names the page, not the file; the remote traceback stays chained.
        raise RuntimeError(f"page {number}: {type(e).__name__}") from e
    boxes = [
        _box(quad, str(text), float(score))
        for quad, text, score in detections or ()
        if str(text).strip()
    ]
    paragraphs = order_lines(boxes)
    leaves = [leaf for paragraph in paragraphs for line in paragraph for leaf in line.leaves]
    words = [
        ReadWord(leaf.text, (leaf.x0, leaf.y0, leaf.x1, leaf.y1), leaf.confidence, i)
        for i, leaf in enumerate(leaves)
    ]
    blocks = structured_blocks(path, width, height, words) if layout else None
    if blocks is None:  # not asked for, or the layout model failed: the lines as text blocks
        blocks = [text_block(w.box, w.text, w.confidence, width, height) for w in words]
        markdown = to_markdown(paragraphs)
    else:
        markdown = "\n\n".join(b.text for b in blocks if b.text)
    page = Page(number=number, width=width, height=height, markdown=markdown, blocks=blocks)
    return page, [Word(text=w.text, box=w.box) for w in words]


def _box(quad: list[list[float]], text: str, score: float) -> Box:
    """A detection's quadrilateral as its axis-aligned extent."""
    xs = [float(point[0]) for point in quad]
    ys = [float(point[1]) for point in quad]
    return Box(min(xs), min(ys), max(xs), max(ys), text=text.strip(), confidence=score)


class RapidOcrEngine(CpuEngine):
    """RapidOCR in a pool of ``settings.ocr.local_workers`` processes (0: one per core)."""

    name: str = NAME
    model: str = MODEL
    profile: str = PROFILE

    def __init__(self, settings: Settings) -> None:
        # Workers inherit the environment when spawned; onnxruntime reads this at start-up.
        os.environ.setdefault(TELEMETRY_ENV, "1")
        workers = settings.ocr.local_workers or usable_cores()
        super().__init__(
            workers, settings.ocr.engine_timeout_s, load_worker, (ort_threads(workers),)
        )

    def page_call(self, page: PageImage, languages: str | None, layout: bool = True) -> Call:
        """Read one page; RapidOCR's models take no language choice."""
        return read_page, (page.path, page.number, page.width, page.height, layout)

    def ready_call(self) -> Call:
        """Answers True once a worker has loaded its models."""
        return worker_ready, ()
