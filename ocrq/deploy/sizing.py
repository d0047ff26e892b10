"""How much one worker holds: engine slots, pages in flight, jobs, its /dev/shm, and (with an
object store) its disk spool for big documents.

The figures follow consumer/flow.py (what a worker keeps in flight); the KEDA targets
(ocrq/deploy/keda.py) and ``ocrq k8s sizing`` read them.
"""

from __future__ import annotations

import math

from ocrq.shared.settings import Settings

# Worst-case bytes a rendered page takes on /dev/shm: a PNG of a noisy scan is about
# the size of its raw RGB pixels, so size for raw (3 bytes/pixel), never the 1-3 MB typical.
A4_INCHES = (8.27, 11.69)
RGB_BYTES = 3
# A local engine's slots are its OCR processes: one per core when OCRQ_LOCAL_WORKERS is 0,
# so size for a pod of up to this many cores.
LOCAL_SLOTS_WHEN_PER_CORE = 8


def page_bytes(dpi: int) -> int:
    """Raw RGB bytes of one A4 page rendered at ``dpi`` (the shm worst case per page)."""
    width = math.ceil(A4_INCHES[0] * dpi)
    height = math.ceil(A4_INCHES[1] * dpi)
    return width * height * RGB_BYTES


def engine_slots(settings: Settings) -> int:
    """Requests one worker keeps in the engine (consumer/flow.py): vLLM's concurrency, or
    a local engine's processes."""
    if settings.ocr.engine_name == "vllm":
        return settings.ocr.engine_concurrency
    local = settings.ocr.local_workers or LOCAL_SLOTS_WHEN_PER_CORE
    return min(settings.ocr.engine_concurrency, local)


def pages_in_flight(settings: Settings, batch_size: int = 1) -> int:
    """Pages inside the engine at once: a page group of ``batch_size`` pages per engine slot."""
    return engine_slots(settings) * batch_size


def jobs_per_worker(settings: Settings) -> int:
    """The jobs one busy worker takes: its page flow holds at most two engine-fulls of
    one-page jobs (consumer/flow.py ``room``), and never more than OCRQ_MAX_JOBS."""
    return min(settings.worker.max_jobs, 2 * engine_slots(settings))


def shm_document_bytes(settings: Settings) -> int:
    """The most one job's document takes in its /dev/shm folder: an inline one (up to
    OCRQ_MAX_DOCUMENT_BYTES; with a store up to OCRQ_INLINE_MAX_BYTES), or, with a store,
    one read from it of at most OCRQ_SPOOL_SHM_MAX_MB (larger ones spool to disk)."""
    if not settings.blobs.enabled:
        return settings.api.max_document_bytes
    inline = min(settings.api.max_document_bytes, settings.blobs.inline_max_bytes)
    return max(inline, settings.blobs.spool_shm_max_mb * 2**20)


def document_spool_bytes(settings: Settings) -> int:
    """The disk one worker's document spool (OCRQ_DOCUMENT_SPOOL_DIR) needs, worst case:
    each of its jobs a document of OCRQ_MAX_SOURCE_BYTES; none without a store."""
    if not settings.blobs.enabled:
        return 0
    return settings.worker.max_jobs * settings.blobs.max_source_bytes


def shm_size_bytes(settings: Settings, dpi: int | None = None, batch_size: int = 1) -> int:
    """The /dev/shm one worker needs, worst case: the documents of its jobs (each job's
    folder holds its document), the pages in the engine (a page's file lives until its
    answer), and the pages rendered ahead, which OCRQ_RENDER_AHEAD_MB bounds."""
    documents = settings.worker.max_jobs * shm_document_bytes(settings)
    in_engine = page_bytes(dpi or settings.worker.default_dpi) * pages_in_flight(
        settings, batch_size
    )
    return documents + in_engine + settings.worker.render_ahead_mb * 2**20
