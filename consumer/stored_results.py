"""A finished job's result written to the object store, when one is configured.

Under ``results/<tenant>/<job>/`` (shared/blobs/paths.py): every file the job keeps
(``images/…`` figures, ``searchable.pdf``), then ``result.md`` and ``result.json`` (the
Result JSON the Redis path would have kept). Redis then keeps only the prefix
(Outcome.stored); the per-page progress still goes to Redis while the job runs.

With ``options.output_prefix`` the Markdown and the JSON are also written as
``<output_prefix>/<stem>.md`` and ``<stem>.json``: ``stem`` is the filename without its
extension (the job id when it has none). When another job's result is already there (two
files of a batch with one name, or an earlier run into the same prefix), this job's go to
``<stem>-<job id>.*`` instead; two such jobs finishing at the very same moment may still
both take the plain name, and the last one written wins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import TypeVar

import msgspec

from ocrq.consumer.retry import through_blob_outages
from ocrq.shared.blobs.base import BlobStore
from ocrq.shared.blobs.paths import RESULT_JSON, RESULT_MARKDOWN, result_prefix
from ocrq.shared.record import SEARCHABLE_PDF
from ocrq.shared.render.markdown import document_markdown
from ocrq.shared.schemas import JobOptions, Result

T = TypeVar("T")
JSON_TYPE = "application/json"
MARKDOWN_TYPE = "text/markdown; charset=utf-8"
PUTS_AT_ONCE = 8  # figures written in parallel: a page of figures is a burst of small PUTs


class ResultWriter:
    """Writes results to the store, every call waited out through store outages."""

    def __init__(self, blobs: BlobStore, outage_s: float) -> None:
        self.blobs, self.outage_s = blobs, outage_s

    async def write(
        self,
        job_id: str,
        tenant: str,
        filename: str | None,
        options: JobOptions,
        result: Result,
        files: dict[str, bytes],
        searchable: Path | None,
    ) -> str:
        """Write the job's result objects (its files not written yet); the prefix they are under."""
        prefix = result_prefix(tenant, job_id)
        await self.put_files(job_id, tenant, files, set())
        if searchable is not None:
            await self._retried(
                lambda: self.blobs.put_file(prefix + SEARCHABLE_PDF, searchable, "application/pdf"),
                "writing the searchable PDF",
            )
        markdown = document_markdown(
            result.pages, result.segments, keep_furniture=options.keep_headers_footers
        ).encode()
        as_json = msgspec.json.encode(result)
        await self._put(prefix + RESULT_MARKDOWN, markdown, MARKDOWN_TYPE)
        # Last: a result.json in the store means everything else of the job is there too.
        await self._put(prefix + RESULT_JSON, as_json, JSON_TYPE)
        if options.output_prefix:
            await self._deliver(options.output_prefix, job_id, filename, markdown, as_json)
        return prefix

    async def put_files(
        self, job_id: str, tenant: str, files: dict[str, bytes], stored: set[str]
    ) -> None:
        """Write the job's files ("images/…") now, then drop their bytes from ``files``; their
        names join ``stored``. Files added to ``files`` meanwhile wait for the next call."""
        prefix = result_prefix(tenant, job_id)
        names = list(files)
        gate = asyncio.Semaphore(PUTS_AT_ONCE)

        async def put_file(name: str) -> None:
            async with gate:
                await self._put(prefix + name, files[name], content_type_of(name))

        await asyncio.gather(*(put_file(name) for name in names))
        for name in names:
            del files[name]
        stored.update(names)

    async def _deliver(
        self, output_prefix: str, job_id: str, filename: str | None, markdown: bytes, body: bytes
    ) -> None:
        """``<output_prefix>/<stem>.md`` and ``.json``, or ``<stem>-<job id>.*`` when taken."""
        folder = output_prefix.rstrip("/") + "/"
        stem = output_stem(filename, job_id)
        if await self._taken_by_another(folder + stem + ".json", job_id):
            stem = f"{stem}-{job_id}"
        await self._put(folder + stem + ".md", markdown, MARKDOWN_TYPE)
        await self._put(folder + stem + ".json", body, JSON_TYPE)

    async def _taken_by_another(self, key: str, job_id: str) -> bool:
        """True when ``key`` holds another job's result (a retry of this job rewrites its own)."""
        found = await self._retried(lambda: self.blobs.head(key), "checking the output prefix")
        if found is None:
            return False
        head = await self._retried(
            lambda: self.blobs.get_range(key, 0, 256), "checking the output prefix"
        )
        return msgspec.json.encode({"id": job_id})[:-1] not in head  # '{"id":"<job>"'

    async def _put(self, key: str, data: bytes, content_type: str) -> None:
        await self._retried(lambda: self.blobs.put(key, data, content_type), f"writing {key}")

    async def _retried(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        return await through_blob_outages(call, what, self.outage_s)


def output_stem(filename: str | None, job_id: str) -> str:
    """The filename's last part without its extension; the job id when nothing is left."""
    name = PurePosixPath((filename or "").replace("\\", "/")).name
    stem = "".join(c for c in PurePosixPath(name).stem if c.isprintable()).strip()
    return stem if stem and stem not in {".", ".."} and not stem.startswith(".") else job_id


def content_type_of(name: str) -> str:
    """The Content-Type a job's file is written with."""
    if name.endswith(".png"):
        return "image/png"
    if name.endswith(".pdf"):
        return "application/pdf"
    return "application/octet-stream"
