"""Document structure against known truth: headings, table cells, reading order and CER per path.

    .venv/bin/python -m bench.bench_structure                        # this tree only
    .venv/bin/python -m bench.bench_structure --before /tmp/before   # an older tree side by side

The documents are real authored Markdown (bench/documents/structure, SOURCES.md) rendered to
PDF: the Markdown's headings, tables and paragraphs are the truth. Paths: `text_layer` (the
born-digital PDF, default options), `tesseract` and `rapidocr` (the PDF rendered at --dpi into
an image-only PDF, submitted with text_layer=off). Each tree (--before's, then this one) gets
its own private Redis, producer and worker per engine (the older tree's processes run with
PYTHONPATH=--before); every document goes through both, one job at a time, interleaved.

Each Result is scored twice: from its blocks (labels title/heading with their level, table
blocks with their cells) and from its Markdown (`#` lines, pipe or HTML tables), both read by
bench/document_structure.py, scored by bench/structure_scores.py.
"""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import os

# pymupdf imports onnxruntime, whose usage telemetry starts at import: opt out first.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import argparse
import contextlib
import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench.arguments import names_of
from bench.document_structure import Structure, structure_of_blocks, structure_of_markdown
from bench.structure_documents import StructureDocument, load, scanned_pdf
from bench.structure_scores import StructureScore, structure_score, total
from ocrq.shared.schemas import TERMINAL
from tests.support import services

REPO = Path(__file__).resolve().parent.parent
PATHS = {  # path -> (engine of the worker that runs it, scanned?)
    "text_layer": ("tesseract", False),
    "tesseract": ("tesseract", True),
    "rapidocr": ("rapidocr", True),
}
SOURCES = ("blocks", "markdown")
POLL_WAIT_S = 30
JOB_TIMEOUT_S = 300
WARNING_NOTE = re.compile(r"^\s*>\s*(⚠|\*\*ocrq warning:\*\*).*$", re.M)  # a doubtful page's


@dataclass(frozen=True)
class Outcome:
    path: str
    tree: str
    document: str
    source: str
    score: StructureScore | None  # None: the job failed (error says why)
    error: str | None = None


@contextlib.contextmanager
def code_of(tree: Path | None) -> Iterator[None]:
    """Processes started inside run the tree's `ocrq`: PYTHONPATH=tree, and tree as their cwd.

    The cwd matters: `python -m` puts it first on sys.path, ahead of PYTHONPATH, so a process
    started from this checkout would import this checkout's `ocrq` whatever PYTHONPATH says.
    """
    if tree is None:
        yield
        return
    saved_path, saved_cwd = os.environ.get("PYTHONPATH"), Path.cwd()
    os.environ["PYTHONPATH"] = str(tree)
    os.chdir(tree)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        if saved_path is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved_path


def start_stack(
    procs: contextlib.ExitStack, tree: Path | None, engine: str, tmp: Path
) -> httpx.Client:
    """A private Redis, producer and one `engine` worker of the tree's code; a client of it."""
    tmp.mkdir(parents=True)
    with code_of(tree):
        redis_url = procs.enter_context(services.private_redis(tmp))
        url = procs.enter_context(services.producer(redis_url, tmp))
        worker = services.worker(redis_url, None, tmp, health_timeout_s=120, engine=engine)
        procs.enter_context(worker)
    timeout = httpx.Timeout(POLL_WAIT_S + 30)
    return procs.enter_context(httpx.Client(base_url=url, timeout=timeout))


def run_job(client: httpx.Client, name: str, pdf: bytes, scanned: bool, dpi: int) -> Any:
    """Submit one document, long-poll it to its end; its Result JSON (RuntimeError if not done)."""
    params = {
        "filename": f"{name}.pdf",
        **({"text_layer": "off", "dpi": str(dpi)} if scanned else {}),
    }
    r = client.post("/v1/jobs", content=pdf, params=params)
    if r.status_code not in (200, 202):
        raise RuntimeError(f"submit answered {r.status_code}: {r.text[:200]}")
    job_id = r.json()["id"]
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        view = client.get(f"/v1/jobs/{job_id}", params={"wait": POLL_WAIT_S}).json()
        if view["status"] in TERMINAL:
            if view["status"] != "done":
                raise RuntimeError(f"{view['status']}: {(view.get('error') or {}).get('code')}")
            return client.get(
                f"/v1/jobs/{job_id}/result", headers={"Accept": "application/json"}
            ).json()
    raise RuntimeError(f"not done after {JOB_TIMEOUT_S} s")


def result_markdown(result: dict[str, Any]) -> str:
    """The Result's Markdown without the warning notes doubtful pages start with."""
    return WARNING_NOTE.sub("", result.get("markdown") or "")


def found_structures(result: dict[str, Any]) -> dict[str, Structure]:
    """What the Result says the structure is, read from its blocks and from its Markdown."""
    return {
        "blocks": structure_of_blocks(result.get("pages") or []),
        "markdown": structure_of_markdown(result_markdown(result)),
    }


def run_path(
    path: str,
    clients: dict[str, httpx.Client],
    documents: list[StructureDocument],
    dpi: int,
    save: Path | None,
) -> list[Outcome]:
    """Every document through every tree's stack on this path, interleaved, scored."""
    outcomes = []
    scanned = PATHS[path][1]
    for document in documents:
        pdf = scanned_pdf(document.pdf, dpi) if scanned else document.pdf
        for tree, client in clients.items():
            try:
                result = run_job(client, document.name, pdf, scanned, dpi)
            except (RuntimeError, httpx.HTTPError) as error:
                for source in SOURCES:
                    outcomes.append(Outcome(path, tree, document.name, source, None, str(error)))
                continue
            if save:
                name = f"{path}.{tree}.{document.name}.json"
                (save / name).write_text(json.dumps(result, indent=1, ensure_ascii=False))
            for source, found in found_structures(result).items():
                score = structure_score(document.truth, found)
                outcomes.append(Outcome(path, tree, document.name, source, score))
        print(f"  {path}: {document.name} done", flush=True)
    return outcomes


def run_all(args: argparse.Namespace, documents: list[StructureDocument]) -> list[Outcome]:
    """Per engine, one stack per tree; each path on its engine's stacks."""
    trees: dict[str, Path | None] = {"before": args.before} if args.before else {}
    trees["after"] = args.after
    outcomes: list[Outcome] = []
    engines = sorted({PATHS[p][0] for p in args.paths}, key=lambda e: e != "tesseract")
    with services.scratch_dir() as tmp:
        for engine in engines:
            with contextlib.ExitStack() as procs:
                started = time.perf_counter()
                clients = {
                    tree: start_stack(procs, where, engine, tmp / f"{engine}-{tree}")
                    for tree, where in trees.items()
                }
                print(f"{engine} stacks up in {time.perf_counter() - started:.0f} s", flush=True)
                for path in (p for p in args.paths if PATHS[p][0] == engine):
                    outcomes += run_path(path, clients, documents, args.dpi, args.save_results)
    return outcomes


def percent(value: float, counted: int) -> str:
    """A share as a percentage, or '-' when nothing was there to count."""
    return f"{100 * value:.0f}%" if counted else "-"


def score_cells(s: StructureScore) -> list[str]:
    """The printed figures of one score."""
    h, c, o, f = s.headings, s.cells, s.order, s.furniture
    return [
        percent(h.precision, h.found),
        percent(h.recall, h.truth),
        percent(h.level_accuracy, h.matched),
        percent(c.f1, c.truth_cells),
        f"{c.tables_found}",
        percent(o.share_in_order, o.located),
        percent(o.share_located, o.locatable),
        percent(f.share_labelled, f.truth),
        percent(f.share_kept_out, f.truth),
        f"{100 * s.cer:.1f}%",
    ]


HEAD = ["path", "doc", "tree", "from", "head P", "head R", "level", "cell F1"]
HEAD += ["tables", "in order", "located", "furn lab", "furn out", "CER"]
WIDTHS = [10, 22, 6, 8, 6, 6, 5, 7, 6, 8, 7, 8, 8, 6]


def line(values: list[str]) -> str:
    """Four left-aligned columns, the figures right-aligned."""
    left = [v.ljust(w) for v, w in zip(values[:4], WIDTHS[:4], strict=True)]
    right = [v.rjust(w) for v, w in zip(values[4:], WIDTHS[4:], strict=True)]
    return "  ".join(left + right)


def print_tables(outcomes: list[Outcome]) -> None:
    """Per document, then the totals (counts summed over the documents)."""
    print(line(HEAD))
    keys = sorted({(o.path, o.tree, o.source) for o in outcomes}, key=row_order)
    for path, tree, source in keys:
        for o in (o for o in outcomes if (o.path, o.tree, o.source) == (path, tree, source)):
            if o.score is None:
                print(f"{path}  {o.document}  {tree}  {source}  error: {o.error}")
            else:
                print(line([path, o.document, tree, source, *score_cells(o.score)]))
    print("\nTOTAL (counts summed over the documents; CER weighted by length):")
    print(line(HEAD))
    for path, tree, source in keys:
        group = [o for o in outcomes if (o.path, o.tree, o.source) == (path, tree, source)]
        scores = [o.score for o in group if o.score is not None]
        if len(scores) == len(group):  # a failed job leaves its group out of the totals
            print(line([path, f"{len(scores)} docs", tree, source, *score_cells(total(scores))]))


def row_order(key: tuple[str, str, str]) -> tuple[int, int, int]:
    """Paths as listed, before first, blocks first."""
    path, tree, source = key
    return list(PATHS).index(path), tree != "before", SOURCES.index(source)


def revision(tree: Path) -> str:
    """The tree's commit and whether it has changes, or 'unknown' (an exported copy)."""
    done = subprocess.run(
        ["git", "-C", str(tree), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown (not a git checkout)"


def print_notes(args: argparse.Namespace, started: datetime, load_start: list[float]) -> None:
    """How the figures were made, the trees, the machine."""
    print(
        "\nhead P/R: headings found / truth matched one-to-one (similarity >= 0.8, case-folded);"
        "\nlevel: matched headings at the truth's level, both relative to their top level;"
        "\ncell F1: cells matched by (row, col, text similarity >= 0.8), tables paired by most"
        " shared cells;\nin order: located truth units (headings, paragraphs, list items, tables)"
        " in the truth's order\n(longest increasing run); located: units found by a 3-word run"
        " unique to truth and result;\nfurn lab: the truth's running headers and page numbers"
        " labelled as furniture on their page\n(blocks only: Markdown has no labels); furn out:"
        " those the body does not say;\nCER: edit distance / truth length, whitespace runs as one"
        f" space. Scans: rendered at {args.dpi} DPI, grey, text_layer=off."
        "\nvLLM path: not measured here; the fake vLLM echoes the page's text layer, so its"
        " structure says nothing of a model's."
    )
    trees = f"before {args.before} ({revision(args.before)}), " if args.before else ""
    after = args.after or REPO
    print(f"trees: {trees}after {after} ({revision(after)})")
    print(
        f"date {started:%Y-%m-%d %H:%M %Z}; {len(os.sched_getaffinity(0))} cores; load average "
        f"{load_start} at start, {[round(x, 2) for x in os.getloadavg()]} at end; "
        f"{(datetime.now().astimezone() - started).total_seconds():.0f} s"
    )


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="an older tree (git worktree) to compare")
    parser.add_argument("--after", type=Path, help="the newer tree (default: this checkout)")
    parser.add_argument("--paths", type=names_of(PATHS), default=list(PATHS))
    parser.add_argument("--dpi", type=int, default=200, help="scan resolution")
    parser.add_argument("--only", help="only documents whose name contains this")
    parser.add_argument("--json", type=Path, help="write every score (with counts) here")
    parser.add_argument("--save-results", type=Path, help="write each Result JSON here")
    return parser.parse_args()


def main() -> None:
    """Load the documents, run every path on every tree, print the tables and notes."""
    args = parse_args()
    started = datetime.now().astimezone()
    load_start = [round(x, 2) for x in os.getloadavg()]
    documents = load(only=args.only)
    if args.save_results:
        args.save_results.mkdir(parents=True, exist_ok=True)
    pages = sum(d.pages for d in documents)
    print(f"{len(documents)} documents, {pages} pages; paths {', '.join(args.paths)}", flush=True)
    outcomes = run_all(args, documents)
    print()
    print_tables(outcomes)
    print_notes(args, started, load_start)
    if args.json:
        report: dict[str, Any] = {"date": started.isoformat()}
        report["args"] = {k: str(v) for k, v in vars(args).items()}
        report["outcomes"] = [asdict(o) for o in outcomes]
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
