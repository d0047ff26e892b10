"""The worker: collects jobs, reads their pages and writes the results back.

PyMuPDF makes its layout model (onnxruntime sessions: about half a CPU second and 55 MB) as
soon as anything imports it. Most of the worker's processes never lay a page out (the worker
itself, render processes that meet no text layer), and those that do make the model again
with one thread a session (consumer/layout/layout_model.py). Importing the consumer before
PyMuPDF therefore defers the model: ``pymupdf.layout`` stays unimported (PyMuPDF tolerates
that) until ``load_layout_model`` imports it, once, with one-thread sessions.
"""

import sys

if "pymupdf" not in sys.modules:
    sys.modules.setdefault("pymupdf.layout", None)  # type: ignore[arg-type]
