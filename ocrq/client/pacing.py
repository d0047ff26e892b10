"""When to try again and how long to long-poll: the timing both clients follow, without the I/O."""

from __future__ import annotations

import time

from ocrq.client.errors import ApiError, JobFailed, QueueFull, Unavailable, WaitTimeout
from ocrq.shared.schemas import TERMINAL, JobView, Status

MAX_POLL_S = 30  # one long-poll request; the server allows up to 60
SUBMIT_RETRIES = 3  # extra attempts after a 503 (queue_full / unavailable)
MAX_RETRY_SLEEP_S = 30.0


def retry_delay(error: ApiError, attempt: int, ceiling: float = MAX_RETRY_SLEEP_S) -> float:
    """Seconds before the next submit attempt: Retry-After, else exponential, both bounded."""
    delay = float(error.retry_after) if error.retry_after else 0.5 * 2**attempt
    return min(delay, ceiling)


def retriable(error: ApiError) -> bool:
    """A 503 means nothing was enqueued: the same upload may be sent again."""
    return isinstance(error, QueueFull | Unavailable) and error.status == 503


def resubmit_delay(error: ApiError, attempt: int, retries: int, ceiling: float) -> float | None:
    """Seconds before resubmitting after ``error`` on ``attempt``; None when it must propagate."""
    if attempt >= retries or not retriable(error):
        return None
    return retry_delay(error, attempt, ceiling)


def next_poll(deadline: float) -> int:
    """Seconds for the next long-poll: up to MAX_POLL_S, never past the deadline."""
    return max(0, min(MAX_POLL_S, int(deadline - time.monotonic())))


def settled(view: JobView, raise_on_failure: bool) -> bool:
    """True when the view is terminal; raises JobFailed when asked to."""
    if Status(view.status) not in TERMINAL:
        return False
    if raise_on_failure and view.status != Status.DONE:
        raise JobFailed.of(view)
    return True


class Deadline:
    """One deadline shared by several waits."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.at = time.monotonic() + timeout

    def left(self) -> float:
        """Seconds until the deadline, never negative."""
        return max(0.0, self.at - time.monotonic())


class LongPoll:
    """The bookkeeping of one wait: a deadline, long-polls of at most MAX_POLL_S each."""

    def __init__(self, timeout: float, raise_on_failure: bool) -> None:
        self.deadline = Deadline(timeout)
        self.raise_on_failure = raise_on_failure

    def next_wait(self, view: JobView) -> int | None:
        """None once ``view`` is terminal, else the next long-poll's seconds; WaitTimeout past."""
        if settled(view, self.raise_on_failure):
            return None
        poll = next_poll(self.deadline.at)
        if poll == 0:
            timeout = self.deadline.timeout
            raise WaitTimeout(f"job {view.id} still {view.status} after {timeout:g}s", view)
        return poll
