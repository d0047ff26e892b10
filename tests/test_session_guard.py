"""A test session ends with none of its processes alive; one that leaves one behind fails."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

LEAKY_TEST = """
import subprocess, sys

def test_leaves_an_orphan_behind():
    orphan = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    print(f"ORPHAN={orphan.pid}")
"""


def run_inner_session(tmp_path: Path, test_source: str) -> subprocess.CompletedProcess[str]:
    """pytest on one test file, with this suite's conftest (and so its session guard)."""
    (tmp_path / "test_inner.py").write_text(test_source)
    (tmp_path / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    env = {**os.environ, "OCRQ_TEST_LEFTOVER_GRACE_S": "1", "PYTHONPATH": str(TESTS)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         f"--rootdir={tmp_path}", str(tmp_path / "test_inner.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_session_that_leaves_a_process_running_fails_and_names_it(tmp_path: Path) -> None:
    done = run_inner_session(tmp_path, LEAKY_TEST)
    match = re.search(r"ORPHAN=(\d+)", done.stdout)
    assert match, done.stdout + done.stderr
    orphan = int(match[1])
    try:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "left running" in done.stderr and f"pid {orphan}:" in done.stderr
    finally:
        os.kill(orphan, signal.SIGKILL)


def test_a_session_whose_processes_all_end_passes(tmp_path: Path) -> None:
    done = run_inner_session(
        tmp_path,
        "import subprocess, sys\n\ndef test_waits():\n"
        "    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "left running" not in done.stderr
