"""Commands packed by hand and exchanged on a connection of redis-py's pool, for the upload path.

redis-py encodes each argument through its encoder and runs a pipeline's replies through its
callbacks: about a third of an upload's CPU went there (BENCHMARKS.md, "The front door").
An upload sends two fixed shapes (the enqueue transaction, the audit entries), so they are
packed here as RESP in one list of buffers (a document is never copied into a bigger one),
sent on a pooled connection with the pool's own retry policy, and their raw replies read in
order. Everything else goes through redis-py as usual.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import Connection
from redis.exceptions import ResponseError

Arg = str | bytes | int | float
BIG = 8192  # arguments at least this long go as their own buffer, uncopied


def command(*parts: Arg) -> list[bytes]:
    """One command as RESP buffers."""
    return pack(parts)


def pack(parts: Iterable[Arg]) -> list[bytes]:
    """A command of any number of arguments as RESP buffers (a long one is its own buffer)."""
    data = [_encoded(part) for part in parts]
    out, head = [], [b"*%d\r\n" % len(data)]
    for item in data:
        if len(item) < BIG:
            head.append(b"$%d\r\n%b\r\n" % (len(item), item))
        else:
            out += [b"".join([*head, b"$%d\r\n" % len(item)]), item]
            head = [b"\r\n"]
    out.append(b"".join(head))
    return out


def _encoded(part: Arg) -> bytes:
    """An argument as redis-py's encoder writes it (bool refused there too)."""
    kind = type(part)
    if kind is str:
        return part.encode()  # type: ignore[union-attr]
    if kind is bytes:
        return part  # type: ignore[return-value]
    if isinstance(part, bool):
        raise TypeError("a bool is not a Redis argument: write 0 or 1")
    if isinstance(part, int):
        return b"%d" % part
    if isinstance(part, bytes | str):  # subclasses
        return bytes(part) if isinstance(part, bytes) else part.encode()
    return repr(part).encode()


async def exchange(redis: aioredis.Redis, buffers: list[bytes], replies: int) -> list[Any]:
    """Send the buffers on one pooled connection and read ``replies`` replies, in order.

    An error reply is handed back in its place as redis-py's exception (NoScriptError,
    OutOfMemoryError, ExecAbortError, …), never raised, so the connection stays in step. A
    lost connection is reconnected and retried as redis-py retries a pipeline.
    """
    pool = redis.connection_pool
    conn: Connection = await pool.get_connection()  # type: ignore[no-untyped-call, unused-ignore]
    try:
        result: list[Any] = await conn.retry.call_with_retry(
            lambda: _send_and_read(conn, buffers, replies), lambda _error: conn.disconnect()
        )
        return result
    except BaseException:  # cancelled or failed mid-reply: its replies are not ours to read
        await conn.disconnect()
        raise
    finally:
        await pool.release(conn)


async def _send_and_read(conn: Connection, buffers: list[bytes], replies: int) -> list[Any]:
    await conn.send_packed_command(buffers)
    out: list[Any] = []
    for _ in range(replies):
        try:
            out.append(await conn.read_response())
        except ResponseError as e:
            out.append(e)
    return out
