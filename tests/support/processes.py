"""Processes of tests and benchmarks: start `ocrq`, wait for it, stop it, and find leftovers.

Which processes a test session started: every child inherits a token in its environment.
``/proc/<pid>/environ`` is the environment a process was started with, so the token finds a
session's processes however deep they are and after they were re-parented to pid 1 (the
orphans of a SIGKILLed worker). Linux only; elsewhere nothing is found.
"""

from __future__ import annotations

import contextlib
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import httpx
import pytest
import redis

TOKEN_VARIABLE = "OCRQ_TEST_SESSION"
# A worker drains for up to its OCRQ_DRAIN_GRACE_S (10 s in the benchmarks) before it exits.
STOP_TIMEOUT_S = 15.0


def processes_with(token: str, variable: str = TOKEN_VARIABLE) -> list[tuple[int, str]]:
    """(pid, command line) of every other live process started with variable=token in its env."""
    needle = f"{variable}={token}".encode()
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

    # Last: under pytest-xdist the controller's workers carry its token, and xdist ends them
    # in its own sessionfinish.
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: object, exitstatus: int) -> None:
        """After every fixture is torn down: stop our own helpers, then look for the rest."""
        stop_own_helpers()
        alive = leftovers(self.token, self.grace_s)
        if not alive:
            return
        lines = "\n".join(f"  pid {pid}: {cmd[:200]}" for pid, cmd in alive)
        print(f"\nprocesses of this test session left running:\n{lines}", file=sys.stderr)
        session.exitstatus = 1  # type: ignore[attr-defined]


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``check`` until it is true, or fail naming what never happened."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (redis.RedisError, OSError):  # a server still starting, or failing over
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what} within {timeout_s} s")


def wait_http(
    url: str, proc: subprocess.Popen[bytes], timeout_s: float = 20.0, log: Path | None = None
) -> None:
    """Poll url until it answers 200; fail (with the log's tail) if the process dies or stalls."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:] if log else ""
                raise RuntimeError(f"process exited with {proc.returncode}:\n{tail}")
            with contextlib.suppress(httpx.TransportError):
                if client.get(url).status_code == 200:
                    return
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout_s} s")


def start_ocrq(
    command: str,
    args: list[str],
    env: Mapping[str, object],
    log: Path | None = None,
    *,
    new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Start `ocrq COMMAND ARGS` with env as OCRQ_* settings (names without the prefix).

    stderr goes to ``log`` (nowhere without one); ``new_session``: the process leads its own
    process group, as a command typed in a terminal does.
    """
    full_env = {**os.environ, **{f"OCRQ_{k.upper()}": str(v) for k, v in env.items()}}
    with contextlib.ExitStack() as files:
        stderr = files.enter_context(log.open("wb")) if log else subprocess.DEVNULL
        return subprocess.Popen(
            [sys.executable, "-m", "ocrq.cli", command, *args],
            env=full_env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=new_session,
        )


@contextlib.contextmanager
def ocrq_process(
    command: str,
    args: list[str],
    env: Mapping[str, object],
    health_url: str,
    log: Path,
    health_timeout_s: float = 30.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """`ocrq COMMAND ARGS`, healthy at health_url, until the block ends (SIGTERM, then SIGKILL)."""
    proc = start_ocrq(command, args, env, log)
    try:
        wait_http(health_url, proc, health_timeout_s, log)
        yield proc
    finally:
        stop(proc, STOP_TIMEOUT_S)


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 10) -> None:
    """Terminate a process we started, killing it if it lingers."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout_s)
