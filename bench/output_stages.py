"""The child side of bench/bench_outputs.py: one tree's output stages, served over a pipe.

    python /path/to/this/checkout/bench/output_stages.py --serve before|after [--no-layout]

bench/bench_outputs.py starts one such process per tree, by this file's path, with
PYTHONPATH and cwd set to the tree; the older tree has no copy of this file, so it imports
nothing from bench/ and, from ocrq, only what both trees have (each stage imports its own
modules, so the older tree never reaches the stages it lacks). One JSON line in (stage,
documents, dpi), one out (ms per page, setup ms, figures cropped), until stdin closes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
PDF = "application/pdf"
# fakevllm/completion.py's image block (fractions of the page).
VLLM_FIGURE = (0.0, 0.6, 1.0, 1.0)
PAGE_STAGES = frozenset(
    {"text_layer", "text_layer_page", "tesseract", "figure_crops", "vllm_figure"}
)


class TreeState:
    """What one tree's process keeps between calls: pages read, words, results."""

    def __init__(self, tree: str) -> None:
        self.tree = tree
        self.text_pages: dict[tuple[str, int], Any] = {}
        self.ocr_pages: dict[tuple[str, int], Any] = {}
        self.words: dict[tuple[str, int], Any] = {}
        self.results: dict[tuple[str, str], Any] = {}
        self.tesseract_loaded = False
        self.figures = 0  # figures the last call cropped


def _timed(call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = call(*args)
    return (time.perf_counter() - start) * 1000, value


def run_page_stage(
    state: TreeState, stage: str, docs: list[dict[str, Any]], dpi: int
) -> list[float]:
    """Time ``stage`` on every page of ``docs``: one figure (ms) per page."""
    times = []
    state.figures = 0
    for doc in docs:
        for page in doc["pages"]:
            key = (doc["name"], page["number"])
            ms, _ = _timed(_page_call, state, stage, doc, page, key, dpi)
            times.append(ms)
    return times


def _page_call(
    state: TreeState, stage: str, doc: dict[str, Any], page: dict[str, Any], key: Any, dpi: int
) -> None:
    if stage == "text_layer":
        from ocrq.consumer.textlayer import extract_text_page

        state.text_pages[key] = extract_text_page(doc["pdf"], page["number"] - 1, dpi)
    elif stage == "text_layer_page":
        from ocrq.consumer.raster import text_layer_page

        read = text_layer_page(doc["pdf"], page["number"] - 1, dpi)
        state.figures += len(read[1]) if read else 0
    elif stage == "tesseract":
        _read_with_tesseract(state, page, key)
    elif stage == "figure_crops":
        from ocrq.consumer.layout.figures import crop_figures

        state.figures += len(crop_figures(page["png"], state.ocr_pages[key]))
    elif stage == "vllm_figure":
        _crop_vllm_figure(state, page)
    else:
        raise ValueError(f"no page stage {stage}")


def _crop_vllm_figure(state: TreeState, page: dict[str, Any]) -> None:
    """What the fake vLLM's path crops per page: its image block (the page's bottom 40 %)."""
    from ocrq.consumer.layout.figures import crop_figures
    from ocrq.shared.schemas import Block, Page

    width, height = page["width_vllm"], page["height_vllm"]
    figure = Block(
        label="figure",
        text="",
        bbox=[*VLLM_FIGURE],
        bbox_px=[round(VLLM_FIGURE[0] * width), round(VLLM_FIGURE[1] * height),
                 round(VLLM_FIGURE[2] * width), round(VLLM_FIGURE[3] * height)],
    )  # fmt: skip
    read = Page(number=page["number"], width=width, height=height, blocks=[figure])
    state.figures += len(crop_figures(page["png_vllm"], read))


def _read_with_tesseract(state: TreeState, page: dict[str, Any], key: Any) -> None:
    from ocrq.consumer.engines import tesseract

    args = (page["png"], page["number"], page["width"], page["height"], "eng")
    if state.tree == "before":
        state.ocr_pages[key] = tesseract.ocr_page(*args)
    else:
        state.ocr_pages[key], state.words[key] = tesseract.read_page(*args)


def run_document_stage(
    state: TreeState, stage: str, docs: list[dict[str, Any]], dpi: int
) -> list[float]:
    """Time ``stage`` once per document: its ms over its pages, one figure per page.

    The stages over the results (assembly, renderings) handle both of a document's results,
    from its text layer and from Tesseract: their figure is per page of one result.
    """
    times = []
    for doc in docs:
        ms, _ = _timed(_document_call, state, stage, doc, dpi)
        results = 1 if stage.startswith("searchable") else 2
        times.extend([ms / len(doc["pages"]) / results] * len(doc["pages"]))
    return times


def _document_call(state: TreeState, stage: str, doc: dict[str, Any], dpi: int) -> Any:
    if stage == "searchable_text":
        return _searchable(state, doc, "text", dpi)
    if stage == "searchable_scan":
        return _searchable(state, doc, "ocr", dpi)
    if stage == "assemble":
        return _assemble(state, doc)
    render = {"markdown": _markdown, "html": _html, "text": _text, "chunks": _chunks}[stage]
    return [render(state.results[(kind, doc["name"])]) for kind in ("text", "ocr")]


def _pages_of(state: TreeState, doc: dict[str, Any], kind: str) -> list[Any]:
    source = state.text_pages if kind == "text" else state.ocr_pages
    pages = [source[(doc["name"], p["number"])] for p in doc["pages"]]
    return [page for page in pages if page is not None]


def _searchable(state: TreeState, doc: dict[str, Any], kind: str, dpi: int) -> bytes:
    from ocrq.consumer.searchable import build_searchable_pdf

    pages = _pages_of(state, doc, kind)
    if kind == "text":
        return build_searchable_pdf(doc["pdf"], PDF, pages, {}, dpi=dpi)
    words = {number: w for (name, number), w in state.words.items() if name == doc["name"]}
    return build_searchable_pdf(doc["scan"], PDF, pages, words, dpi=dpi)


def _assemble(state: TreeState, doc: dict[str, Any]) -> None:
    from ocrq.consumer.assemble import assemble
    from ocrq.shared.schemas import EngineInfo, Timings

    engine = EngineInfo(name="tesseract", model="bench", profile="default")
    for kind in ("text", "ocr"):
        state.results[(kind, doc["name"])] = assemble(
            job_id=f"{kind}-{doc['name']}",
            media_type=PDF,
            text_pages=_pages_of(state, doc, kind),
            outputs=[],
            engine=engine,
            timings=Timings(),
        )


def _markdown(result: Any) -> str:
    from ocrq.shared.render.markdown import document_markdown

    return document_markdown(result.pages, result.segments)


def _html(result: Any) -> str:
    from ocrq.shared.render.html import document_html

    return document_html(result)


def _text(result: Any) -> str:
    from ocrq.shared.render.text import document_text

    return document_text(result)


def _chunks(result: Any) -> list[Any]:
    from ocrq.shared.render.chunks import document_chunks

    return document_chunks(result, chunk_tokens=512)


def stage_setup(state: TreeState, stage: str) -> float | None:
    """Import the stage's modules (and load Tesseract once); ms, or None when already done."""
    if stage == "tesseract" and not state.tesseract_loaded:
        ms, _ = _timed(_load_tesseract)
        state.tesseract_loaded = True
        return ms
    if stage == "text_layer" and "ocrq.consumer.textlayer" not in sys.modules:
        ms, _ = _timed(__import__, "ocrq.consumer.textlayer")
        return ms
    if stage == "chunks" and "ocrq.shared.render.chunks" not in sys.modules:
        ms, _ = _timed(__import__, "ocrq.shared.render.chunks")
        return ms
    return None


def _load_tesseract() -> None:
    from ocrq.consumer.engines import tesseract

    tesseract.load_worker("eng")


def serve(tree: str) -> None:
    """Answer stage requests, one JSON line in and one out, until stdin closes."""
    # Anything the libraries print goes to stderr; the replies keep the real stdout.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    state = TreeState(tree)
    for line in sys.stdin:
        request = json.loads(line)
        stage, docs, dpi = request["stage"], request["docs"], request["dpi"]
        try:
            setup_ms = stage_setup(state, stage)
            run = run_page_stage if stage in PAGE_STAGES else run_document_stage
            reply: dict[str, Any] = {"ms": run(state, stage, docs, dpi), "setup_ms": setup_ms}
            reply["figures"] = state.figures
        except Exception as e:  # reported to the parent, which stops the run
            reply = {"error": f"{stage}: {type(e).__name__}: {e}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main() -> None:
    """Serve one tree's stages: the process bench/bench_outputs.py starts per tree."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", choices=("before", "after"), required=True)
    parser.add_argument("--no-layout", action="store_true")
    args = parser.parse_args()
    # Run by path, this file's folder heads sys.path: drop it, so only the tree's code is found.
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
    if args.no_layout:
        # The older tree's install had no pymupdf-layout, which `import pymupdf` loads
        # (onnxruntime and the model: about 0.3 s) whenever it is installed.
        sys.modules["pymupdf.layout"] = None  # type: ignore[assignment]
    serve(args.serve)


if __name__ == "__main__":
    main()
