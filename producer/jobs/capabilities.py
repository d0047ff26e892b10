"""GET /v1/capabilities: what this deployment accepts, so clients choose how to send."""

from __future__ import annotations

import importlib.metadata
from typing import Any

from litestar import Request, get
from litestar.datastructures import State

from ocrq.producer.runtime import caller
from ocrq.shared.schemas import Capabilities


def ocrq_version() -> str:
    """The installed package's version ("unknown" when run from a bare source tree)."""
    try:
        return importlib.metadata.version("ocrq")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@get("/v1/capabilities", summary="What this deployment accepts: limits, store, uploads")
async def capabilities(request: Request[Any, Any, Any], state: State) -> Capabilities:
    """The limits and paths a client picks from: a file over ``inline_max_bytes`` goes
    through POST /v1/uploads when ``uploads`` is true. Needs the caller's key, as /v1 does."""
    rt, _ = caller(request, state)
    settings = rt.settings
    store = rt.blobs is not None
    return Capabilities(
        version=ocrq_version(),
        blob_store=store,
        uploads=store,  # presigned by the store, or PUT through the producer (folder store)
        inline_max_bytes=settings.blobs.inline_max_bytes,
        max_document_bytes=settings.api.max_document_bytes,
        max_source_bytes=settings.blobs.max_source_bytes,
        max_source_pages=settings.blobs.max_source_pages,
        max_pages=settings.worker.default_max_pages,
    )


CAPABILITY_HANDLERS = [capabilities]
