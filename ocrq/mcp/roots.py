"""Which local files `ocrq mcp` may read: only those under its allowed roots (OCRQ_MCP_ROOTS).

A document with a prompt injection can steer an agent into asking for any file the server's
user can read, so a ``path`` is resolved (symlinks and ``..``) and checked against the roots,
then opened without following a link swapped in since, and checked again by what was opened.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ocrq.shared.errors import ErrorCode, OcrqError

ROOTS_ENV = "OCRQ_MCP_ROOTS"
PROC_FD = Path("/proc/self/fd")  # Linux: what an open descriptor really names


class OutsideRoots(OcrqError):
    """A path that resolves outside every allowed root."""

    def __init__(self, path: str) -> None:
        super().__init__(
            ErrorCode.INVALID_REQUEST, f"path {path} is outside the allowed roots ({ROOTS_ENV})"
        )


def roots_from_env(value: str | None, cwd: Path) -> tuple[Path, ...]:
    """OCRQ_MCP_ROOTS split on ``os.pathsep``, each resolved; unset or blank: ``cwd``."""
    entries = [entry.strip() for entry in (value or "").split(os.pathsep) if entry.strip()]
    roots: list[Path] = []
    for entry in entries or [str(cwd)]:
        try:
            root = (cwd / Path(entry).expanduser()).resolve(strict=True)
        except (OSError, RuntimeError) as e:
            raise ValueError(f"{ROOTS_ENV}: {entry}: {getattr(e, 'strerror', e)}") from e
        if not root.is_dir():
            raise ValueError(f"{ROOTS_ENV}: {entry}: not a folder")
        roots.append(root)
    return tuple(roots)


def within(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether an absolute, resolved path is one of the roots or below one (by components)."""
    return any(path.is_relative_to(root) for root in roots)


def resolved_inside(path: str, roots: tuple[Path, ...]) -> Path:
    """The path with its symlinks and ``..`` resolved, if that lies under a root."""
    given = Path(path).expanduser()
    try:
        resolved = given.resolve(strict=True)
    except (OSError, RuntimeError):
        # Missing (or a link loop): decide by where it would lie, so that outside the roots a
        # missing file answers as an existing one does and nothing there can be probed.
        try:
            where = given.resolve(strict=False)
        except (OSError, RuntimeError):
            raise OutsideRoots(path) from None
        if not within(where, roots):
            raise OutsideRoots(path) from None
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"{path}: no such file") from None
    if not within(resolved, roots):
        raise OutsideRoots(path)
    return resolved


def open_checked(resolved: Path, path: str, roots: tuple[Path, ...]) -> int:
    """A descriptor for the resolved file, refused if what opened is not under a root.

    O_NOFOLLOW refuses a final component swapped for a symlink since the check; reading back
    the descriptor's own path catches a folder above it swapped for one. O_NONBLOCK: a FIFO
    must not hold the open waiting for a writer.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(resolved, flags)
    except OSError as e:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"{path}: cannot read: {e.strerror}") from e
    try:
        if PROC_FD.is_dir() and not within(Path(os.path.realpath(PROC_FD / str(fd))), roots):
            raise OutsideRoots(path)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OcrqError(ErrorCode.INVALID_REQUEST, f"{path} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_under_roots(path: str, roots: tuple[Path, ...], max_bytes: int) -> bytes:
    """The bytes of a regular file under one of the roots, at most ``max_bytes`` (blocking)."""
    fd = open_checked(resolved_inside(path, roots), path, roots)
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)  # one more than allowed: enough to know it is too big
    if len(data) > max_bytes:
        raise OcrqError(ErrorCode.PAYLOAD_TOO_LARGE, f"{path}: over {max_bytes} bytes")
    return data
