"""Ctrl-C drains a worker cleanly; a worker restarted under its name takes its jobs back."""

from __future__ import annotations

import os
import signal
import time

from support.documents import sized_pdf
from support.stack import Stack

PAGES = [(300, 400)] * 3


def test_ctrl_c_in_a_terminal_drains_the_worker_without_a_traceback(stack: Stack) -> None:
    stack.fake.configure(latency_s=1.0)
    worker = stack.start_worker(new_session=True)  # its own process group, as in a terminal
    job_id = stack.submit(sized_pdf(PAGES), dpi=72)
    stack.wait_for_status(job_id, "processing", timeout_s=30)
    os.killpg(worker.proc.pid, signal.SIGINT)  # the terminal signals the whole group
    assert worker.wait(30) == 0
    assert stack.wait(job_id)["status"] == "done"  # finished inside the drain grace
    log = worker.log()
    assert "Traceback" not in log and "KeyboardInterrupt" not in log
    assert '"event": "draining"' in log
    stack.assert_clean()


def test_a_worker_restarted_under_its_name_resumes_its_jobs_at_once(stack: Stack) -> None:
    stack.fake.configure(latency_s=1.0)
    patient = {"worker_name": "pod-7", "visibility_timeout_ms": 120_000}
    first = stack.start_worker(**patient)
    job_id = stack.submit(sized_pdf(PAGES), dpi=72)
    stack.wait_for_status(job_id, "processing", timeout_s=30)
    first.signal(signal.SIGKILL)
    first.wait(10)
    started = time.monotonic()
    stack.start_worker(**patient)
    view = stack.wait(job_id, timeout_s=60)
    assert view["status"] == "done" and view["attempts"] == 2
    assert time.monotonic() - started < 60  # not after the 120 s visibility timeout
    stack.assert_clean()
