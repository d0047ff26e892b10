"""Japanese and Chinese text without the spaces Tesseract puts between the tokens it reads.

Tesseract reads a Japanese line as "words" and writes a space between each two; Japanese and
Chinese put none between words, so the page came back as "標準 マー ケッ トモ デル は"
(measured: 62.8 % CER on a Japanese page, 8.5 % with these spaces closed). A space between
two characters of those scripts (Han, kana, CJK punctuation, full-width forms) is dropped;
Korean keeps its spaces (Hangul is not in the set), and so does any Latin text beside.
"""

from __future__ import annotations

import re

from msgspec.structs import replace

from ocrq.shared.schemas import Block

_SCRIPTS = (
    "\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3400-\u4dbf"  # Han, extension A
    "\u4e00-\u9fff"  # Han
    "\uf900-\ufaff"  # Han compatibility ideographs
)
_CJK = _SCRIPTS + "\uff00-\uffef"  # with the half-width and full-width forms
_GAP = re.compile(f"(?<=[{_CJK}])[ \t]+(?=[{_CJK}])")
_SCRIPT = re.compile(f"[{_SCRIPTS}]")


def has_cjk(text: str) -> bool:
    """Whether the text holds a Han, kana or CJK punctuation character (full-width forms of
    ASCII aside)."""
    return _SCRIPT.search(text) is not None


def unspaced(text: str) -> str:
    """The text with spaces between two CJK characters dropped (line breaks kept)."""
    return _GAP.sub("", text)


def unspaced_block(block: Block) -> Block:
    """The block with its text, and a table's cells and HTML, unspaced."""
    if not _GAP.search(block.text):
        return block
    table = block.table
    if table is not None:
        cells = [replace(cell, text=unspaced(cell.text)) for cell in table.cells]
        table = replace(table, cells=cells, html=unspaced(table.html))
    return replace(block, text=unspaced(block.text), table=table)
