"""Single flight: concurrent reads of one key share one Redis round trip."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class SingleFlight:
    """Concurrent reads of one key share one Redis round trip (200 listeners, one read)."""

    def __init__(self) -> None:
        self._flying: dict[str, asyncio.Future[Any]] = {}

    async def read(self, key: str, fetch: Callable[[], Awaitable[T]]) -> T:
        """The result of fetch(), joined with a fetch of the same key already under way."""
        future = self._flying.get(key)
        if future is None:
            future = asyncio.ensure_future(fetch())
            self._flying[key] = future
            future.add_done_callback(lambda _: self._flying.pop(key, None))
        result: T = await asyncio.shield(future)
        return result
