"""The embedded server: a port taken between choosing and binding it costs a retry, not a run."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ocrq.shared.embedded import EmbeddedServer, ServerExited, on_free_port, start_server


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port some other process listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.mark.parametrize("binary", ["auto", "valkey"])
def test_a_server_on_a_taken_port_says_so_in_its_error(
    tmp_path: Path, taken_port: int, binary: str
) -> None:
    with pytest.raises(ServerExited) as exited:
        start_server(tmp_path / "redis", port=taken_port, aof=False, prefer=binary)
    assert exited.value.port_taken
    assert "Address already in use" in str(exited.value)


def test_a_port_taken_before_the_server_binds_it_is_replaced_by_another(
    tmp_path: Path, taken_port: int
) -> None:
    tried: list[int] = []

    def start(port: int) -> EmbeddedServer:
        # The first try loses the race: someone took the port between choosing and binding.
        tried.append(taken_port if not tried else port)
        return start_server(tmp_path / f"redis{len(tried)}", port=tried[-1], aof=False)

    server = on_free_port(start)
    try:
        assert tried[0] == taken_port and server.port == tried[1] != taken_port
        assert redis.Redis(port=server.port).ping()
    finally:
        server.stop()


def test_a_server_that_fails_for_another_reason_is_not_started_again(tmp_path: Path) -> None:
    tried: list[int] = []

    def start(port: int) -> EmbeddedServer:
        tried.append(port)
        return start_server(tmp_path / "redis", port=port, aof=False, extra=["--no-such-option"])

    with pytest.raises(ServerExited) as exited:
        on_free_port(start)
    assert len(tried) == 1 and not exited.value.port_taken
    assert "no-such-option" in str(exited.value)
