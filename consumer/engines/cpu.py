"""What the local CPU engines share: a healing process pool, one page per call, timeouts.

OCR is CPU-bound and holds the GIL in places, so it runs in worker processes (spawned,
each loading its models once), never on the event loop.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ocrq.consumer.engines.base import EngineOutput, PageImage, Word
from ocrq.consumer.pool import BrokenProcessPool, PoolClosed, RecyclingPool
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Block, Page, Usage

Call = tuple[Callable[..., Any], tuple[Any, ...]]


def usable_cores() -> int:
    """The cores this process may run on."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1


def text_block(
    box: tuple[float, float, float, float], text: str, confidence: float, width: int, height: int
) -> Block:
    """A text block: bbox normalised to 0-1 (4 places), bbox_px clamped to the page."""
    x0 = min(max(0, math.floor(box[0])), width)
    y0 = min(max(0, math.floor(box[1])), height)
    x1 = min(max(x0, math.ceil(box[2])), width)
    y1 = min(max(y0, math.ceil(box[3])), height)
    return Block(
        label="text",
        text=text,
        bbox=[
            round(x0 / width, 4),
            round(y0 / height, 4),
            round(x1 / width, 4),
            round(y1 / height, 4),
        ],
        bbox_px=[x0, y0, x1, y1],
        confidence=round(confidence, 4),
    )


class CpuEngine:
    """A pool of ``workers`` processes, each set up by ``initializer``; one page per call."""

    name: str
    model: str
    profile: str = "local"
    reads_scripts: frozenset[str] | None = None  # None: the engine does not say

    def __init__(
        self,
        workers: int,
        timeout_s: float,
        initializer: Callable[..., None],
        initargs: tuple[Any, ...],
    ) -> None:
        self._workers = max(1, workers)
        self._timeout_s = timeout_s
        self._initializer, self._initargs = initializer, initargs
        self._pool = RecyclingPool(self._new_pool, self._workers)

    @property
    def slots(self) -> int:
        """Pages the engine reads at once: one per process."""
        return self._workers

    def _new_pool(self) -> ProcessPoolExecutor:
        # spawn, not fork: the parent runs an event loop and client threads, which a forked
        # child would inherit in whatever state they were in.
        return ProcessPoolExecutor(
            max_workers=self._workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=self._initializer,
            initargs=self._initargs,
        )

    def page_call(self, page: PageImage, languages: str | None, layout: bool = True) -> Call:
        """The picklable call that reads one page in a worker process: (Page, [Word])."""
        raise NotImplementedError

    def ready_call(self) -> Call:
        """A call that answers True once a worker process has its models loaded."""
        raise NotImplementedError

    async def warm_up(self) -> None:
        """Start every worker process and load its models (otherwise the first pages do)."""
        ready = await self._run([self.ready_call() for _ in range(self._workers)])
        if not all(ready):
            raise OcrqError(ErrorCode.ENGINE_UNAVAILABLE, "local OCR workers did not start")

    async def recognise(
        self,
        pages: list[PageImage],
        *,
        profile: str | None = None,
        languages: str | None = None,
        layout: bool = True,
    ) -> EngineOutput:
        """OCR each page in the pool, in parallel up to the pool size; no profiles here.

        A page call answers (Page, words): the words go with the output for the searchable
        PDF, keyed by page number.
        """
        results: list[tuple[Page, list[Word]]] = await self._run(
            [self.page_call(p, languages, layout) for p in pages]
        )
        return EngineOutput(
            pages=[page for page, _ in results],
            usage=Usage(requests=len(pages)),
            words={page.number: words for page, words in results},
        )

    async def _run(self, calls: list[Call]) -> list[Any]:
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
