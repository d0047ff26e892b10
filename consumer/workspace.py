"""Scratch folders in RAM (/dev/shm): one per stack, one per worker in it, one per job in that.

``<shm_dir>/ocrq/<stack>/<worker>/<job_id>/``. With an object store, large documents spool
to the same layout on disk, ``<document_spool_dir>/ocrq-spool/<stack>/<worker>/<job_id>/``.
The stack folder is named after a hash of the Redis URL and key prefix, so two stacks on
one machine never touch each other's files. Each
worker folder holds an ``owner`` file naming the process that made it (host, boot, pid and
the pid's start time); a sweep removes a worker folder only when that process provably no
longer runs. The start time matters: in a container a worker is usually pid 1 after every
restart, and a pid alone cannot tell the old process from the new one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import structlog

from ocrq.shared.lifeline import pid_exists

log = structlog.get_logger("ocrq.workspace")

OWNER_FILE = "owner"
_warned_fallbacks: set[str] = set()


class Owner(msgspec.Struct, frozen=True):
    """The process that owns a worker folder."""

    host: str
    boot: str  # the kernel's boot id: a folder from before a reboot is nobody's
    pid: int
    started: int | None  # the pid's start time in clock ticks since boot (None: unknown)


def stack_id(redis_url: str, prefix: str) -> str:
    """A short stable name for one stack: the Redis it uses and its key prefix."""
    return hashlib.sha256(f"{redis_url}\n{prefix}".encode()).hexdigest()[:16]


def shm_base(shm_dir: str) -> Path:
    """``<shm_dir>/ocrq`` when shm_dir is a writable folder, else ``<tmp>/ocrq-shm``."""
    path = Path(shm_dir)
    if path.is_dir() and os.access(path, os.W_OK | os.X_OK):
        return path / "ocrq"
    if shm_dir not in _warned_fallbacks:
        _warned_fallbacks.add(shm_dir)
        log.warning("shm_dir_unusable", shm_dir=shm_dir, fallback=tempfile.gettempdir())
    return Path(tempfile.gettempdir()) / "ocrq-shm"


def stack_root(shm_dir: str, redis_url: str, prefix: str) -> Path:
    """This stack's folder, created private to this user (uploads are tenant data)."""
    root = shm_base(shm_dir) / stack_id(redis_url, prefix)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return root


def spool_root(spool_dir: str, redis_url: str, prefix: str) -> Path:
    """This stack's folder on the disk spool (large documents read from a store or a URL);
    ``spool_dir`` "": the system's temp folder."""
    root = Path(spool_dir or tempfile.gettempdir()) / "ocrq-spool" / stack_id(redis_url, prefix)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return root


def safe_name(name: str, what: str) -> str:
    """Refuse names that would escape the root (job ids come from Redis, not from us)."""
    if not name or name in {".", ".."} or "/" in name or "\\" in name or "\x00" in name:
        raise ValueError(f"unsafe {what} for a workspace folder: {name!r}")
    return name


def current_owner(pid: int | None = None) -> Owner:
    """The Owner record of a process on this host (this one by default)."""
    pid = os.getpid() if pid is None else pid
    return Owner(host=socket.gethostname(), boot=_boot_id(), pid=pid, started=_start_ticks(pid))


def claim_worker_folder(root: Path, worker: str) -> Path:
    """Create ``<root>/<worker>/`` owned by this process, clearing a dead namesake's files."""
    folder = root / safe_name(worker, "worker name")
    owner = read_owner(folder)
    if owner is not None and owner != current_owner() and _alive(owner):
        raise RuntimeError(
            f"worker name {worker!r} is in use by pid {owner.pid} on {owner.host}: "
            "every worker of a stack needs its own OCRQ_WORKER_NAME"
        )
    # A restarted container keeps its pod's name (and its emptyDir): the old folder is ours.
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700, parents=True)
    (folder / OWNER_FILE).write_bytes(msgspec.json.encode(current_owner()))
    return folder


def read_owner(folder: Path) -> Owner | None:
    """The owner a worker folder names; None when it has no readable owner file."""
    try:
        return msgspec.json.decode((folder / OWNER_FILE).read_bytes(), type=Owner)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


@contextlib.contextmanager
def job_workspace(worker_folder: Path, job_id: str) -> Iterator[Path]:
    """Yield a fresh ``<worker_folder>/<job_id>/`` and remove it on every exit path."""
    folder = worker_folder / safe_name(job_id, "job id")
    # A reclaimed job may find a folder left by this worker's earlier attempt: start clean.
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700, parents=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sweep_stale(root: Path) -> list[Path]:
    """Remove worker folders whose owner provably no longer runs; return what was removed."""
    if not root.is_dir():
        return []
    removed: list[Path] = []
    for folder in sorted(root.iterdir()):
        owner = read_owner(folder) if folder.is_dir() else None
        # No owner file, another host's folder, or a live owner: not provably dead, kept.
        if owner is None or owner.host != socket.gethostname() or _alive(owner):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
            log.info("swept_stale_workspace", folder=str(folder), pid=owner.pid)
    return removed


def _alive(owner: Owner) -> bool:
    """True while the owner's process runs (same boot, pid alive, same start time)."""
    if owner.host != socket.gethostname():
        return True  # another host's process: nothing here can tell, so assume it runs
    if owner.boot != _boot_id() or not pid_exists(owner.pid):
        return False
    started = _start_ticks(owner.pid)
    return owner.started is None or started is None or started == owner.started


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:  # not Linux: no boot id, every folder counts as this boot's
        return ""


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (after the parenthesised name, which may hold spaces)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 else None
