"""Read grounded OCR output (DeepSeek-OCR, Unlimited-OCR) into blocks and clean Markdown.

DeepSeek-OCR writes, for each block of the page::

    <|ref|>LABEL<|/ref|><|det|>[[x1, y1, x2, y2]], [[...]]<|/det|>
    the block's text, up to the next <|ref|> or the end

and Unlimited-OCR ``<|det|>LABEL [x1, y1, x2, y2]<|/det|>text`` (with ``<PAGE>`` between
the pages of a multi-page answer), box corners as integers in 0..coord_scale of the page.
Model text can be cut off at max_tokens anywhere (mid-label, mid-box) or be garbled; the
parser never raises and never lets a tag, a label word or a coordinate reach the text.

Decisions:
- Labels map into the block vocabulary (``block_label``): title, sub_title → heading (the
  level from the hashes the model wrote, 2 when none), table, image/chart → figure,
  image_caption/table_caption → caption, equation → formula, header/footer/page_number →
  page furniture, list items; a label it does not know becomes ``text``.
- A table's text is HTML: it is read into ``Block.table`` (cells, spans, header cells) and
  the block's text becomes a Markdown table (the HTML when a cell spans). DeepSeek-OCR
  often writes a table's box, then its caption, then the table's HTML after the caption:
  that HTML goes back to the table.
- A figure's text is empty and its image None: the worker crops it and fills both. Text the
  model wrote after a figure's box follows it as a ``text`` block.
- A ref with several boxes yields one Block per box; the first carries the text, the
  others an empty text, so joining the blocks' texts never repeats content.
- Text before the first ref, or text with no tags at all, becomes a ``text`` block with no
  box; a ref with neither a usable box nor text (cut off early) yields no block.
- Corners are clamped into 0..coord_scale and reversed corners are swapped; a box without
  exactly four numbers is dropped (its block keeps an empty bbox).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import msgspec

from ocrq.shared.render.markdown import heading_text, page_markdown
from ocrq.shared.render.tables import has_spans, table_from_html, table_markdown
from ocrq.shared.schemas import Block, Page, Table

FALLBACK_LABEL = "text"
MAX_LABEL_CHARS = 48  # labels are single words; anything longer is garbage, not a label
# The models' label words (DeepSeek-OCR's, Unlimited-OCR's, and the PP-DocLayout and
# docling names their training data used) in the block vocabulary.
LABELS: dict[str, str] = {
    **dict.fromkeys(("title", "doc_title"), "title"),
    **dict.fromkeys(
        ("sub_title", "subtitle", "heading", "paragraph_title", "section_header"), "heading"
    ),
    **dict.fromkeys(("image", "figure", "picture", "chart", "seal"), "figure"),
    **dict.fromkeys(
        (
            *("caption", "image_caption", "table_caption", "figure_caption", "figure_title"),
            *("chart_title", "table_title", "table_footnote", "image_footnote"),
        ),
        "caption",
    ),
    **dict.fromkeys(("equation", "formula", "interline_equation", "display_formula"), "formula"),
    **dict.fromkeys(("header", "page_header"), "page_header"),
    **dict.fromkeys(("footer", "page_footer"), "page_footer"),
    **dict.fromkeys(("page_number", "number"), "page_number"),
    **dict.fromkeys(("list", "list_item"), "list_item"),
    "table": "table",
}

REF_OPEN = "<|ref|>"
# A block head after <|ref|>: the label (one line, no tags), an optional <|/ref|>, then an
# optional det whose coordinates run to <|/det|> or, left open, over coordinate characters on
# its line.
_HEAD = re.compile(
    r"(?P<label>[^<\n]*)(?P<ref_close><\|/ref\|>)?\s*"
    r"(?:<\|det\|>(?:(?P<det>[^<]*?)<\|/det\|>|(?P<det_open>[-\[\]\d,. ]*)))?"
)
# Unlimited-OCR's head, the label inside the det: rewritten as DeepSeek's before parsing.
_LABEL_IN_DET = re.compile(r"<\|det\|>[ \t]*([A-Za-z][\w-]{0,47})[ \t]*(?=\[|$)")
# Label and box spans: their content is never document text. An unclosed <|ref|> is taken to
# run to the end of its line (a label cut off, or one missing its close).
_REF_SPAN = re.compile(r"<\|ref\|>[^<\n]*(?:<\|/ref\|>)?")
_DET_SPAN = re.compile(r"<\|det\|>(?:[^<]*?<\|/det\|>|[-\[\]\d,. ]*)")
# Special tokens: ASCII ones (<|grounding|>) and those with full-width bars, U+FF5C (the
# tokenizer's end-of-sentence token, which skip_special_tokens=false lets through), and
# Unlimited-OCR's page marker.
_TOKEN = re.compile(r"<\|[^<>|\n]{0,64}\|>|<\uff5c[^<>\uff5c\n]{0,64}\uff5c>|</?PAGE>")
# A special token cut off at the very end of the text: "<|", "<|/re", ...
_TOKEN_STUB = re.compile(r"<[|\uff5c][^<>\s]{0,64}$")
_BOX = re.compile(r"\[([^\[\]]*)\]")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_BLANK_RUN = re.compile(r"\n{3,}")
_CENTER = re.compile(r"</?center>", re.IGNORECASE)  # DeepSeek-OCR centres captions
_HASH_RUN = re.compile(r"^(#{1,6})[ \t]")
_BULLET_LINE = re.compile(r"^[ \t]*(?:[-*\u2022][ \t]|\d{1,3}[.)][ \t])")
_TABLE_START = re.compile(r"<table\b", re.IGNORECASE)
_TABLE_END = re.compile(r"</table\s*>", re.IGNORECASE)


class ParsedPage(msgspec.Struct, kw_only=True):
    """One model answer as blocks (with boxes) and as tag-free Markdown."""

    blocks: list[Block]
    markdown: str


class _Piece(msgspec.Struct, kw_only=True):
    """One ref of the model text before boxes are scaled: label, raw box text, clean text."""

    label: str
    det: str
    text: str


def strip_tags(text: str) -> str:
    """Remove grounding spans (labels and boxes with their content) and every special token."""
    text = _REF_SPAN.sub("", text)
    text = _DET_SPAN.sub("", text)
    text = _TOKEN.sub("", text)
    return _TOKEN_STUB.sub("", text)


def block_label(raw: str) -> str:
    """The block label for a model's label word (``text`` for one it does not know)."""
    return LABELS.get(raw.strip().lower().replace("-", "_"), FALLBACK_LABEL)


def parse_page(
    text: str,
    *,
    coord_scale: float,
    width: int,
    height: int,
    image_prefix: str = "page-1",
) -> ParsedPage:
    """Parse one model answer into blocks (boxes scaled to 0-1 and to pixels) and Markdown.

    ``image_prefix`` is kept for callers; figures are named by the worker when cropped.
    """
    blocks: list[Block] = []
    for piece in _split_pieces(_LABEL_IN_DET.sub(r"<|ref|>\1<|/ref|><|det|>", text)):
        boxes: list[list[float]] = _boxes(piece.det, coord_scale)
        if not boxes and not piece.text:
            continue  # a ref cut off before its box and text: nothing to report
        label = block_label(piece.label)
        body = "" if label == "figure" else piece.text
        for box in boxes or [[]]:
            blocks += _blocks(label, body, _scaled(box, width, height))
            body = ""  # the text goes with the first box only
        if label == "figure" and piece.text:
            blocks += _blocks(FALLBACK_LABEL, piece.text, NO_BOX)
    blocks = _tables_back_from_captions(blocks)
    page = Page(number=1, width=width, height=height, markdown="", blocks=blocks)
    return ParsedPage(blocks=blocks, markdown=page_markdown(page))


def _split_pieces(text: str) -> list[_Piece]:
    """Cut the text at each <|ref|>: the lead-in (if any) and one piece per ref."""
    lead, *refs = text.split(REF_OPEN)
    pieces: list[_Piece] = []
    lead_text = _clean(lead)
    if lead_text:
        pieces.append(_Piece(label=FALLBACK_LABEL, det="", text=lead_text))
    for chunk in refs:
        head = _HEAD.match(chunk)
        if head is None:  # cannot happen: every part of the pattern is optional
            continue
        det = head.group("det")
        if det is None:
            det = head.group("det_open")
        # A label missing its <|/ref|> still counts when a box follows it; alone it may be cut.
        closed = head.group("ref_close") is not None or det is not None
        label = _label(head.group("label")) if closed else FALLBACK_LABEL
        pieces.append(_Piece(label=label, det=det or "", text=_clean(chunk[head.end() :])))
    return pieces


def _label(raw: str) -> str:
    """The label as written, or the fallback when it is empty or not a short word."""
    label = raw.strip()
    if not label or len(label) > MAX_LABEL_CHARS or any(c.isspace() for c in label):
        return FALLBACK_LABEL
    return label


def _clean(text: str) -> str:
    """A block's text without tags, trimmed, with runs of blank lines collapsed."""
    text = _CENTER.sub("", strip_tags(text))
    return _BLANK_RUN.sub("\n\n", text).strip()


def _boxes(det: str, coord_scale: float) -> list[list[float]]:
    """Each ``[x1, y1, x2, y2]`` in ``det`` as 0-1 fractions; other bracket groups are dropped."""
    scale = float(coord_scale) if coord_scale > 0 else 1000.0
    boxes: list[list[float]] = []
    for group in _BOX.findall(det):
        numbers = [float(n) for n in _NUMBER.findall(group)]
        if len(numbers) != 4:
            continue
        x1, y1, x2, y2 = (min(max(n, 0.0), scale) / scale for n in numbers)
        boxes.append([min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)])
    return boxes


class _Geometry(NamedTuple):
    """A block's box as 0-1 fractions (4 places) and in page pixels; empty for no box."""

    bbox: list[float]
    bbox_px: list[int]


NO_BOX = _Geometry([], [])


def _scaled(box: list[float], width: int, height: int) -> _Geometry:
    """A 0-1 box as the Block's bbox and bbox_px."""
    if not box:
        return NO_BOX
    x1, y1, x2, y2 = box
    return _Geometry(
        [round(v, 4) for v in box],
        [round(x1 * width), round(y1 * height), round(x2 * width), round(y2 * height)],
    )


def _blocks(label: str, text: str, geo: _Geometry) -> list[Block]:
    """The Block (and any text left beside a table) for a mapped label and its text."""
    if label in ("title", "heading"):
        hashes = _HASH_RUN.match(text)
        level = len(hashes.group(1)) if hashes else 0
        if label == "title" and level >= 2:  # the model's own hashes say it is a subsection
            label = "heading"
        level = 1 if label == "title" else min(max(level, 2), 6)
        return [Block(label=label, text=heading_text(text), level=level, **geo._asdict())]
    if label == "table" or _TABLE_START.match(text):  # HTML says what it is, whatever label
        return _table_blocks(text, geo)
    lines = [line for line in text.splitlines() if line.strip()]
    if label == "text" and lines and all(_BULLET_LINE.match(line) for line in lines):
        label = "list_item"  # DeepSeek-OCR labels list items as text
    return [Block(label=label, text=text, **geo._asdict())]


def _table_blocks(text: str, geo: _Geometry) -> list[Block]:
    """A table block: HTML read into cells, its text as Markdown (HTML when cells span).

    Text the model wrote around the table's HTML follows it as a text block (no box).
    """
    start = _TABLE_START.search(text)
    table = None if start is None else _html_table(text[start.start() :])
    if start is None or table is None:
        return [Block(label="table", text=text, **geo._asdict())]
    ends = list(_TABLE_END.finditer(text, start.start()))
    end = ends[-1].end() if ends else len(text)
    shown = table.html if has_spans(table) else table_markdown(table)
    blocks = [Block(label="table", text=shown, table=table, **geo._asdict())]
    rest = (text[: start.start()] + "\n\n" + text[end:]).strip()
    if rest:
        blocks.append(Block(label=FALLBACK_LABEL, text=rest))
    return blocks


def _html_table(html: str) -> Table | None:
    """The table the HTML holds, or None when it has no cells."""
    table = table_from_html(html)
    return table if table.cells else None


def _tables_back_from_captions(blocks: list[Block]) -> list[Block]:
    """Give an empty table block the HTML its following caption carries."""
    out: list[Block] = []
    for block in blocks:
        previous = out[-1] if out else None
        start = _TABLE_START.search(block.text) if block.label == "caption" else None
        if previous and start and previous.label == "table" and not previous.text:
            geo = _Geometry(previous.bbox, previous.bbox_px)
            out[-1:] = _table_blocks(block.text[start.start() :], geo)
            block = msgspec.structs.replace(block, text=block.text[: start.start()].strip())
        out.append(block)
    return out
