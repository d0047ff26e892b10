"""The `ocrq` console script: one dispatcher, each command imported only when it runs."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

# pymupdf imports onnxruntime, which otherwise phones home with usage data: off, before any import.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

COMMANDS: dict[str, str] = {
    "producer": "serve the HTTP API (Litestar under uvicorn)",
    "worker": "run one consumer process",
    "up": "run everything on this machine (embedded Redis, producer, workers)",
    "fake-vllm": "serve the protocol-faithful fake vLLM (tests, benchmarks)",
    "submit": "upload files or folders, optionally wait and save results",
    "status": "show a job's status",
    "result": "print a job's result",
    "k8s": "render generated Kubernetes manifests (e.g. `ocrq k8s keda`)",
}


def run_producer(argv: list[str]) -> int:
    """`ocrq producer`: uvicorn serving create_app(), settings from OCRQ_*."""
    import uvicorn

    from ocrq.shared.settings import load_settings

    settings = load_settings()
    parser = argparse.ArgumentParser(prog="ocrq producer", description=COMMANDS["producer"])
    parser.add_argument("--host", default=settings.host)
    parser.add_argument("--port", type=int, default=settings.port)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    args = parser.parse_args(argv)
    uvicorn.run(
        "ocrq.producer.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_config=None,
        access_log=False,  # the app logs one structured line per request itself
        timeout_graceful_shutdown=10,
    )
    return 0


def run_worker(argv: list[str]) -> int:
    """`ocrq worker`: one consumer process."""
    from ocrq.consumer.main import main

    return main(argv)


def run_up(argv: list[str]) -> int:
    """`ocrq up`: the whole stack on one machine."""
    from ocrq.up import main

    return main(argv)


def run_fake_vllm(argv: list[str]) -> int:
    """`ocrq fake-vllm`: the test vLLM server."""
    from ocrq.fakevllm.server import main

    return main(argv)


def run_client(argv: list[str], command: str) -> int:
    """`ocrq submit|status|result`: the command-line client."""
    from ocrq.commands import main

    code: int = main([command, *argv])
    return code


def run_k8s(argv: list[str]) -> int:
    """`ocrq k8s …`: generated manifests."""
    from ocrq.k8s import main

    return main(argv)


RUNNERS: dict[str, Callable[[list[str]], int]] = {
    "producer": run_producer,
    "worker": run_worker,
    "up": run_up,
    "fake-vllm": run_fake_vllm,
    "submit": lambda argv: run_client(argv, "submit"),
    "status": lambda argv: run_client(argv, "status"),
    "result": lambda argv: run_client(argv, "result"),
    "k8s": run_k8s,
}


def usage() -> str:
    """The top-level help text."""
    lines = ["usage: ocrq COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<10} {text}" for name, text in COMMANDS.items()]
    lines += ["", "Settings come from OCRQ_* environment variables (see README)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a command; exit code of the command."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    runner = RUNNERS.get(args[0])
    if runner is None:
        print(f"ocrq: unknown command {args[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    try:
        return runner(args[1:])
    except ValueError as e:  # bad OCRQ_* settings: a clear message, not a traceback
        print(f"ocrq {args[0]}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
