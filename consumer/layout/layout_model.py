"""PyMuPDF's layout model, made again with one thread per onnxruntime session.

``import pymupdf`` imports pymupdf.layout, which makes the model's onnxruntime sessions (the
box classifier, the page-image feature model, the table grid models) with onnxruntime's
default threads: a pool of one per physical core, each pinned to a core, whatever cores
the process may use (under ``taskset -c 0`` they ran on core 1), spinning while they wait.
Every OCR process of the pool does so, and the pool already runs one process per core (the
reason Tesseract and the line model run on one thread each): the layout step's threads
competed with the other processes' pages, for about a fifth more CPU a page, and where the
extra thread shared the process's own core the step took a fifth to a half longer
(BENCHMARKS.md, "Reading quality, tenth pass"). PyMuPDF has no setting for the
threads, and the sessions are made as soon as anything imports pymupdf; but each is made from a
fresh ``onnxruntime.SessionOptions()``, so the model is made again (``activate``) while that
name gives options set to one thread, and the first model is dropped. Should that fail,
the first model stays, and the process says so (``layout_model_default_threads``).

A process that imported ``ocrq.consumer`` before PyMuPDF has no first model (the package
defers it, consumer/__init__.py): here ``pymupdf.layout`` is imported for the first time,
and its import makes the one model, with the one-thread options.
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import sys
import threading
from typing import Any

import structlog

log = structlog.get_logger("ocrq.engine")
_lock = threading.Lock()
_made: list[bool] = []  # this process's model was made again (at most once)


def load_layout_model() -> None:
    """Make page.get_layout's model again with one-thread sessions; once per process."""
    with _lock:
        if _made:
            return
        import onnxruntime
        import pymupdf

        if "pymupdf.layout" in sys.modules and sys.modules["pymupdf.layout"] is None:
            del sys.modules["pymupdf.layout"]  # deferred by consumer/__init__.py
        default, imported = onnxruntime.SessionOptions, pymupdf._get_layout
        onnxruntime.SessionOptions = _one_thread_options(default)
        try:
            pymupdf._get_layout = None  # activate() makes a model only where none is set
            import pymupdf.layout  # a first import makes the model (activate) itself

            pymupdf.layout.activate()
        except Exception as e:  # the model import made (if any) still lays pages out
            pymupdf._get_layout = imported
            log.warning("layout_model_default_threads", reason=f"{type(e).__name__}: {e}")
        finally:
            onnxruntime.SessionOptions = default
        _made.append(True)


def _one_thread_options(default: Any) -> Any:
    """A SessionOptions class whose instances start with one intra- and one inter-op thread."""

    class OneThreadOptions(default):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.intra_op_num_threads = 1
            self.inter_op_num_threads = 1

    return OneThreadOptions
