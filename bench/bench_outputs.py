"""The time per page each output stage costs, before (an older tree) and after (this tree).

    .venv/bin/python -m bench.bench_outputs --before /tmp/before9            # about 4 minutes
    .venv/bin/python -m bench.bench_outputs --before /tmp/before9 --pages 1 --repeats 2

Stages, each timed per page in-process: the text-layer read of a born-digital page
(`extract_text_page`; after also `raster.text_layer_page`, which adds the figure crops), a
Tesseract read of a --dpi render (before `ocr_page`, after `read_page`: the layout model
too), and, after only, the figure crops of a scanned page (`crop_figures`; also the fake
vLLM's figure, the bottom 40 % of every page, from a 100 dpi render, as the pipeline
benchmarks crop it), the searchable PDF (`build_searchable_pdf`, born-digital and scanned),
the Result's assembly and the renderings (Markdown, HTML, text, chunks of 512 tokens) of real
results.

Each tree runs in its own long-lived process (bench/output_stages.py, run by this checkout's
path with PYTHONPATH and cwd set to the tree: `python -m` and a script's own folder would
otherwise put this checkout first), driven over a pipe; the stages alternate between the
trees repeat by repeat, the order swapped every repeat, so load
on a shared machine falls on both. Figures are medians over repeats (min..max); *ratio* is
the median of the per-repeat after/before ratios. Before the repeats, each process runs every
stage on one page (discarded); the first-call cost is measured apart, in fresh processes: the
stage's imports and model load (*setup*), then its first and second call on one page.

The older tree's process cannot import pymupdf.layout (unless --before-layout): its install
had no pymupdf-layout, and PyMuPDF 2 imports it, with onnxruntime and the model, inside
`import pymupdf` whenever it is installed, so this venv would charge the older tree for it.

Documents: bench/documents/structure/*.pdf (real authored documents, SOURCES.md) and, when
present, the dev corpus's tracemonkey.pdf (a two-column paper with figures); the first
--pages pages of each.
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, NamedTuple

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
CORPUS_PAPER = REPO.parent / "shared" / "corpus" / "documents" / "tracemonkey.pdf"
# The fake vLLM's figure is cropped from a render at the pipeline benchmarks' dpi.
VLLM_DPI = 100
# name -> (what it times, trees that have it); in dependency order (later ones read state).
STAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "text_layer": ("text layer read (extract_text_page)", ("before", "after")),
    "text_layer_page": ("text layer read + figure crops (text_layer_page)", ("after",)),
    "tesseract": ("Tesseract read (ocr_page / read_page)", ("before", "after")),
    "figure_crops": ("figure crops from the scan (crop_figures)", ("after",)),
    "vllm_figure": ("crop of the fake vLLM's figure, 100 dpi render", ("after",)),
    "searchable_text": ("searchable PDF, born-digital pages", ("after",)),
    "searchable_scan": ("searchable PDF, scanned pages + words", ("after",)),
    "assemble": ("assemble the Result (both results)", ("before", "after")),
    "markdown": ("render Markdown (document_markdown)", ("after",)),
    "html": ("render HTML (document_html)", ("after",)),
    "text": ("render text (document_text)", ("after",)),
    "chunks": ("render chunks, 512 tokens (document_chunks)", ("after",)),
}
COLD = {  # cold measurement -> the stages a fresh process runs first, then it twice
    "text_layer": [],
    "tesseract": [],
    "chunks": ["text_layer", "tesseract", "assemble"],
}


class TreeProcess:
    """One tree's serving process."""

    def __init__(self, tree: str, root: Path, log: IO[str], layout: bool) -> None:
        env = {**os.environ, "PYTHONPATH": str(root), "ORT_DISABLE_TELEMETRY": "1"}
        self.tree = tree
        flags = [] if layout else ["--no-layout"]
        self.process = subprocess.Popen(
            [sys.executable, str(BENCH / "output_stages.py"), "--serve", tree, *flags],
            cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            text=True,
        )  # fmt: skip

    def call(self, stage: str, docs: list[dict[str, Any]], dpi: int) -> dict[str, Any]:
        """Run one stage over docs; the reply's per-page ms and setup ms."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps({"stage": stage, "docs": docs, "dpi": dpi}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.tree} process died (see its log)")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.tree}: {reply['error']}")
        return reply

    def peak_rss_mib(self) -> float:
        """The process's peak resident memory so far (VmHWM), MiB; 0 where unknown."""
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return 0.0
        kib = next(
            (line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")), "0"
        )
        return int(kib) / 1024

    def close(self) -> None:
        """End the process: close its input and wait."""
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait(timeout=60)


def start(tree: str, root: Path, log: IO[str], args: argparse.Namespace) -> TreeProcess:
    """A serving process for ``tree``; the older one without pymupdf.layout unless asked."""
    return TreeProcess(tree, root, log, layout=tree == "after" or args.before_layout)


def prepare_documents(folder: Path, pages: int, dpi: int) -> list[dict[str, Any]]:
    """The documents' first pages: PDF path, a render per page, and an image-only PDF of them."""
    import pymupdf

    sources = sorted((BENCH / "documents" / "structure").glob("*.pdf"))
    if CORPUS_PAPER.is_file():
        sources.append(CORPUS_PAPER)
    else:
        print(f"note: {CORPUS_PAPER} is absent: tracemonkey skipped")
    docs = []
    for source in sources:
        with pymupdf.open(source) as pdf, pymupdf.open() as scan:
            rendered = []
            for index in range(min(pages, pdf.page_count)):
                page = pdf.load_page(index)
                pixmap = page.get_pixmap(dpi=dpi, alpha=False)
                pixmap.set_dpi(dpi, dpi)  # as consumer/raster.py does: Tesseract reads it
                png = folder / f"{source.stem}-{index + 1}.png"
                pixmap.save(str(png))
                small = page.get_pixmap(dpi=VLLM_DPI, alpha=False)
                small.save(str(folder / f"{source.stem}-{index + 1}-vllm.png"))
                scan.new_page(width=page.rect.width, height=page.rect.height).insert_image(
                    page.rect, filename=str(png)
                )
                rendered.append(
                    {"number": index + 1, "png": str(png), "width": pixmap.width,
                     "height": pixmap.height,
                     "png_vllm": str(folder / f"{source.stem}-{index + 1}-vllm.png"),
                     "width_vllm": small.width, "height_vllm": small.height}
                )  # fmt: skip
            scan.save(str(folder / f"{source.stem}-scan.pdf"))
        docs.append(
            {"name": source.stem, "pdf": str(source), "pages": rendered,
             "scan": str(folder / f"{source.stem}-scan.pdf")}
        )  # fmt: skip
    return docs


def first_pages(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each document with its first page only (the warm-up and the cold calls)."""
    return [{**doc, "pages": doc["pages"][:1]} for doc in docs]


def measure_steady(
    processes: dict[str, TreeProcess], docs: list[dict[str, Any]], args: argparse.Namespace
) -> dict[tuple[str, str], list[float]]:
    """(stage, tree) -> ms per page, one figure per repeat, the trees interleaved."""
    warm = first_pages(docs)[:1]  # one page per stage: imports done, models loaded
    for stage, (_, trees) in STAGES.items():
        for tree in trees:
            if tree in processes:
                processes[tree].call(stage, warm, args.dpi)
    figures: dict[tuple[str, str], list[float]] = {}
    for repeat in range(args.repeats):
        for stage, (_, trees) in STAGES.items():
            present = [tree for tree in trees if tree in processes]
            for tree in present if repeat % 2 == 0 else present[::-1]:
                reply = processes[tree].call(stage, docs, args.dpi)
                figures.setdefault((stage, tree), []).append(sum(reply["ms"]) / len(reply["ms"]))
                if stage in ("text_layer_page", "figure_crops", "vllm_figure") and repeat == 0:
                    print(f"  {stage}: {reply['figures']} figures cropped", flush=True)
        print(f"  repeat {repeat + 1} of {args.repeats} done", flush=True)
    return figures


class ColdRow(NamedTuple):
    """A stage's first use in a fresh process."""

    tree: str
    stage: str
    setup_ms: float | None  # imports (and Tesseract's load_worker) before the first call
    first_ms: float
    second_ms: float
    peak_rss_mib: float


def measure_cold(
    roots: dict[str, Path], docs: list[dict[str, Any]], args: argparse.Namespace, log: IO[str]
) -> list[ColdRow]:
    """Each cold stage in a fresh process per tree: setup, first and second call, peak RSS."""
    one = first_pages(docs)[-1:]  # the last document (tracemonkey when present)
    rows = []
    for stage, before_it in COLD.items():
        for tree, root in roots.items():
            if tree not in STAGES[stage][1]:
                continue
            process = start(tree, root, log, args)
            try:
                for earlier in before_it:
                    process.call(earlier, one, args.dpi)
                first = process.call(stage, one, args.dpi)
                second = process.call(stage, one, args.dpi)
                rss = process.peak_rss_mib()
            finally:
                process.close()
            setup = first["setup_ms"]
            rows.append(ColdRow(tree, stage, setup, first["ms"][0], second["ms"][0], rss))
    return rows


def _ms(value: float) -> str:
    """Milliseconds to a precision that shows sub-millisecond stages."""
    return (
        f"{value:.2f}"
        if abs(value) < 10
        else f"{value:.1f}"
        if abs(value) < 100
        else f"{value:.0f}"
    )


def _spread(values: list[float]) -> str:
    return f"{_ms(statistics.median(values))} ({_ms(min(values))}..{_ms(max(values))})"


def print_steady(figures: dict[tuple[str, str], list[float]]) -> None:
    """The steady-state table: before, after, added, ratio."""
    print("\n| stage | before ms/page | after ms/page | added ms/page | after / before |")
    print("|---|--:|--:|--:|--:|")
    for stage, (label, _) in STAGES.items():
        after = figures.get((stage, "after"))
        before = figures.get((stage, "before"))
        if after is None:
            continue
        if before is None:
            print(f"| {label} | - | {_spread(after)} | {_ms(statistics.median(after))} | - |")
            continue
        added = statistics.median(a - b for a, b in zip(after, before, strict=True))
        ratio = statistics.median(a / b for a, b in zip(after, before, strict=True))
        cells = f"{_spread(before)} | {_spread(after)} | {_ms(added)} | {ratio:.2f}x"
        print(f"| {label} | {cells} |")


def print_cold(rows: list[ColdRow]) -> None:
    """The first-call table, in fresh processes."""
    print(
        "\n| tree | stage | setup ms (imports, load_worker) | first call ms | second call ms"
        " | first - second | peak RSS MiB |"
    )
    print("|---|---|--:|--:|--:|--:|--:|")
    for row in rows:
        setup = _ms(row.setup_ms) if row.setup_ms is not None else "-"
        first, second = _ms(row.first_ms), _ms(row.second_ms)
        print(
            f"| {row.tree} | {row.stage} | {setup} | {first} | {second}"
            f" | {_ms(row.first_ms - row.second_ms)} | {row.peak_rss_mib:.0f} |"
        )


def describe(root: Path) -> str:
    """The tree's commit, or where it lies when it is an exported copy."""
    done = subprocess.run(
        ["git", "-C", str(root), "describe", "--always", "--dirty"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return f"{root} ({done.stdout.strip()})" if done.stdout.strip() else f"{root} (exported)"


def main() -> None:
    """Measure and print both tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="an older tree (git archive) to compare")
    parser.add_argument("--pages", type=int, default=2, help="first pages per document")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--no-cold", action="store_true", help="skip the first-call table")
    parser.add_argument(
        "--before-layout",
        action="store_true",
        help="let the older tree's process import pymupdf.layout (its install had none)",
    )
    run(parser.parse_args())


def run(args: argparse.Namespace) -> None:
    """The parent's run: documents, steady state, first calls, then the tables."""
    started, load = time.time(), [round(x, 2) for x in os.getloadavg()]
    roots = {"before": args.before.resolve()} if args.before else {}
    roots["after"] = REPO
    with tempfile.TemporaryDirectory(prefix="ocrq-bench-outputs-") as scratch:
        folder = Path(scratch)
        docs = prepare_documents(folder, args.pages, args.dpi)
        pages = sum(len(doc["pages"]) for doc in docs)
        print(f"{pages} pages: " + ", ".join(f"{d['name']} {len(d['pages'])}" for d in docs))
        with open(folder / "children.log", "w") as log:
            processes = {tree: start(tree, root, log, args) for tree, root in roots.items()}
            try:
                figures = measure_steady(processes, docs, args)
                rss = {tree: process.peak_rss_mib() for tree, process in processes.items()}
            finally:
                for process in processes.values():
                    process.close()
            cold = [] if args.no_cold else measure_cold(roots, docs, args, log)
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, "
          f"{os.cpu_count()} cores, load {load} at start, "
          f"{[round(x, 2) for x in os.getloadavg()]} at end, {time.time() - started:.0f} s; "
          f"`{' '.join(sys.argv)}`")  # fmt: skip
    for tree, root in roots.items():
        layout = "" if tree == "after" or args.before_layout else ", pymupdf.layout not importable"
        print(f"{tree}: {describe(root)}{layout}; peak RSS {rss[tree]:.0f} MiB")
    print_steady(figures)
    if cold:
        print_cold(cold)


if __name__ == "__main__":
    main()
