"""A process pool that heals: a dead worker or an overrunning call gets a fresh pool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["BrokenProcessPool", "PoolClosed", "RecyclingPool"]


class PoolClosed(RuntimeError):
    """The pool was closed; no more calls run."""


class RecyclingPool:
    """Runs picklable calls in worker processes, one call per worker at a time.

    A call's timeout starts when a worker is free (calls queue here, not in the executor),
    so a busy pool does not time out work that never ran. When a call overruns, its
    worker is killed and the pool replaced: a runaway render or OCR must not hold a worker
    for ever. When a worker dies (segfault, OOM kill) the pool is replaced too; calls that
    were running in it fail with BrokenProcessPool and may be retried by the caller.
    """

    def __init__(self, make: Callable[[], ProcessPoolExecutor], workers: int) -> None:
        self._make = make
        self._pool: ProcessPoolExecutor | None = make()
        self._slots = asyncio.Semaphore(max(1, workers))

    async def run(self, timeout_s: float, fn: Callable[..., T], *args: Any) -> T:
        """Run fn(*args) in a worker; TimeoutError past timeout_s of running time.

        The slot is held until the call really ends, not until its caller stops waiting: a
        cancelled caller (a cancelled job) leaves its call running in the worker, and the
        next call must not start its clock while queued behind it.
        """
        await self._slots.acquire()
        pool = self._pool
        try:
            if pool is None:
                raise PoolClosed("the pool is closed")
            # submit too: a pool whose worker died refuses new work at once
            call = asyncio.wrap_future(pool.submit(fn, *args))
        except BaseException as e:
            self._slots.release()
            if pool is not None and isinstance(e, BrokenProcessPool):
                self._recycle(pool, kill=False)
            raise
        call.add_done_callback(self._release)
        try:
            return await asyncio.wait_for(asyncio.shield(call), timeout_s)
        except TimeoutError:
            self._recycle(pool, kill=True)
            raise
        except BrokenProcessPool:
            self._recycle(pool, kill=False)
            raise

    def _release(self, call: asyncio.Future[Any]) -> None:
        self._slots.release()
        if not call.cancelled():
            call.exception()  # retrieved: a caller that stopped waiting does not want it

    def _recycle(self, pool: ProcessPoolExecutor, *, kill: bool) -> None:
        if self._pool is pool:
            self._pool = self._make()
        if kill:
            # The executor has no public way to stop a running call: end its processes.
            for process in list(getattr(pool, "_processes", {}).values()):
                with contextlib.suppress(Exception):
                    process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    async def aclose(self, timeout_s: float = 10.0) -> None:
        """Stop the workers: wait for them, then kill what is left."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(
                asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True), timeout_s
            )
        except TimeoutError:
            self._recycle(pool, kill=True)
