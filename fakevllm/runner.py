"""Start the fake vLLM as a subprocess for a test or a benchmark, and talk to its controls."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from ocrq.fakevllm.config import config_fields, flag_name
from ocrq.shared.errors import ErrorCode, OcrqError

CONTROL_TIMEOUT_S = 10.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def config_flags(fields: dict[str, Any]) -> list[str]:
    """CLI flags for FakeConfig fields; an unknown field is a TypeError, like a bad kwarg."""
    known = {f.name for f in config_fields()}
    flags: list[str] = []
    for name, value in fields.items():
        if name not in known:
            raise TypeError(f"FakeVllm got an unknown config field {name!r}")
        flags += [flag_name(name), str(value)]
    return flags


class FakeVllm:
    """The fake vLLM server in a child process on 127.0.0.1; a (sync or async) context manager.

    ``FakeVllm(latency_s=0.2, max_concurrency=1)`` takes FakeConfig fields as keyword arguments;
    ``FakeVllm(allowed_local_media_path="/dev/shm/ocrq")`` reads file:// images from there.
    """

    def __init__(self, *, startup_timeout_s: float = 20.0, **config: Any) -> None:
        self.flags = config_flags(config)
        self.startup_timeout_s = startup_timeout_s
        self.host = "127.0.0.1"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        # One client for the control calls: a new httpx client per call costs tens of ms.
        self.control = httpx.Client(timeout=CONTROL_TIMEOUT_S)

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:PORT (no trailing slash, no /v1)."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        """Spawn the server and wait until its port accepts connections."""
        self.port = free_port(self.host)
        if self.control.is_closed:
            self.control = httpx.Client(timeout=CONTROL_TIMEOUT_S)
        with tempfile.NamedTemporaryFile(prefix="fakevllm-", suffix=".log", delete=False) as f:
            self.log_path = Path(f.name)
        command = [
            sys.executable,
            "-m",
            "ocrq.fakevllm",
            "--host",
            self.host,
            "--port",
            str(self.port),
        ]
        with self.log_path.open("wb") as log_file:
            self.process = subprocess.Popen(
                [*command, *self.flags], stdout=log_file, stderr=subprocess.STDOUT
            )
        try:
            self.wait_for_port()
        except BaseException:
            self.stop()  # the error already holds the log's tail
            raise

    def wait_for_port(self) -> None:
        """Poll until the port accepts a connection; fail fast if the process dies."""
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise self.startup_error(f"exited with status {self.process.returncode}")
            try:
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise self.startup_error(f"did not listen within {self.startup_timeout_s} s")

    def startup_error(self, what: str) -> OcrqError:
        """An error naming what went wrong, with the tail of the server's log."""
        log = self.log_path.read_text(errors="replace")[-2000:] if self.log_path else ""
        return OcrqError(ErrorCode.INTERNAL, f"fake vLLM {what}; log:\n{log}")

    def wait_ready(self, timeout_s: float = 20.0) -> None:
        """Wait until /health answers 200 (after a slow start)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if self.control.get(f"{self.url}/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise OcrqError(ErrorCode.TIMEOUT, f"fake vLLM not ready within {timeout_s} s")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Terminate the process, then kill it if it does not exit in time."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout_s)
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None
        self.control.close()

    def requests(self) -> list[dict[str, Any]]:
        """The chat-completion bodies the server received, in arrival order."""
        response = self.control.get(f"{self.url}/_requests")
        response.raise_for_status()
        bodies: list[dict[str, Any]] = response.json()
        return bodies

    def clear(self) -> None:
        """Forget the recorded request bodies."""
        self.control.delete(f"{self.url}/_requests").raise_for_status()

    def configure(self, **fields: Any) -> dict[str, Any]:
        """Change config fields at run time; returns the whole new config."""
        response = self.control.post(f"{self.url}/_config", json=fields)
        if response.status_code != 200:
            raise OcrqError(ErrorCode.INVALID_REQUEST, response.text)
        config: dict[str, Any] = response.json()
        return config

    def stats(self) -> dict[str, int]:
        """Requests running and queued now, and the peak running since the last reset."""
        response = self.control.get(f"{self.url}/_stats")
        response.raise_for_status()
        stats: dict[str, int] = response.json()
        return stats

    def reset_stats(self) -> None:
        """Start counting the peak of running requests afresh."""
        self.control.delete(f"{self.url}/_stats").raise_for_status()

    def traffic(self) -> dict[str, int]:
        """Chat requests received, their body bytes and the images decoded, since the reset."""
        response = self.control.get(f"{self.url}/_traffic")
        response.raise_for_status()
        traffic: dict[str, int] = response.json()
        return traffic

    def reset_traffic(self) -> None:
        """Start counting the traffic afresh."""
        self.control.delete(f"{self.url}/_traffic").raise_for_status()

    def config(self) -> dict[str, Any]:
        """The current config, counters included."""
        response = self.control.get(f"{self.url}/_config")
        response.raise_for_status()
        config: dict[str, Any] = response.json()
        return config

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)
