"""Fixtures of tests/deploy: fresh Redis servers with the role users (role_servers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.role_servers import RoleServer, cluster_servers, sentinel_servers, single_server


@pytest.fixture
def roles(tmp_path: Path) -> Iterator[RoleServer]:
    """A fresh Redis with the shipped producer and worker users."""
    yield from single_server(tmp_path)


@pytest.fixture
def sentinel_roles(tmp_path: Path) -> Iterator[RoleServer]:
    """A primary and a replica behind three sentinels, with the users."""
    yield from sentinel_servers(tmp_path)


@pytest.fixture
def cluster_roles(tmp_path: Path) -> Iterator[RoleServer]:
    """A three-master cluster, with the users its rules give."""
    yield from cluster_servers(tmp_path)
