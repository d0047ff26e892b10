"""Child processes end with their parent, and leave Ctrl-C to it.

A worker's helpers (its render pool, its local OCR pool, multiprocessing's forkserver) and
the processes of ``ocrq up`` would otherwise outlive a SIGKILLed parent for ever: pool
workers hold both ends of their own queues, so they never see the parent go. On Linux the
kernel's parent-death signal ends them; elsewhere this only ignores SIGINT.

A terminal's Ctrl-C reaches the whole process group. The parent decides what it means
(drain, then stop its children), so children ignore it instead of dying mid-page.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1
# The process whose helpers these are: a helper that starts after it died exits at once.
ANCHOR_VARIABLE = "OCRQ_LIFELINE_PID"


def anchor_helpers() -> None:
    """Make this process the one every helper started from now on lives and dies with."""
    os.environ[ANCHOR_VARIABLE] = str(os.getpid())


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In a child process: receive ``sig`` when the parent ends; ignore SIGINT.

    The signal is armed against whichever process is the parent when it runs; if the parent
    (or the anchor process) already ended before that, the child exits instead of lingering.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform != "linux":
        return
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    anchor = int(os.environ.get(ANCHOR_VARIABLE) or parent)
    # A parent that died before getppid() leaves us with init (1) as the parent, and an
    # anchor killed a moment ago is a zombie until it is reaped: both mean "already gone".
    orphaned = parent == 1 and anchor != 1
    if orphaned or os.getppid() != parent or not pid_exists(anchor):
        os._exit(1)


def terminate_with_parent() -> None:
    """die_with_parent with SIGTERM: for a child that must shut down cleanly (Redis)."""
    die_with_parent(signal.SIGTERM)


def pid_exists(pid: int) -> bool:
    """True when a live process (not a zombie) has this pid on this host, ours or not."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:  # a zombie has ended: it only waits for its parent to collect its exit status
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (not Linux): the signal check is all there is
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
