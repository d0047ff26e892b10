"""Where ZIP batches are spooled while read: the spool folder, one slot per upload.

A ZIP keeps its directory at its end, so a ZIP batch (or a ZIP part of a multipart batch)
is written to disk before it is read. With ``OCRQ_SPOOL_DIR`` set, that folder is a volume
sized for ``OCRQ_SPOOL_SLOTS`` uploads of ``OCRQ_MAX_BATCH_BYTES`` each (k8s: an emptyDir
whose sizeLimit says so), and an upload spools only in a slot it holds: ``slot-N/`` under an
exclusive ``flock`` of ``slot-N.lock``. The lock is shared by every producer process using
the folder and dies with its holder, so a crashed upload never keeps a slot; what it left
in the slot is removed by the next holder. With every slot held the upload is refused (503,
Retry-After) before its body is read. Unset, the system's temp folder is used unlimited.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import IO

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.settings import Settings

RETRY_AFTER_S = 5


class Spool:
    """One request's spool folder, taken on first use, given back when ``async with`` ends."""

    def __init__(self, settings: Settings) -> None:
        self.root = settings.uploads.spool_dir
        self.slots = settings.uploads.spool_slots
        self._lock: IO[bytes] | None = None
        self._folder: Path | None = None
        self._temp: tempfile.TemporaryDirectory[str] | None = None
        self._guard = threading.Lock()  # taken from worker threads (PartSink.add)

    async def __aenter__(self) -> Spool:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Off the loop: unlinking a 1 GiB file takes the file system a while. The thread
        # runs to its end even if this await is cancelled.
        await asyncio.to_thread(self.release)

    def folder(self) -> Path:
        """The folder to spool in: a held slot of the spool dir, or a temporary folder."""
        with self._guard:
            if self._folder is None:
                self._folder = self._take_slot() if self.root else self._temporary()
            return self._folder

    def release(self) -> None:
        """Remove what was spooled and give the slot back."""
        with self._guard:
            if self._folder is not None and self._lock is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
            if self._temp is not None:
                self._temp.cleanup()
            if self._lock is not None:
                self._lock.close()  # closing the file drops its flock
            self._lock = self._folder = self._temp = None

    def _temporary(self) -> Path:
        self._temp = tempfile.TemporaryDirectory(prefix="ocrq-batch-")
        return Path(self._temp.name)

    def _take_slot(self) -> Path:
        root = Path(self.root)
        for slot in range(self.slots):
            try:
                lock = (root / f"slot-{slot}.lock").open("ab")
            except OSError as e:
                raise OcrqError(
                    ErrorCode.UNAVAILABLE, f"the spool folder is not writable ({e.strerror})"
                ) from e
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            folder = root / f"slot-{slot}"
            shutil.rmtree(folder, ignore_errors=True)  # a crashed holder's leftovers
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o700)
            self._lock = lock
            return folder
        raise OcrqError(
            ErrorCode.UNAVAILABLE,
            f"all {self.slots} ZIP spool slots are in use (OCRQ_SPOOL_SLOTS); retry shortly",
            retry_after=RETRY_AFTER_S,
        )
