"""The scanned-page layout step with onnxruntime's default threads against one a session.

    .venv/bin/python -m bench.bench_layout_threads --pdf ../shared/corpus/documents/tracemonkey.pdf
    taskset -c 0 .venv/bin/python -m bench.bench_layout_threads --pdf PDF    # one core

Renders the PDF's first --pages pages at --dpi, reads their words with Tesseract once, then
times ``structured_blocks`` (invisible-text page, layout model, tables, figures) over them,
--rounds times, in two fresh processes side by side: one keeping the sessions that
``import pymupdf`` made (onnxruntime's default threads), one with the model made again on
one thread a session (consumer/layout/layout_model.py, what the engines do). *CPU s* is the
process's CPU time over all its threads: what the step costs a machine whose cores are all
busy, as they are when the pool is full.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from bench.scanned_inputs import add_page_arguments, read_pages


def child(pdf: Path, pages: int, dpi: int, rounds: int, one_thread: bool) -> None:
    """In a fresh process: words read once, then the layout step timed; one line printed."""
    from ocrq.consumer.layout import layout_model
    from ocrq.consumer.layout.scanned import structured_blocks

    if one_thread:
        layout_model.load_layout_model()
    else:
        layout_model._made.append(True)  # keep the sessions import made: the default
    with read_pages(pdf, pages, dpi) as inputs:
        structured_blocks(*inputs[0])  # first call pays one-off costs: not timed
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(rounds):
            for page in inputs:
                structured_blocks(*page)
        count = rounds * len(inputs)
        wall, cpu = (time.perf_counter() - wall) / count, (time.process_time() - cpu) / count
    name = "one thread a session" if one_thread else "onnxruntime default"
    print(f"{name:<22} wall s a page {wall:5.3f}   CPU s a page {cpu:5.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_page_arguments(parser, rounds=3)
    parser.add_argument("--child", choices=("default", "one"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.pdf, args.pages, args.dpi, args.rounds, args.child == "one")
        return
    for mode in ("default", "one", "default", "one"):
        command = [sys.executable, "-m", "bench.bench_layout_threads", "--child", mode]
        command += ["--pdf", str(args.pdf), "--pages", str(args.pages), "--dpi", str(args.dpi)]
        command += ["--rounds", str(args.rounds)]
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
