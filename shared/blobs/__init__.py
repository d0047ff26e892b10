"""The object store: documents, results and files outside Redis (OCRQ_BLOB_URL).

One small interface (``BlobStore``) with two backends: S3-compatible stores
(``s3://bucket/prefix``, shared/blobs/s3.py) and a folder on one machine
(``file:///path``, shared/blobs/folder.py). ``open_blob_store`` picks one from the settings;
None means no store is configured and every byte stays in Redis.
"""

from ocrq.shared.blobs.base import (
    BlobError,
    BlobInfo,
    BlobMissing,
    BlobStore,
    BlobUnavailable,
)
from ocrq.shared.blobs.metered import Observe
from ocrq.shared.blobs.opening import open_blob_store
from ocrq.shared.blobs.paths import (
    document_key,
    result_key,
    result_prefix,
    tenant_part,
    upload_key,
)
from ocrq.shared.blobs.transfer import BlobTooLarge

__all__ = [
    "BlobError",
    "BlobInfo",
    "BlobMissing",
    "BlobStore",
    "BlobTooLarge",
    "BlobUnavailable",
    "Observe",
    "document_key",
    "open_blob_store",
    "result_key",
    "result_prefix",
    "tenant_part",
    "upload_key",
]
