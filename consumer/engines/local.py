"""The local CPU OCR engine: RapidOCR (PP-OCRv4 ONNX models shipped in its wheel) in a process pool.

Nothing is downloaded at run time: rapidocr-onnxruntime loads its ONNX models from files
inside the installed package. OCR is CPU-bound and holds the GIL in places, so it runs
in worker processes, never on the event loop.

onnxruntime (1.32 here) ships Microsoft 1DS usage telemetry on Linux too: it keeps a store
under ~/.cache/Microsoft/DeveloperTools and may post events to mobile.events.data.microsoft.com.
The pool's workers run with ``ORT_DISABLE_TELEMETRY=1`` unless the operator set it otherwise.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ocrq.consumer.engines.base import EngineOutput, PageImage
from ocrq.consumer.pool import BrokenProcessPool, PoolClosed, RecyclingPool
from ocrq.consumer.reading_order import Box, order_lines, to_markdown
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.lifeline import die_with_parent
from ocrq.shared.schemas import Block, Page, Usage
from ocrq.shared.settings import Settings

NAME = "local"
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
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // max(1, workers))


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
    blocks = [
        _block(leaf, width, height)
        for paragraph in paragraphs
        for line in paragraph
        for leaf in line.leaves
    ]
    return Page(
        number=number,
        width=width,
        height=height,
        markdown=to_markdown(paragraphs),
        blocks=blocks,
    )


def _box(quad: list[list[float]], text: str, score: float) -> Box:
    """A detection's quadrilateral as its axis-aligned extent."""
    xs = [float(point[0]) for point in quad]
    ys = [float(point[1]) for point in quad]
    return Box(min(xs), min(ys), max(xs), max(ys), text=text.strip(), confidence=score)


def _block(box: Box, width: int, height: int) -> Block:
    """A text block: bbox normalised to 0-1 (4 places), bbox_px clamped to the page."""
    x0 = min(max(0, math.floor(box.x0)), width)
    y0 = min(max(0, math.floor(box.y0)), height)
    x1 = min(max(x0, math.ceil(box.x1)), width)
    y1 = min(max(y0, math.ceil(box.y1)), height)
    return Block(
        label="text",
        text=box.text,
        bbox=[
            round(x0 / width, 4),
            round(y0 / height, 4),
            round(x1 / width, 4),
            round(y1 / height, 4),
        ],
        bbox_px=[x0, y0, x1, y1],
        confidence=round(box.confidence, 4),
    )


class LocalEngine:
    """CPU OCR in a pool of ``settings.local_workers`` processes, one RapidOCR per process."""

    name: str = NAME
    model: str = MODEL
    profile: str = PROFILE

    def __init__(self, settings: Settings) -> None:
        self._workers = max(1, settings.local_workers)
        self._timeout_s = settings.engine_timeout_s
        self._pool = RecyclingPool(self._new_pool, self._workers)

    def _new_pool(self) -> ProcessPoolExecutor:
        # Workers inherit the environment when spawned; onnxruntime reads this at start-up.
        os.environ.setdefault(TELEMETRY_ENV, "1")
        # spawn, not fork: the parent runs an event loop and client threads, which a forked
        # child would inherit in whatever state they were in.
        return ProcessPoolExecutor(
            max_workers=self._workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=load_worker,
            initargs=(ort_threads(self._workers),),
        )

    async def warm_up(self) -> None:
        """Start every worker process and load its models (otherwise the first pages do)."""
        ready = await self._run([(worker_ready, ()) for _ in range(self._workers)])
        if not all(ready):
            raise OcrqError(ErrorCode.ENGINE_UNAVAILABLE, "local OCR workers did not start")

    async def recognise(
        self, pages: list[PageImage], *, profile: str | None = None
    ) -> EngineOutput:
        """OCR each page in the pool (in parallel up to the pool size); ``profile`` is unused."""
        calls = [(ocr_page, (p.path, p.number, p.width, p.height)) for p in pages]
        results = await self._run(calls)
        return EngineOutput(pages=results, usage=Usage(requests=len(pages)))

    async def _run(self, calls: list[tuple[Any, tuple[Any, ...]]]) -> list[Any]:
        """Run calls in the pool, each under the timeout; map failures to catalogue codes."""
        tasks = [
            asyncio.ensure_future(self._pool.run(self._timeout_s, fn, *args)) for fn, args in calls
        ]
        try:
            return await asyncio.gather(*tasks)
        except TimeoutError as e:
            raise OcrqError(
                ErrorCode.TIMEOUT, f"local OCR took longer than {self._timeout_s:g} s"
            ) from e
        except PoolClosed as e:
            raise OcrqError(ErrorCode.ENGINE_UNAVAILABLE, "local OCR engine is closed") from e
        except BrokenProcessPool as e:
            # A worker died (killed, out of memory): the pool has already been replaced.
            raise OcrqError(ErrorCode.ENGINE_UNAVAILABLE, "a local OCR worker died") from e
        except Exception as e:
            raise OcrqError(ErrorCode.ENGINE_ERROR, f"local OCR failed: {e}") from e
        finally:
            for task in tasks:  # one page failed: the others of this call stop too
                task.cancel()

    async def probe(self) -> bool:
        """Always up: the pool replaces a dead OCR process by itself."""
        return True

    async def aclose(self) -> None:
        """Shut the pool down, waiting for its processes to exit."""
        await self._pool.aclose()
