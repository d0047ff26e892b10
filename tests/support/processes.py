"""Which processes a test session started: every child inherits a token in its environment.

``/proc/<pid>/environ`` is the environment a process was started with, so the token finds a
session's processes however deep they are and after they were re-parented to pid 1 (the
orphans of a SIGKILLed worker). Linux only; elsewhere nothing is found.
"""

from __future__ import annotations

import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import subprocess
import sys
import time
from pathlib import Path

TOKEN_VARIABLE = "OCRQ_TEST_SESSION"


def processes_with(token: str) -> list[tuple[int, str]]:
    """(pid, command line) of every other process started with this token in its environment."""
    needle = f"{TOKEN_VARIABLE}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state != "Z":  # a zombie holds nothing; its parent reaps it
            found.append((int(entry.name), cmdline.strip()))
    return found


def stop_own_helpers() -> None:
    """Stop this process's multiprocessing forkserver and resource tracker (they outlive pools)."""
    multiprocessing.forkserver._forkserver._stop()  # type: ignore[attr-defined]
    multiprocessing.resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]


def leftovers(token: str, grace_s: float = 10.0) -> list[tuple[int, str]]:
    """The session's processes still alive after a grace for those already on their way out."""
    deadline = time.monotonic() + grace_s
    while (alive := processes_with(token)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


class SessionGuard:
    """A pytest plugin: the session fails when a process it started is still alive at the end."""

    def __init__(self, grace_s: float) -> None:
        self.token = os.urandom(8).hex()
        self.grace_s = grace_s
        os.environ[TOKEN_VARIABLE] = self.token  # every process started from now inherits it

    def pytest_sessionfinish(self, session: object, exitstatus: int) -> None:
        """After every fixture is torn down: stop our own helpers, then look for the rest."""
        stop_own_helpers()
        alive = leftovers(self.token, self.grace_s)
        if not alive:
            return
        lines = "\n".join(f"  pid {pid}: {cmd[:200]}" for pid, cmd in alive)
        print(f"\nprocesses of this test session left running:\n{lines}", file=sys.stderr)
        session.exitstatus = 1  # type: ignore[attr-defined]


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 10) -> None:
    """Terminate a process we started, killing it if it lingers."""
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout_s)
