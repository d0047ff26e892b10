"""Helpers die with the process they serve, even when it is SIGKILLed; Ctrl-C is the parent's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from support.processes import processes_with

from ocrq.shared.lifeline import ANCHOR_VARIABLE, pid_exists

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="parent-death signals are Linux's")

# A worker in miniature: a forkserver pool whose helpers are armed as the worker's are.
POOL_PARENT = """
import multiprocessing, os, sys
from concurrent.futures import ProcessPoolExecutor
from ocrq.shared.lifeline import anchor_helpers, die_with_parent
anchor_helpers()
ctx = multiprocessing.get_context("forkserver")
ctx.set_forkserver_preload(["ocrq.consumer.forkserver_preload"])
pool = ProcessPoolExecutor(max_workers=2, mp_context=ctx, initializer=die_with_parent)
print(pool.submit(os.getpid).result(), flush=True)
sys.stdin.read()
"""


def wait_gone(token: str, timeout_s: float = 10.0) -> list[tuple[int, str]]:
    deadline = time.monotonic() + timeout_s
    while (alive := processes_with(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def test_a_sigkilled_parent_takes_its_pool_and_forkserver_along() -> None:
    token = os.urandom(6).hex()
    env = {**os.environ, "OCRQ_TEST_SESSION": token}
    parent = subprocess.Popen(
        [sys.executable, "-c", POOL_PARENT], env=env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert parent.stdout is not None
    pool_child = int(parent.stdout.readline())
    helpers = {pid for pid, _ in processes_with(token)} - {parent.pid}
    assert pool_child in helpers and len(helpers) >= 3  # forkserver, pool child, tracker
    parent.kill()
    parent.wait(10)
    assert wait_gone(token) == []


def test_a_helper_started_after_its_anchor_died_exits_at_once() -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    env = {**os.environ, ANCHOR_VARIABLE: gone.strip()}
    late = subprocess.run(
        [sys.executable, "-c",
         "import time\nfrom ocrq.shared.lifeline import die_with_parent\n"
         "die_with_parent()\ntime.sleep(30)"],
        env=env, timeout=20,
    )  # fmt: skip
    assert late.returncode == 1


def test_a_helper_ignores_the_terminals_ctrl_c() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\nfrom ocrq.shared.lifeline import die_with_parent\n"
         "die_with_parent()\nprint('armed', flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "armed"
    child.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert child.poll() is None  # still running: SIGINT is the parent's to handle
    child.stdin.close()
    assert child.wait(10) == 0


def test_a_zombie_is_not_a_live_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while pid_exists(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # exited but not reaped yet: a zombie
    assert not pid_exists(child.pid)
    child.wait()
    assert pid_exists(os.getpid())
