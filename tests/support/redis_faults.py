"""Faults done to a real Redis server: SIGKILL, and a start again from its AOF."""

from __future__ import annotations

from ocrq.shared.embedded import EmbeddedServer, start_server


def kill(server: EmbeddedServer) -> None:
    """SIGKILL the server (no shutdown, no final fsync) and reap it."""
    server.process.kill()
    server.process.wait(10)


def revive(server: EmbeddedServer) -> EmbeddedServer:
    """Start a killed server again on its port, from its data folder (the AOF)."""
    return start_server(server.data_dir, port=server.port, aof=True, fsync="always")
