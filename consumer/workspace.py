"""Per-job scratch folders in RAM (/dev/shm), removed on every exit and swept after crashes."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

_warned_fallbacks: set[str] = set()


def shm_root(settings_shm_dir: str) -> Path:
    """``<shm_dir>/ocrq`` when shm_dir is a writable folder, else ``<tmp>/ocrq-shm``."""
    shm_dir = Path(settings_shm_dir)
    if shm_dir.is_dir() and os.access(shm_dir, os.W_OK | os.X_OK):
        root = shm_dir / "ocrq"
    else:
        root = Path(tempfile.gettempdir()) / "ocrq-shm"
        if settings_shm_dir not in _warned_fallbacks:
            _warned_fallbacks.add(settings_shm_dir)
            log.warning("shm_dir_unusable", shm_dir=settings_shm_dir, fallback=str(root))
    # Uploaded documents are tenant data: keep the folder private to this user.
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return root


def _safe_name(name: str, what: str) -> str:
    """Refuse names that would escape the root (they come from Redis, not from us)."""
    if not name or name in {".", ".."} or "/" in name or "\\" in name or "\x00" in name:
        raise ValueError(f"unsafe {what} for a workspace folder: {name!r}")
    return name


@contextlib.contextmanager
def job_workspace(root: Path, worker: str, job_id: str) -> Iterator[Path]:
    """Yield a fresh ``<root>/<worker>/<job_id>/`` folder and remove it on every exit path."""
    folder = root / _safe_name(worker, "worker name") / _safe_name(job_id, "job id")
    # A reclaimed job may find a folder left by this worker's earlier attempt: start clean.
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700, parents=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    """True when a process with this pid exists on this host (ours or another user's)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _local_pid(folder_name: str, hostname: str) -> int | None:
    """The pid in ``<hostname>-<pid>`` or ``<hostname>-<pid>-<rand>``; None if not this host's."""
    prefix = f"{hostname}-"
    if not folder_name.startswith(prefix):
        return None
    pid_text = folder_name[len(prefix) :].split("-", 1)[0]
    return int(pid_text) if pid_text.isdigit() else None


def sweep_stale(root: Path) -> list[Path]:
    """Remove worker folders of this host whose process is gone; return what was removed."""
    if not root.is_dir():
        return []
    hostname = socket.gethostname()
    removed: list[Path] = []
    for folder in sorted(root.iterdir()):
        pid = _local_pid(folder.name, hostname)
        # Unparseable names, other hosts' folders and live processes' folders stay.
        if pid is None or not folder.is_dir() or _pid_alive(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
            log.info("swept_stale_workspace", folder=str(folder), pid=pid)
    return removed
