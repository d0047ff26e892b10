"""The store OCRQ_BLOB_URL names, opened with its timeout and metrics."""

from __future__ import annotations

from ocrq.shared.blobs.base import BlobStore
from ocrq.shared.blobs.folder import FolderBlobs
from ocrq.shared.blobs.metered import MeteredBlobs, Observe
from ocrq.shared.settings import Settings


def open_blob_store(settings: Settings, observe: Observe | None = None) -> BlobStore | None:
    """The configured store, every call bounded and observed; None when none is configured.

    ``observe(op, seconds, nbytes, ok)`` is called after each call (metrics).
    """
    blobs = settings.blobs
    if not blobs.enabled:
        return None
    inner: BlobStore
    if blobs.blob_url.startswith("file://"):
        inner = FolderBlobs(blobs.blob_url)
    elif blobs.blob_url.startswith("s3://"):
        from ocrq.shared.blobs.s3 import S3Blobs  # obstore: only where an s3:// store is used

        inner = S3Blobs.from_settings(blobs)
    else:
        raise ValueError(f"OCRQ_BLOB_URL {blobs.blob_url!r} is not s3:// or file://")
    return MeteredBlobs(inner, blobs.blob_timeout_s, observe)
