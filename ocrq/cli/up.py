"""`ocrq up`: Redis (embedded unless given), the producer and N workers on one machine."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

import httpx

from ocrq.shared.embedded import EmbeddedServer, free_port, start_server
from ocrq.shared.lifeline import terminate_with_parent
from ocrq.shared.settings import load_settings


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Flags of `ocrq up`; defaults come from OCRQ_* settings."""
    settings = load_settings()
    p = argparse.ArgumentParser(
        prog="ocrq up",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Run the whole pipeline here: Redis (embedded unless --redis-url), the "
        "producer and the workers. Ctrl-C stops everything; workers finish their jobs first.",
    )
    p.add_argument("--host", default=settings.api.host, help="API address (OCRQ_HOST)")
    p.add_argument("--port", type=int, default=settings.api.port, help="API port (OCRQ_PORT)")
    p.add_argument("--workers", type=int, default=1, help="consumer processes")
    p.add_argument(
        "--engine",
        choices=["local", "tesseract", "rapidocr", "vllm"],
        default=settings.ocr.engine_name,
        help="OCR engine: local CPU OCR (Tesseract; or RapidOCR), or a vLLM server (OCRQ_ENGINE)",
    )
    p.add_argument(
        "--vllm-url",
        default=settings.ocr.vllm_url,
        help="vLLM's base URL, for --engine vllm (OCRQ_VLLM_URL)",
    )
    p.add_argument("--data-dir", type=Path, default=Path(".ocrq"), help="embedded Redis data")
    p.add_argument(
        "--blob-dir",
        type=Path,
        metavar="PATH",
        help="keep documents and results in this folder, created if missing "
        "(OCRQ_BLOB_URL=file://PATH for the producer and workers); unset: all in Redis",
    )
    p.add_argument(
        "--redis-url",
        default=os.environ.get("OCRQ_REDIS_URL", ""),
        help="use this Redis instead of starting one (OCRQ_REDIS_URL)",
    )
    args = p.parse_args(argv)
    if args.engine == "vllm" and not args.vllm_url:
        p.error("--engine vllm needs --vllm-url (or OCRQ_VLLM_URL)")
    if args.blob_dir is not None:
        args.blob_dir = args.blob_dir.expanduser().resolve()
    return args


class Supervisor:
    """The child processes of `ocrq up`, stopped in reverse order."""

    def __init__(self) -> None:
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.redis_server: EmbeddedServer | None = None

    def spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        """Start `ocrq ARGS` as a child process."""
        cmd = [sys.executable, "-m", "ocrq.cli", *args]
        # SIGTERM (workers drain) if `ocrq up` itself is killed without stopping them.
        child = subprocess.Popen(cmd, env={**os.environ, **env}, preexec_fn=terminate_with_parent)
        self.children.append((name, child))

    def dead_child(self) -> str | None:
        """The name of a child that exited, if any."""
        return next((n for n, p in self.children if p.poll() is not None), None)

    def stop(self) -> None:
        """SIGTERM every child (workers drain), wait, kill stragglers, then stop Redis."""
        for _, proc in reversed(self.children):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 40
        for _, proc in reversed(self.children):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self.redis_server:
            self.redis_server.stop()


def ensure_port_free(host: str, port: int) -> None:
    """Fail before starting anything when the API port is taken (another `ocrq up`, say)."""
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as e:
        raise RuntimeError(
            f"port {port} on {host} is already in use (another ocrq up?): "
            "stop that, or pick another with --port"
        ) from e


def wait_ready(url: str, stack: Supervisor, timeout_s: float = 60) -> None:
    """Wait for the producer's /readyz, failing fast if a child dies."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (dead := stack.dead_child()) is not None:
            raise RuntimeError(f"{dead} exited during start-up")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} not ready after {timeout_s:.0f}s")


def banner(url: str, redis_url: str, args: argparse.Namespace) -> str:
    """What to tell the user once everything answers."""
    store = f"\n  store:     {args.blob_dir.as_uri()}" if args.blob_dir else ""
    return (
        f"\nocrq is up: open {url}/ui in a browser\n"
        f"  running:   engine {args.engine}, {args.workers} worker(s), redis {redis_url}{store}\n"
        f"  API:       {url}  (docs: {url}/schema/swagger)\n"
        f"  submit:    curl -s -X POST {url}/v1/jobs -H 'Content-Type: application/pdf' "
        "--data-binary @scan.pdf\n"
        f"  poll:      curl -s '{url}/v1/jobs/JOB_ID?wait=30'\n"
        f"  markdown:  curl -s -H 'Accept: text/markdown' {url}/v1/jobs/JOB_ID/result\n"
        f"  or:        ocrq submit scan.pdf --wait --out results/\n"
        "Press Ctrl-C to stop.\n"
    )


def child_env(args: argparse.Namespace, redis_url: str) -> dict[str, str]:
    """The settings the producer and workers get on top of this environment; with --blob-dir
    the folder (created here) is their object store."""
    env = {"OCRQ_REDIS_URL": redis_url, "OCRQ_ENGINE": args.engine, "OCRQ_VLLM_URL": args.vllm_url}
    if args.blob_dir is not None:
        try:
            args.blob_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RuntimeError(f"--blob-dir {args.blob_dir}: {e.strerror or e}") from e
        env["OCRQ_BLOB_URL"] = args.blob_dir.as_uri()
    return env


def start(stack: Supervisor, args: argparse.Namespace) -> tuple[str, str]:
    """Start Redis (unless given), the producer and the workers; (api url, redis url)."""
    redis_url = args.redis_url
    if not redis_url:
        stack.redis_server = start_server(args.data_dir.resolve() / "redis", aof=True)
        redis_url = stack.redis_server.url
    env = child_env(args, redis_url)
    # A laptop's own stack: the shipped change-me secrets are allowed here, and only here.
    laptop = "--allow-placeholder-secrets"
    stack.spawn(
        "producer", ["producer", "--host", args.host, "--port", str(args.port), laptop], env
    )
    for i in range(args.workers):
        # A stable name: a worker restarted by hand takes back the jobs it held at once.
        name = {"OCRQ_WORKER_NAME": f"{socket.gethostname()}-up{args.port}-w{i + 1}"}
        argv = ["worker", "--metrics-port", str(free_port()), laptop]
        stack.spawn(f"worker-{i + 1}", argv, {**env, **name})
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    return f"http://{host}:{args.port}", redis_url


def main(argv: list[str] | None = None) -> int:
    """Run until Ctrl-C or SIGTERM; exit 1 if a child dies on its own."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    stopping: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    stack = Supervisor()
    try:
        ensure_port_free(args.host, args.port)
        url, redis_url = start(stack, args)
        wait_ready(url, stack)
        print(banner(url, redis_url, args), flush=True)
        while not stopping:
            if (dead := stack.dead_child()) is not None:
                print(f"ocrq up: {dead} exited; stopping everything", file=sys.stderr)
                return 1
            time.sleep(0.2)
        print("ocrq up: stopping (workers finish their jobs first)…", flush=True)
        return 0
    except (RuntimeError, TimeoutError, FileNotFoundError) as e:
        print(f"ocrq up: {e}", file=sys.stderr)
        return 1
    finally:
        stack.stop()
