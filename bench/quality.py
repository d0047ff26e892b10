"""OCR quality against ground truth: ocrq and Tesseract side by side, CER/WER and seconds per page.

    .venv/bin/python -m bench.quality --pages 1              # a private stack, local engine
    .venv/bin/python -m bench.quality --url http://127.0.0.1:8000 --api-key KEY --json q.json

The corpus (default ../shared/corpus) holds images with truth in truth/<stem>.txt and
born-digital PDFs whose text layer is the truth. Each PDF page is rendered at --dpi into an
image-only PDF (submitted with text_layer=off) and a PNG (for Tesseract); one born-digital
page is also rendered rotated 90/180/270. Hostile files (SOURCES.tsv kind) are skipped.
ocrq's seconds per page come from the job's started_at/finished_at (claim to end: raster +
OCR, no queueing); Tesseract's from wall time per page, process start included.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pymupdf

from bench import quality_cases
from bench.edit_distance import levenshtein
from bench.quality_checks import print_checks
from ocrq.shared.schemas import TERMINAL
from tests.support import measuring, services

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"
HOSTILE = re.compile(r"fuzzed|encrypted|0 pages|bomb", re.IGNORECASE)
GT_IN_KIND = re.compile(r"GT\s*=?\s*(?:\S*/)?(\S+\.txt)")
ROTATED_SOURCE = ("file_pdfjs_test.pdf", 0)  # (document, page index): prose, one column
ROTATIONS = (90, 180, 270)
POLL_WAIT_S = 30


@dataclass
class Case:
    name: str
    document: bytes  # what ocrq gets
    images: list[Path]  # what Tesseract gets, one file per page (a multi-page TIFF: one)
    pages: int
    truth: str
    tesseract_dpi: int | None = None  # told to Tesseract for renders; files carry their own


@dataclass
class Score:
    cer_distance: int = 0
    cer_ci_distance: int = 0
    wer_distance: int = 0
    seconds: float = 0.0
    timed_by: str = ""  # "job timestamps" or "wall time"
    error: str | None = None
    text: str = field(default="", repr=False)  # the hypothesis, as scored (not in --json)


@dataclass
class Row:
    name: str
    pages: int
    chars: int
    words: int
    scores: dict[str, Score] = field(default_factory=dict)
    truth: str = field(default="", repr=False)  # normalised, as scored
    trusted: bool = True  # False: shown, but its truth is known bad and it stays out of TOTAL


# --- scoring -----------------------------------------------------------------------------


# A word broken at a line's end, "com-" then "pile": joined on both sides before scoring, so
# that an engine that joins it ("compile") and one that keeps the print ("com- pile") score
# alike against a truth that does either.
LINE_END_HYPHEN = re.compile(r"(?<=[^\W\d_])- (?=[^\W\d_A-Z])")


def normalise(text: str) -> str:
    """What is scored: compatibility forms as their letters (NFKC: the ligature "ﬁ" is "fi"),
    whitespace runs as one space, words hyphenated at a line's end joined."""
    return LINE_END_HYPHEN.sub("", " ".join(unicodedata.normalize("NFKC", text).split()))


HTML_TAGS = r"</?(table|thead|tbody|tr|td|th|br|p|div|span|sup|sub|b|i|em|strong)\b[^>]*>"
EMPHASIS = r"(?<![\w\\*])(\*{1,3}|_{2,3})(?=\S)(.+?)(?<=[^\s\\])\1(?![\w*])"  # not a*b, snake_
MARKDOWN_RULES = [
    (re.compile(r"\A(\s*>\s*(⚠|\*\*ocrq warning:\*\*)[^\n]*\n?)+"), ""),  # warning notes
    (re.compile(r"^\s{0,3}#{1,6}\s+", re.M), ""),  # headings
    (re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)+\|?\s*$", re.M), ""),  # table rules
    # List markers and display-maths fences are Markdown's syntax, not the page's text (a
    # page's "•" bullet becomes "- "; the CLI drops the glyph too).
    (re.compile(r"^\s*[-*+]\s+(?=\S)", re.M), ""),
    (re.compile(r"\$\$"), ""),
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), ""),  # images
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # links: their text
    (re.compile(HTML_TAGS), " "),  # tables as HTML, line breaks
    (re.compile(EMPHASIS), r"\2"),
    (re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>])"), r"\1"),  # backslash escapes
]


def strip_markdown(markdown: str) -> str:
    """Plain text of a page's Markdown: no headings, emphasis, table syntax or warning notes."""
    for pattern, replacement in MARKDOWN_RULES:
        markdown = pattern.sub(replacement, markdown)
    lines = markdown.splitlines()
    return "\n".join(
        line.replace("|", " ") if line.lstrip().startswith("|") else line for line in lines
    )


def score(hypothesis: str, truth: str, seconds: float, timed_by: str) -> Score:
    """Edit distances of a hypothesis against the truth, characters and words.

    A truth written in capitals only (SROIE's receipts) says nothing of case: both sides are
    case-folded before scoring.
    """
    hyp, ref = normalise(hypothesis), normalise(truth)
    if ref == ref.upper():
        hyp, ref = hyp.casefold(), ref.casefold()
    return Score(
        cer_distance=levenshtein(hyp, ref),
        cer_ci_distance=levenshtein(hyp.casefold(), ref.casefold()),
        wer_distance=levenshtein(hyp.split(), ref.split()),
        seconds=seconds,
        timed_by=timed_by,
        text=hyp,
    )


# --- corpus ------------------------------------------------------------------------------


def read_kinds(corpus: Path) -> dict[str, str]:
    """File name → SOURCES.tsv kind."""
    with (corpus / "SOURCES.tsv").open(newline="") as f:
        return {Path(r["local_path"]).name: r["kind"] for r in csv.DictReader(f, delimiter="\t")}


def truth_file(corpus: Path, image: Path, kind: str) -> Path | None:
    """The image's truth: named in its kind ("GT = x.txt"), else its stem, else a stem prefix."""
    named = GT_IN_KIND.search(kind)
    candidates = [corpus / "truth" / named.group(1)] if named else []
    candidates.append(corpus / "truth" / f"{image.stem}.txt")
    prefixes = sorted(corpus.glob("truth/*.txt"), key=lambda p: -len(p.stem))
    candidates += [p for p in prefixes if image.stem.startswith(p.stem)]
    return next((p for p in candidates if p.is_file()), None)


def image_only_pdf(pixmaps: list[pymupdf.Pixmap], dpi: int) -> bytes:
    """A PDF whose pages are only these pictures, sized so that they are `dpi` on paper."""
    out = pymupdf.open()
    for pixmap in pixmaps:
        page = out.new_page(width=pixmap.width * 72 / dpi, height=pixmap.height * 72 / dpi)
        page.insert_image(page.rect, pixmap=pixmap)
    return bytes(out.tobytes(garbage=3, deflate=True))


def render_case(name: str, pages: list[pymupdf.Page], dpi: int, rotate: int, tmp: Path) -> Case:
    """Pages rendered (and turned by `rotate` degrees) to an image-only PDF and to PNGs."""
    matrix = pymupdf.Matrix(dpi / 72, dpi / 72).prerotate(rotate)
    pixmaps = [
        page.get_pixmap(matrix=matrix, colorspace=pymupdf.csRGB, alpha=False) for page in pages
    ]
    images = []
    for number, pixmap in enumerate(pixmaps, 1):
        images.append(tmp / f"{name}-p{number}.png")
        pixmap.save(images[-1])
    truth = "\n".join(page.get_text() for page in pages)
    return Case(name, image_only_pdf(pixmaps, dpi), images, len(pages), truth, tesseract_dpi=dpi)


def pdf_cases(path: Path, args: argparse.Namespace, tmp: Path) -> Iterator[Case]:
    """A born-digital PDF's first pages; for the chosen page, its rotated renders too."""
    with pymupdf.open(path) as doc:
        pages = [doc[i] for i in range(min(args.pages, doc.page_count))]
        if not normalise("".join(page.get_text() for page in pages)):
            print(f"skipped {path.name}: no text layer to serve as truth")
            return
        yield render_case(path.stem, pages, args.dpi, 0, tmp)
        if path.name == ROTATED_SOURCE[0]:
            for angle in ROTATIONS:
                page = [doc[ROTATED_SOURCE[1]]]
                yield render_case(f"{path.stem}-rot{angle}", page, args.dpi, angle, tmp)


def image_case(path: Path, corpus: Path, kind: str) -> Case | None:
    """A scan with its truth file, or None (said) when it has none."""
    truth = truth_file(corpus, path, kind)
    if truth is None:
        print(f"skipped {path.name}: no truth file")
        return None
    with pymupdf.open(path) as doc:
        pages = doc.page_count
    return Case(path.stem, path.read_bytes(), [path], pages, truth.read_text())


def load_cases(args: argparse.Namespace, tmp: Path) -> list[Case]:
    """Every scorable document of the corpus, hostile ones skipped (and said)."""
    kinds = read_kinds(args.corpus)
    cases: list[Case] = []
    for path in sorted((args.corpus / "documents").iterdir()):
        kind = kinds.get(path.name, "")
        if args.only and args.only not in path.name:
            continue
        if HOSTILE.search(kind):
            print(f"skipped {path.name}: hostile ({kind})")
        elif path.suffix.lower() == ".pdf":
            cases.extend(pdf_cases(path, args, tmp))
        elif case := image_case(path, args.corpus, kind):
            cases.append(case)
    for path, truth in quality_cases.receipt_files(args.documents):
        if not args.only or args.only in path.name:
            with pymupdf.open(path) as doc:
                pages = doc.page_count
            cases.append(Case(path.stem, path.read_bytes(), [path], pages, truth))
    return cases + quality_cases.skewed_cases(cases, tmp, args.only)


# --- engines -----------------------------------------------------------------------------


def job_params(case: Case, args: argparse.Namespace) -> dict[str, str]:
    """The job's options: its text layer ignored (the pages are read), at --dpi."""
    params = {"text_layer": "off", "dpi": str(args.dpi), "filename": case.name}
    if args.no_layout:
        params["layout"] = "false"
    return params


def ocrq_job(
    client: httpx.Client, case: Case, params: dict[str, str]
) -> tuple[dict[str, Any], float]:
    """Submit one document, long-poll it to its end; its final view and the wall seconds."""
    started = time.perf_counter()
    r = client.post("/v1/jobs", content=case.document, params=params)
    if r.status_code not in (200, 202):
        raise RuntimeError(f"submit answered {r.status_code}: {r.text[:200]}")
    job_id = r.json()["id"]
    while True:
        view: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", params={"wait": POLL_WAIT_S}).json()
        if view["status"] in TERMINAL:
            return view, time.perf_counter() - started


def run_ocrq(client: httpx.Client, case: Case, params: dict[str, str]) -> Score:
    """ocrq's text of one case, scored; seconds from the job's own timestamps when it has them."""
    view, wall_s = ocrq_job(client, case, params)
    if view["status"] != "done":
        return Score(error=f"{view['status']}: {(view.get('error') or {}).get('code')}")
    result = client.get(f"/v1/jobs/{view['id']}/result").json()
    text = "\n\n".join(strip_markdown(page.get("markdown") or "") for page in result["pages"])
    if view.get("started_at") and view.get("finished_at"):
        seconds = measuring.epoch(view["finished_at"]) - measuring.epoch(view["started_at"])
        return score(text, case.truth, seconds, "job timestamps")
    return score(text, case.truth, wall_s, "wall time")


def run_tesseract(case: Case, args: argparse.Namespace) -> Score:
    """Tesseract on each page image, one process at a time; wall time includes process start."""
    env = {**os.environ, "OMP_THREAD_LIMIT": str(args.tesseract_threads)}
    dpi = ["--dpi", str(case.tesseract_dpi)] if case.tesseract_dpi else []
    texts, seconds = [], 0.0
    for image in case.images:
        command = ["tesseract", str(image), "stdout", *dpi, *args.tesseract_args.split()]
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        seconds += time.perf_counter() - started
        if done.returncode != 0:
            return Score(error=f"exit {done.returncode}: {done.stderr.strip()[-200:]}")
        texts.append(done.stdout)
    return score("\n".join(texts), case.truth, seconds, "wall time")


# --- report ------------------------------------------------------------------------------


def percent(distance: int, length: int) -> str:
    """distance / length as a percentage, or n/a."""
    return f"{100 * distance / length:.1f}%" if length else "n/a"


def engine_cells(s: Score | None, chars: int, words: int, pages: int) -> list[str]:
    """CER, case-insensitive CER, WER and s/page of one engine, or its error."""
    if s is None:
        return ["-"] * 4
    if s.error:
        return ["error"] * 4
    per_page = f"{s.seconds / pages:.2f}" if pages else "n/a"
    return [
        percent(s.cer_distance, chars),
        percent(s.cer_ci_distance, chars),
        percent(s.wer_distance, words),
        per_page,
    ]


def aligned(values: list[str], widths: list[int]) -> str:
    """The first value left-aligned, the rest right-aligned, two spaces apart."""
    padded = [v.rjust(w) for v, w in zip(values, widths, strict=True)]
    return "  ".join([values[0].ljust(widths[0]), *padded[1:]])


def print_table(rows: list[Row], engines: list[str]) -> None:
    """One line per document, then the character-weighted totals."""
    columns = ["CER", "CERci", "WER", "s/page"]
    short = {"tesseract": "tess"}
    head = ["doc", "pages", "chars"] + [f"{short.get(e, e)} {c}" for c in columns for e in engines]
    widths = [24, 5, 6] + [max(len(h), 7) for h in head[3:]]
    print(aligned(head, widths))
    for row in [*rows, total_row(rows, engines)]:
        per_engine = [
            engine_cells(row.scores.get(e), row.chars, row.words, row.pages) for e in engines
        ]
        values = [row.name, str(row.pages), str(row.chars)]
        values += [per_engine[e][c] for c in range(len(columns)) for e in range(len(engines))]
        print(aligned(values, widths))
    for row in rows:
        if not row.trusted:
            print(f"{row.name}: its truth is known to be wrong (--untrusted-truth); not in TOTAL")
        for engine in engines:
            if (s := row.scores.get(engine)) and s.error:
                print(f"{row.name}: {engine} failed ({s.error}); not in TOTAL")


def total_row(rows: list[Row], engines: list[str]) -> Row:
    """Sums over the documents every engine read without error: distances, lengths, seconds."""
    scored = [
        r
        for r in rows
        if r.trusted and all(e in r.scores and not r.scores[e].error for e in engines)
    ]
    total = Row(
        "TOTAL (weighted)",
        sum(r.pages for r in scored),
        sum(r.chars for r in scored),
        sum(r.words for r in scored),
    )
    for engine in engines:
        parts = [r.scores[engine] for r in scored]
        total.scores[engine] = Score(
            cer_distance=sum(s.cer_distance for s in parts),
            cer_ci_distance=sum(s.cer_ci_distance for s in parts),
            wer_distance=sum(s.wer_distance for s in parts),
            seconds=sum(s.seconds for s in parts),
        )
    return total


def print_ratios(rows: list[Row]) -> None:
    """ocrq over Tesseract: weighted CER and seconds per page."""
    total = total_row(rows, ["ocrq", "tesseract"])
    ocrq, tess = total.scores["ocrq"], total.scores["tesseract"]
    if tess.cer_distance and tess.seconds:
        print(
            f"ocrq/tesseract: weighted CER x{ocrq.cer_distance / tess.cer_distance:.2f}, "
            f"s/page x{ocrq.seconds / tess.seconds:.2f}"
        )


def tesseract_version() -> str | None:
    """The first line of `tesseract --version`, or None when it is not on PATH."""
    if shutil.which("tesseract") is None:
        return None
    done = subprocess.run(["tesseract", "--version"], capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).splitlines()[0]


def machine() -> dict[str, Any]:
    """Cores, load average and platform, for the report."""
    return {
        "cores": len(os.sched_getaffinity(0)),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pymupdf": pymupdf.VersionBind,
        "ocrq": importlib.metadata.version("ocrq"),
    }


@contextlib.contextmanager
def ocrq_client(args: argparse.Namespace) -> Iterator[httpx.Client]:
    """A client of the stack at --url, or of a private one (Redis, producer, local worker)."""
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    timeout = httpx.Timeout(POLL_WAIT_S + 30)
    with contextlib.ExitStack() as procs:
        url = args.url
        if url is None:
            tmp = procs.enter_context(services.scratch_dir())
            redis_url = procs.enter_context(services.private_redis(tmp))
            url = procs.enter_context(services.producer(redis_url, tmp))
            worker = services.worker(redis_url, None, tmp, health_timeout_s=120, engine=args.engine)
            procs.enter_context(worker)
            print(f"private stack: producer {url}, one worker, OCRQ_ENGINE={args.engine}")
        yield procs.enter_context(httpx.Client(base_url=url, headers=headers, timeout=timeout))


def run_all(
    cases: list[Case], args: argparse.Namespace, has_tesseract: bool
) -> tuple[list[Row], dict[str, Any]]:
    """Every case through ocrq (one job at a time) and Tesseract; the rows and engine info."""
    rows: list[Row] = []
    engine_info: dict[str, Any] = {}
    with ocrq_client(args) as client:
        warm = min(cases, key=lambda c: len(c.document))
        # Models loaded, pools started: not timed.
        view, _ = ocrq_job(client, warm, job_params(warm, args))
        if view["status"] == "done":
            engine_info = client.get(f"/v1/jobs/{view['id']}/result").json().get("engine") or {}
        for case in cases:
            ref = normalise(case.truth)
            row = Row(case.name, case.pages, len(ref), len(ref.split()), truth=ref)
            row.trusted = case.name.split("-rot")[0] not in args.untrusted_truth.split(",")
            row.scores["ocrq"] = run_ocrq(client, case, job_params(case, args))
            if has_tesseract:
                row.scores["tesseract"] = run_tesseract(case, args)
            errors = {e: s.error for e, s in row.scores.items() if s.error}
            print(f"  {case.name}: done" + (f" (errors: {errors})" if errors else ""), flush=True)
            rows.append(row)
    return rows, engine_info


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument(
        "--documents",
        type=Path,
        default=quality_cases.DOCUMENTS,
        help="receipts with a transcript beside each image (<stem>.txt)",
    )
    parser.add_argument("--pages", type=int, default=3, help="pages per PDF at most")
    parser.add_argument("--dpi", type=int, default=150, help="render DPI of PDF pages")
    parser.add_argument(
        "--no-layout",
        action="store_true",
        help="submit with layout=false: no layout model (text blocks only, no tables, figures)",
    )
    parser.add_argument("--url", help="a running ocrq producer (default: start a private stack)")
    parser.add_argument("--api-key", default=os.environ.get("OCRQ_API_KEY"))
    parser.add_argument("--engine", default="local", help="the private stack's OCRQ_ENGINE")
    parser.add_argument("--tesseract-args", default="-l eng+fra --psm 1")
    parser.add_argument("--tesseract-threads", type=int, default=1, help="OMP_THREAD_LIMIT")
    parser.add_argument("--json", type=Path, help="also write raw per-document figures here")
    parser.add_argument("--save-text", type=Path, help="write each engine's text and the truth")
    parser.add_argument("--only", help="only documents whose name contains this")
    parser.add_argument(
        "--untrusted-truth",
        default="",
        help="documents (comma-separated stems) whose text layer is known not to be the page's "
        "text: shown, left out of TOTAL",
    )
    return parser.parse_args()


def print_notes(rows: list[Row], args: argparse.Namespace, env: dict[str, Any]) -> None:
    """How the figures were made, the machine, the date and the versions."""
    ocrq_timing = sorted({r.scores["ocrq"].timed_by for r in rows} - {""})
    print(
        "\nCER/WER: Levenshtein distance / reference length, whitespace runs as one space, "
        "NFKC forms (ligatures as letters),\nwords hyphenated at a line's end joined, on both "
        "sides; CERci: case-folded; ocrq's Markdown stripped first.\ns/page: ocrq from "
        f"{' / '.join(ocrq_timing) or '-'} (job: started_at to finished_at);\ntesseract from "
        f"wall time per page, process start included ({args.tesseract_args}, "
        f"OMP_THREAD_LIMIT={args.tesseract_threads}). PDF pages rendered at {args.dpi} DPI."
        + (" ocrq jobs with layout=false." if args.no_layout else "")
    )
    before, after, engine = env["start"], env["end"], env["ocrq_engine"]
    print(
        f"date {env['date']:%Y-%m-%d %H:%M %Z}; {before['cores']} cores; load average "
        f"{before['load_avg']} at start, {after['load_avg']} at end"
    )
    print(
        f"ocrq {before['ocrq']} ({engine.get('name')}: {engine.get('model')}); "
        f"{env['tesseract']}; PyMuPDF {before['pymupdf']}; Python {before['python']}"
    )


def write_outputs(rows: list[Row], args: argparse.Namespace, env: dict[str, Any]) -> None:
    """--json: the figures; --save-text: each engine's scored text next to the truth."""
    if args.json:
        figures = [asdict(r) for r in rows]
        for row in figures:
            del row["truth"]
            for engine_score in row["scores"].values():
                del engine_score["text"]
        report = {**env, "date": env["date"].isoformat(), "rows": figures}
        report["args"] = {k: str(v) for k, v in vars(args).items()}
        args.json.write_text(json.dumps(report, indent=2))
    if args.save_text:
        args.save_text.mkdir(parents=True, exist_ok=True)
        for row in rows:
            (args.save_text / f"{row.name}.truth.txt").write_text(row.truth)
            for engine, engine_score in row.scores.items():
                (args.save_text / f"{row.name}.{engine}.txt").write_text(engine_score.text)


def main() -> None:
    """Load the corpus, run both engines, print the table and notes, write the outputs."""
    args = parse_args()
    env: dict[str, Any] = {"date": datetime.now().astimezone(), "start": machine()}
    env["tesseract"] = tesseract_version()
    if env["tesseract"] is None:
        print("tesseract is not on PATH: its columns are skipped")
    with services.scratch_dir() as tmp:
        cases = load_cases(args, tmp)
        print(f"{len(cases)} documents, {sum(c.pages for c in cases)} pages", flush=True)
        rows, env["ocrq_engine"] = run_all(cases, args, env["tesseract"] is not None)
    env["end"] = machine()
    engines = ["ocrq", "tesseract"] if env["tesseract"] else ["ocrq"]
    print()
    print_table(rows, engines)
    if env["tesseract"]:
        print_ratios(rows)
        print_checks(rows)
    print_notes(rows, args, env)
    write_outputs(rows, args, env)


if __name__ == "__main__":
    main()
