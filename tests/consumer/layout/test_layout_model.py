"""The layout model runs on one thread a session, on the process's own cores, unchanged.

Each check runs in a fresh Python process. Where ``import pymupdf`` comes first, it makes
the model with onnxruntime's default threads and ``parse_page`` makes it again; where the
consumer is imported first, as in every worker process, the model waits for ``parse_page``
and is made once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Defined first in every child, importing nothing before the child's own first lines: what it
# reports of the live layout sessions' threads and of a layout's boxes.
_MEASURES = """
def sessions():
    import gc, onnxruntime
    live = [o for o in gc.get_objects() if isinstance(o, onnxruntime.InferenceSession)]
    return [[s.get_session_options().intra_op_num_threads,
             s.get_session_options().inter_op_num_threads] for s in live]

def boxes(layout):
    return [[b.boxclass, round(b.x0), round(b.y0), round(b.x1), round(b.y1)] for b in layout.boxes]
"""

# Run in the child: its CPUs limited to one (where the machine has more), the report page's
# layout read with the model as imported, then through parse_page; what it saw as JSON.
_PROBE = """
import gc, glob, json, os, sys
cpus = sorted(os.sched_getaffinity(0))
os.sched_setaffinity(0, {cpus[0]})
import onnxruntime, pymupdf
from ocrq.consumer.layout.structure import parse_page

with pymupdf.open(sys.argv[1]) as doc:
    imported = sessions()
    from pymupdf4llm.helpers.document_layout import parse_document
    from pymupdf4llm.ocr import OCRMode
    before = boxes(parse_document(doc, pages=[0], use_ocr=OCRMode.NEVER).pages[0])
    after = boxes(parse_page(doc, 0))
gc.collect()
allowed = [open(t + "/status").read().split("Cpus_allowed_list:")[1].split()[0]
           for t in glob.glob("/proc/self/task/*")]
print(json.dumps({"imported": imported, "loaded": sessions(), "cpu": str(cpus[0]),
                  "threads_allowed": allowed, "before": before, "after": after}))
"""


def last_line(script: str, report: Path) -> str:
    """The last line a fresh Python process running ``script`` on the report page printed."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURES + script, str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def probe(report: Path) -> dict[str, Any]:
    """What a fresh process saw of the layout model's sessions, threads and boxes."""
    result: dict[str, Any] = json.loads(last_line(_PROBE, report))
    return result


def test_pymupdf_makes_the_layout_model_with_default_threads(probe: dict[str, Any]) -> None:
    # What load_layout_model replaces: 0 is onnxruntime's "one thread per physical core".
    assert probe["imported"] and all(intra == 0 for intra, _ in probe["imported"])


def test_parse_page_reads_with_one_thread_sessions(probe: dict[str, Any]) -> None:
    assert len(probe["loaded"]) == len(probe["imported"])  # the first model was dropped
    assert all(threads == [1, 1] for threads in probe["loaded"])


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: no other core to stray to")
def test_no_thread_runs_outside_the_process_cores(probe: dict[str, Any]) -> None:
    # onnxruntime pins its default pool's threads to cores, whatever the process may use.
    assert set(probe["threads_allowed"]) == {probe["cpu"]}


def test_one_thread_model_finds_the_same_layout(probe: dict[str, Any]) -> None:
    assert probe["after"] == probe["before"]
    assert {"table", "picture"} <= {box[0] for box in probe["after"]}


_FAILING_REMAKE = """
import sys, pymupdf, pymupdf.layout, structlog
from ocrq.consumer.layout.structure import parse_page

def fail():
    raise RuntimeError("no model today")

pymupdf.layout.activate = fail
with structlog.testing.capture_logs() as logs, pymupdf.open(sys.argv[1]) as doc:
    boxes = parse_page(doc, 0).boxes
print([entry["event"] for entry in logs], len(boxes))
"""


def test_a_model_that_cannot_be_made_again_leaves_the_first_one_laying_pages_out(
    report: Path,
) -> None:
    events, boxes = last_line(_FAILING_REMAKE, report).rsplit(" ", 1)
    assert events == "['layout_model_default_threads']"
    assert int(boxes) > 3


# A worker's process: the consumer imported first, then PyMuPDF (rendering needs no model);
# the model's sessions counted before and after the first parse_page, as JSON.
_DEFERRED = """
import json, sys
import ocrq.consumer.raster
import pymupdf
from ocrq.consumer.layout.structure import parse_page

with pymupdf.open(sys.argv[1]) as doc:
    doc[0].get_pixmap(dpi=72)
    before = sessions()
    found = boxes(parse_page(doc, 0))
print(json.dumps({"before": before, "after": sessions(), "boxes": found}))
"""


def test_a_worker_process_makes_the_model_once_on_its_first_layout(
    report: Path, probe: dict[str, Any]
) -> None:
    seen = json.loads(last_line(_DEFERRED, report))
    assert seen["before"] == []  # rendering made no model
    assert seen["after"] and all(threads == [1, 1] for threads in seen["after"])
    assert len(seen["after"]) == len(probe["loaded"])
    assert seen["boxes"] == probe["after"]
