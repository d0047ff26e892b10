"""structlog setup: JSON lines in production, a readable console on a TTY."""

from __future__ import annotations

import logging
import sys

import structlog

from ocrq.shared.settings import Settings


def renders_json(settings: Settings) -> bool:
    """True when log lines are JSON (production, a pipe); False for a console on a TTY."""
    return settings.log_format == "json" or (
        settings.log_format == "auto" and not sys.stderr.isatty()
    )


def configure_logging(settings: Settings) -> None:
    """Configure structlog and stdlib logging once per process."""
    level = logging.getLevelNamesMapping().get(settings.log_level.upper(), logging.INFO)
    as_json = renders_json(settings)
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # Look sys.stderr up per logger: a process that swaps it (tests, `ocrq up`) still logs.
        logger_factory=stderr_logger,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(level, logging.WARNING), stream=sys.stderr)


def stderr_logger(*_args: object) -> structlog.PrintLogger:
    """A PrintLogger on the current sys.stderr."""
    return structlog.PrintLogger(sys.stderr)
