"""Hand-packed commands: the bytes redis-py would send, replies in order with errors in place,
and a connection that never goes back to the pool half read."""

from __future__ import annotations

import asyncio
import enum

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection
from redis.exceptions import ResponseError

from ocrq.shared import resp
from ocrq.shared.resp import BIG, Arg
from ocrq.shared.store import JobStore


class Colour(enum.StrEnum):
    RED = "red"


def redis_py_packing(*parts: Arg) -> bytes:
    """What redis-py's own connection writes for the same command."""
    return b"".join(Connection().pack_command(*parts))


ARGS = st.one_of(
    st.text(max_size=20),
    st.binary(max_size=40),
    st.binary(min_size=BIG, max_size=BIG + 10),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False),
)


@given(st.lists(ARGS, min_size=1, max_size=12))
def test_a_command_is_packed_byte_for_byte_as_redis_py_packs_it(parts: list[Arg]) -> None:
    assert b"".join(resp.pack(["HSET", *parts])) == redis_py_packing("HSET", *parts)


def test_a_long_argument_is_sent_as_its_own_buffer_uncopied() -> None:
    document = b"%PDF" + bytes(BIG)
    buffers = resp.command("HSET", "job", "payload", document, Colour.RED, 7)
    assert any(buffer is document for buffer in buffers)
    assert b"".join(buffers) == redis_py_packing("HSET", "job", "payload", document, "red", 7)


def test_a_bool_is_refused_as_redis_py_refuses_it() -> None:
    with pytest.raises(TypeError):
        resp.command("SET", "flag", True)


def plain_client(store: JobStore, key: str) -> aioredis.Redis:
    """A client with a connection pool that reaches the key (a cluster's slot master)."""
    return store.nodes.for_key(key)


@pytest.mark.smoke
async def test_replies_come_back_in_order_with_an_error_in_its_place(store: JobStore) -> None:
    client = plain_client(store, "resp-a")
    buffers = [
        *resp.command("SET", "resp-a", "text"),
        *resp.command("INCR", "resp-a"),  # not a number: an error reply
        *resp.command("GET", "resp-a"),
    ]
    ok, refused, value = await resp.exchange(client, buffers, 3)
    assert ok in (b"OK", True) and value == b"text"
    assert isinstance(refused, ResponseError) and "not an integer" in str(refused)
    assert await client.get("resp-a") == b"text"  # the connection went back in step


async def test_a_cancelled_exchange_leaves_no_reply_behind_for_the_next_caller(
    store: JobStore,
) -> None:
    client = plain_client(store, "resp-b")
    blocked = asyncio.create_task(resp.exchange(client, resp.command("BLPOP", "resp-b", 2), 1))
    await asyncio.sleep(0.2)
    blocked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await blocked
    await asyncio.sleep(0.1)  # the closed socket reaches Redis
    await client.rpush("resp-b", "x")
    assert await client.llen("resp-b") == 1  # no BLPOP was left waiting to take it
    assert await client.lpop("resp-b") == b"x"
