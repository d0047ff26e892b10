"""Command line of the fake vLLM server: parse flags, serve until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

import msgspec

from ocrq.fakevllm.app import FakeVllmApp
from ocrq.fakevllm.config import FakeConfig, config_fields, flag_name
from ocrq.fakevllm.h11server import start_server

log = logging.getLogger("fakevllm")

# Short spellings for the most used flags; every field also has --field-name (see runner).
FLAG_ALIASES: dict[str, tuple[str, ...]] = {
    "model": ("--served-model-name",),  # vLLM's own spelling
    "max_concurrency": ("--max-num-seqs",),
    "latency_s": ("--latency",),
    "slow_start_s": ("--slow-start",),
    "hang_s": ("--hang",),
    "queue_timeout_s": ("--queue-timeout",),
}


def build_parser() -> argparse.ArgumentParser:
    """One flag per FakeConfig field, plus --host and --port."""
    parser = argparse.ArgumentParser(
        prog="ocrq fake-vllm",
        description="A protocol-faithful fake of vLLM serving an OCR model (tests, benchmarks).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="default: 8000")
    for field in config_fields():
        kind = type(field.default)
        kwargs: dict[str, Any] = {"dest": field.name, "default": argparse.SUPPRESS}
        kwargs["type"] = kind if kind in (int, float) else str
        kwargs["help"] = f"default: {field.default}"
        parser.add_argument(flag_name(field.name), *FLAG_ALIASES.get(field.name, ()), **kwargs)
    return parser


def parse_args(argv: list[str] | None) -> tuple[str, int, FakeConfig]:
    """Host, port and a validated config; exits with status 2 on a bad flag like argparse."""
    parser = build_parser()
    namespace = vars(parser.parse_args(argv))
    host, port = namespace.pop("host"), namespace.pop("port")
    try:
        config = msgspec.convert(namespace, FakeConfig)
    except msgspec.ValidationError as e:
        parser.error(str(e))
    return host, port, config


async def serve(host: str, port: int, config: FakeConfig) -> None:
    """Serve until SIGINT or SIGTERM."""
    app = FakeVllmApp(config)
    server = await start_server(app.handle, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    bound = server.sockets[0].getsockname()[1]
    log.info("fakevllm serving %s (%s) on http://%s:%d", config.model, config.protocol, host, bound)
    try:
        await stop.wait()
    finally:
        # Open connections are cancelled by asyncio.run when this returns; no wait_closed(),
        # which on newer Pythons waits for every keep-alive client to leave.
        server.close()
        log.info("fakevllm stopped")


def main(argv: list[str] | None = None) -> int:
    """Run the fake vLLM server with these command-line flags; 0 after a clean stop."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    host, port, config = parse_args(argv)
    asyncio.run(serve(host, port, config))
    return 0
