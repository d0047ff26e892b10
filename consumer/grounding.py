"""Read DeepSeek-OCR-style grounded output into blocks and clean Markdown.

The model writes, for each block of the page::

    <|ref|>LABEL<|/ref|><|det|>[[x1, y1, x2, y2]], [[...]]<|/det|>
    the block's text, up to the next <|ref|> or the end

with box corners as integers in 0..coord_scale of the page. Model text can be cut off at
max_tokens anywhere (mid-label, mid-box) or be garbled; the parser never raises and never lets a
tag, a label word or a coordinate reach the Markdown.

Decisions:
- A ref with several boxes yields one Block per box. The first carries the text, the others carry
  an empty text, so joining the blocks' texts never repeats content (the same rule as "never copy
  a multi-page text onto every page"). Image blocks are the exception: each box is its own image
  and gets its own reference.
- ``image``/``figure`` blocks become Markdown image references ``![image](PREFIX-image-K)``,
  numbered from 1 in reading order; any text the model wrote after the box follows them.
- Text before the first ref, or text with no tags at all, becomes a ``text`` block with no box;
  a ref with neither a usable box nor text (cut off early) yields no block.
- Corners are clamped into 0..coord_scale and reversed corners are swapped; a box without exactly
  four numbers is dropped (its block keeps an empty bbox).
"""

from __future__ import annotations

import re

import msgspec

from ocrq.shared.schemas import Block

IMAGE_LABELS = frozenset({"image", "figure"})
FALLBACK_LABEL = "text"
MAX_LABEL_CHARS = 48  # labels are single words; anything longer is garbage, not a label

REF_OPEN = "<|ref|>"
# A block head after <|ref|>: the label (one line, no tags), an optional <|/ref|>, then an
# optional det whose coordinates run to <|/det|> or, left open, over coordinate characters on
# its line.
_HEAD = re.compile(
    r"(?P<label>[^<\n]*)(?P<ref_close><\|/ref\|>)?\s*"
    r"(?:<\|det\|>(?:(?P<det>[^<]*?)<\|/det\|>|(?P<det_open>[-\[\]\d,. ]*)))?"
)
# Label and box spans: their content is never document text. An unclosed <|ref|> is taken to
# run to the end of its line (a label cut off, or one missing its close).
_REF_SPAN = re.compile(r"<\|ref\|>[^<\n]*(?:<\|/ref\|>)?")
_DET_SPAN = re.compile(r"<\|det\|>(?:[^<]*?<\|/det\|>|[-\[\]\d,. ]*)")
# Special tokens: ASCII ones (<|grounding|>) and those with full-width bars, U+FF5C (the
# tokenizer's end-of-sentence token, which skip_special_tokens=false lets through).
_TOKEN = re.compile(r"<\|[^<>|\n]{0,64}\|>|<\uff5c[^<>\uff5c\n]{0,64}\uff5c>")
# A special token cut off at the very end of the text: "<|", "<|/re", ...
_TOKEN_STUB = re.compile(r"<[|\uff5c][^<>\s]{0,64}$")
_BOX = re.compile(r"\[([^\[\]]*)\]")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_BLANK_RUN = re.compile(r"\n{3,}")


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


def parse_page(
    text: str,
    *,
    coord_scale: float,
    width: int,
    height: int,
    image_prefix: str = "page-1",
) -> ParsedPage:
    """Parse one model answer into blocks (boxes scaled to 0-1 and to pixels) and Markdown."""
    blocks: list[Block] = []
    images = 0
    for piece in _split_pieces(text):
        boxes: list[list[float]] = _boxes(piece.det, coord_scale)
        if not boxes and not piece.text and piece.label.lower() not in IMAGE_LABELS:
            continue  # a ref cut off before its box and text: nothing to report
        body = piece.text
        for box in boxes or [[]]:
            if piece.label.lower() in IMAGE_LABELS:
                images += 1
                ref = f"![image]({image_prefix}-image-{images})"
                blocks.append(_block(piece.label, f"{ref}\n\n{body}".strip(), box, width, height))
            else:
                blocks.append(_block(piece.label, body, box, width, height))
            body = ""  # the text goes with the first box only
    markdown = "\n\n".join(block.text for block in blocks if block.text)
    return ParsedPage(blocks=blocks, markdown=markdown)


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
    """The block label as written, or the fallback when it is empty or not a short word."""
    label = raw.strip()
    if not label or len(label) > MAX_LABEL_CHARS or any(c.isspace() for c in label):
        return FALLBACK_LABEL
    return label


def _clean(text: str) -> str:
    """A block's text without tags, trimmed, with runs of blank lines collapsed."""
    return _BLANK_RUN.sub("\n\n", strip_tags(text)).strip()


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


def _block(label: str, text: str, box: list[float], width: int, height: int) -> Block:
    """A Block with its box rounded to 4 places and converted to page pixels."""
    if not box:
        return Block(label=label, text=text)
    x1, y1, x2, y2 = box
    return Block(
        label=label,
        text=text,
        bbox=[round(v, 4) for v in box],
        bbox_px=[round(x1 * width), round(y1 * height), round(x2 * width), round(y2 * height)],
    )
