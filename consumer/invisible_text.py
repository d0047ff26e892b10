"""An invisible text layer: each run of text stretched over its box, in glyphless fonts.

The fonts are Type 3 fonts written here with one empty glyph and a ToUnicode map that gives
the text: they cover every script at about 2 KB a document. The built-in fonts were measured
first: Helvetica lacks CJK, Droid Sans Fallback adds 1.7 MB to each output unless subset,
and MuPDF's subsetter rewrites every font on the pages it is given, a document's own
included; neither covers Arabic, Hebrew or Indic scripts.
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import unicodedata

import pymupdf

Box = tuple[float, float, float, float]
Run = tuple[str, Box]  # a text run and its box, in the pixels the transform starts from

# Glyph geometry of the invisible fonts, in text space (1 em = the box height): every glyph
# is half an em wide (runs are stretched to their box), the em spans 0.8 above the
# baseline and 0.2 below, which is the box MuPDF reports for the run.
_ADVANCE = 0.5
_DESCENT = 0.2
_CODES_PER_FONT = 256
_INSET = 0.005  # runs sit this share inside their box, so rounding never pokes out
_RTL = frozenset({"R", "AL"})


class InvisibleFonts:
    """Glyphless Type 3 fonts of one document: each character gets a code as it first comes."""

    def __init__(self, doc: pymupdf.Document) -> None:
        self._doc = doc
        self._codes: dict[str, tuple[int, int]] = {}  # character → (font, code)
        self._fonts: list[list[str]] = []  # per font, its characters by code
        self._xrefs: list[int] = []

    def name(self, font: int) -> str:
        """The resource name of font ``font``."""
        return f"OcrqInvisible{font}"

    def encode(self, text: str) -> list[tuple[int, bytes]]:
        """``text`` as (font, codes) pieces: one piece unless it spans fonts."""
        pieces: list[tuple[int, bytearray]] = []
        for char in text:
            font, code = self._code(char)
            if not pieces or pieces[-1][0] != font:
                pieces.append((font, bytearray()))
            pieces[-1][1].append(code)
        return [(font, bytes(codes)) for font, codes in pieces]

    def xref(self, font: int) -> int:
        """The font's object number (its dictionary is written by ``finish``)."""
        return self._xrefs[font]

    def _code(self, char: str) -> tuple[int, int]:
        if char not in self._codes:
            if not self._fonts or len(self._fonts[-1]) == _CODES_PER_FONT:
                self._fonts.append([])
                self._xrefs.append(self._doc.get_new_xref())
            self._codes[char] = (len(self._fonts) - 1, len(self._fonts[-1]))
            self._fonts[-1].append(char)
        return self._codes[char]

    def finish(self) -> None:
        """Write every font's dictionary, its one empty glyph and its ToUnicode map."""
        if not self._fonts:
            return
        glyph = self._new_stream(b"0 0 0 0 0 0 d1")
        width = round(_ADVANCE * 1000)
        box = f"0 {-round(_DESCENT * 1000)} {width} {round((1 - _DESCENT) * 1000)}"
        for chars, xref in zip(self._fonts, self._xrefs, strict=True):
            to_unicode = self._new_stream(_to_unicode_cmap(chars))
            names = "/g" * len(chars)  # every code draws the one empty glyph
            widths = " ".join([str(width)] * len(chars))
            self._doc.update_object(
                xref,
                "<</Type/Font/Subtype/Type3/FontMatrix[0.001 0 0 0.001 0 0]"
                f"/FontBBox[{box}]/CharProcs<</g {glyph} 0 R>>"
                f"/Encoding<</Type/Encoding/Differences[0{names}]>>"
                f"/FirstChar 0/LastChar {len(chars) - 1}/Widths[{widths}]"
                f"/ToUnicode {to_unicode} 0 R/Resources<<>>>>",
            )

    def _new_stream(self, data: bytes) -> int:
        xref = self._doc.get_new_xref()
        self._doc.update_object(xref, "<<>>")
        self._doc.update_stream(xref, data, compress=True)
        return int(xref)


def _to_unicode_cmap(chars: list[str]) -> bytes:
    entries = [f"<{code:02x}><{char.encode('utf-16-be').hex()}>" for code, char in enumerate(chars)]
    blocks = [  # the CMap format allows at most 100 entries a block
        f"{len(part)} beginbfchar\n" + "\n".join(part) + "\nendbfchar"
        for part in (entries[i : i + 100] for i in range(0, len(entries), 100))
    ]
    return (
        "/CIDInit/ProcSet findresource begin 12 dict begin begincmap\n"
        "/CIDSystemInfo<</Registry(Adobe)/Ordering(UCS)/Supplement 0>>def\n"
        "/CMapName/Adobe-Identity-UCS def/CMapType 2 def\n"
        "1 begincodespacerange <00><ff> endcodespacerange\n"
        + "\n".join(blocks)
        + "\nendcmap CMapName currentdict/CMap defineresource pop end end"
    ).encode()


# --- writing the text layer ------------------------------------------------------------


def add_text_layer(
    target: pymupdf.Page, runs: list[Run], to_user: pymupdf.Matrix, fonts: InvisibleFonts
) -> None:
    """Put each run on ``target`` as invisible text over its box (``to_user``: to PDF space)."""
    if not runs:
        return
    operators = ["q BT 3 Tr"]
    used: set[int] = set()
    for text, box in runs:
        operators.append(_run_operators(text, box, to_user, fonts, used))
    operators.append("ET Q")
    target.wrap_contents()  # the page's own graphics state must not leak into the layer
    xref = pymupdf.TOOLS._insert_contents(target, b" ", True)
    target.parent.update_stream(xref, "\n".join(operators).encode(), compress=True)
    _add_fonts(target, {fonts.name(font): fonts.xref(font) for font in used})


def _run_operators(
    text: str, box: Box, to_user: pymupdf.Matrix, fonts: InvisibleFonts, used: set[int]
) -> str:
    """The operators drawing one run: text space scaled so the run fills its box."""
    x0, y0, x1, y1 = box
    inset_x, inset_y = (x1 - x0) * _INSET, (y1 - y0) * _INSET
    x0, y0, x1, y1 = x0 + inset_x, y0 + inset_y, x1 - inset_x, y1 - inset_y
    if _right_to_left(text):
        text = text[::-1]  # glyphs go left to right; readers restore right-to-left order
    em = y1 - y0
    stretch = (x1 - x0) / (len(text) * _ADVANCE * em)
    # Text space (y up, 1 em) to pixels (y down), then on to user space: the product
    # [width 0 0 -em x y] x to_user, written out (pymupdf.Matrix costs 0.1 ms a run).
    a, b, c, d = float(to_user.a), float(to_user.b), float(to_user.c), float(to_user.d)
    e, f = float(to_user.e), float(to_user.f)
    width, x, y = em * stretch, x0, y1 - _DESCENT * em
    parts = [f"{width * a:.5f} {width * b:.5f} {-em * c:.5f} {-em * d:.5f} "]
    parts.append(f"{x * a + y * c + e:.4f} {x * b + y * d + f:.4f} Tm")
    # A trailing space keeps neighbouring runs apart when readers join them (CJK ones too).
    for font, codes in fonts.encode(text + " "):
        used.add(font)
        parts.append(f" /{fonts.name(font)} 1 Tf <{codes.hex()}> Tj")
    return "".join(parts)


def _right_to_left(text: str) -> bool:
    """True when every strongly directed character of ``text`` is right-to-left."""
    strong = [unicodedata.bidirectional(char) for char in text]
    strong = [kind for kind in strong if kind in _RTL or kind == "L"]
    return bool(strong) and all(kind in _RTL for kind in strong)


def _add_fonts(target: pymupdf.Page, named: dict[str, int]) -> None:
    """Name the fonts in the page's own copy of its resources (inherited ones stay as they are)."""
    mupdf = pymupdf.mupdf
    pdf = mupdf.pdf_document_from_fz_document(target.parent)
    page_obj = mupdf.pdf_lookup_page_obj(pdf, target.number)
    inherited = mupdf.pdf_dict_get_inheritable(page_obj, mupdf.PDF_ENUM_NAME_Resources)
    resources = (
        mupdf.pdf_copy_dict(inherited) if inherited.pdf_is_dict() else mupdf.pdf_new_dict(pdf, 2)
    )
    listed = mupdf.pdf_dict_get(resources, mupdf.PDF_ENUM_NAME_Font)
    page_fonts = mupdf.pdf_copy_dict(listed) if listed.pdf_is_dict() else mupdf.pdf_new_dict(pdf, 2)
    for name, xref in named.items():
        mupdf.pdf_dict_puts(page_fonts, name, mupdf.pdf_new_indirect(pdf, xref, 0))
    mupdf.pdf_dict_put(resources, mupdf.PDF_ENUM_NAME_Font, page_fonts)
    mupdf.pdf_dict_put(page_obj, mupdf.PDF_ENUM_NAME_Resources, resources)
