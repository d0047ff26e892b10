"""Semantic HTML5: a section per page, each element with its page and box.

Every element made from a block carries ``data-page`` (1-based) and ``data-bbox`` (the
block's 0..1 box, ``x1 y1 x2 y2`` to 4 places; absent when the block has none). All text
is escaped: engine output never reaches the page as markup.
"""

from __future__ import annotations

from html import escape

from ocrq.shared.render.markdown import (
    IMAGES_PATH,
    heading_level,
    heading_text,
    is_body,
    list_items,
)
from ocrq.shared.render.tables import table_html
from ocrq.shared.render.text import block_text
from ocrq.shared.schemas import Block, Page, Result, Segment

_FURNITURE_TAGS = {"page_header": "header", "page_footer": "footer", "page_number": "footer"}
_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;"
    "line-height:1.5}section{border-bottom:1px solid #ddd;padding-bottom:1rem}"
    "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2rem .5rem}"
    "aside.ocrq-warning{background:#fff4ce;padding:.5rem}img{max-width:100%}"
)


def document_html(result: Result, *, keep_furniture: bool = False) -> str:
    """The whole result as one HTML5 document."""
    by_first = {s.first_page: s for s in result.segments}
    sections = [
        _page_section(page, by_first.get(page.number), keep_furniture)
        for page in sorted(result.pages, key=lambda p: p.number)
    ]
    title = next(
        (heading_text(b.text) for p in result.pages for b in p.blocks if b.label == "title"), ""
    )
    return (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title or result.id)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f'<body data-job="{escape(result.id)}">\n' + "".join(sections) + "</body>\n</html>\n"
    )


def bbox_attribute(bbox: list[float]) -> str:
    """A box as the data-bbox value: four numbers to 4 places, space-separated."""
    return " ".join(f"{v:.4f}" for v in bbox)


def _page_section(page: Page, segment: Segment | None, keep_furniture: bool) -> str:
    lines = [f'<section data-page="{page.number}">']
    lines += [
        f'<aside class="ocrq-warning" data-page="{page.number}">ocrq warning: {escape(w)}</aside>'
        for w in page.warnings
    ]
    if page.markdown is None:
        if segment is not None:  # text read over several pages: given at its first page
            lines += _paragraphs(segment.markdown, f"{segment.first_page}-{segment.last_page}")
    elif page.blocks:
        lines += _blocks_html(page, keep_furniture)
    else:
        lines += _paragraphs(page.markdown, str(page.number))
    lines.append("</section>\n")
    return "\n".join(lines)


def _paragraphs(markdown: str, pages: str) -> list[str]:
    """An engine's Markdown without blocks: escaped paragraphs, no box."""
    paragraphs = [p.strip() for p in markdown.split("\n\n") if p.strip()]
    return [f'<p data-page="{pages}">{escape(p)}</p>' for p in paragraphs]


def _blocks_html(page: Page, keep_furniture: bool) -> list[str]:
    blocks = [b for b in page.blocks if is_body(b, keep_furniture)]
    out: list[str] = []
    figures = 0
    i = 0
    while i < len(blocks):
        block = blocks[i]
        if block.label == "list_item":
            run = [block]
            while i + 1 < len(blocks) and blocks[i + 1].label == "list_item":
                i += 1
                run.append(blocks[i])
            element = _list_html(run, page.number)
            if element:
                out.append(element)
        elif block.label == "figure":
            figures += 1
            words, caption = _figure_companions(blocks, i)
            i += (words is not None) + (caption is not None)
            out.append(_figure_html(block, words, caption, page.number, figures))
        else:
            element = _block_html(block, page.number)
            if element:
                out.append(element)
        i += 1
    return out


def _attrs(block: Block, page: int) -> str:
    """The data-page and data-bbox attributes of a block's element."""
    attrs = f' data-page="{page}"'
    if len(block.bbox) == 4:
        attrs += f' data-bbox="{bbox_attribute(block.bbox)}"'
    return attrs


def _block_html(block: Block, page: int) -> str:
    """One block (not a list item or figure) as an element; empty when it has no text."""
    attrs = _attrs(block, page)
    if block.label == "table" and block.table is not None and block.table.cells:
        attributes = {"data-page": str(page)}
        if len(block.bbox) == 4:
            attributes["data-bbox"] = bbox_attribute(block.bbox)
        return table_html(block.table, attributes=attributes)
    text = escape(block_text(block))
    if not text:
        return ""
    if block.label in ("title", "heading"):
        level = heading_level(block)
        return f"<h{level}{attrs}>{text}</h{level}>"
    tag = _FURNITURE_TAGS.get(block.label)
    if tag is not None:
        return f'<{tag} class="{block.label.replace("_", "-")}"{attrs}>{text}</{tag}>'
    if block.label == "table":  # no cells: the engine's text, kept as it came
        return f'<pre class="table"{attrs}>{text}</pre>'
    if block.label in ("caption", "formula"):
        return f'<p class="{block.label}"{attrs}>{text}</p>'
    return f"<p{attrs}>{text}</p>"


def _list_html(run: list[Block], page: int) -> str:
    """Consecutive list items as one <ul>; an item's own number stays in its text."""
    items = [
        f"<li{_attrs(block, page)}>{escape(item.removeprefix('- '))}</li>"
        for block in run
        for item in list_items(block.text)
    ]
    return "<ul>\n" + "\n".join(items) + "\n</ul>" if items else ""


def _figure_companions(blocks: list[Block], i: int) -> tuple[Block | None, Block | None]:
    """What follows the figure at ``i`` inside its element: the words read inside it (a text
    block whose centre lies in the figure's box), then its caption; None where absent."""
    figure, rest = blocks[i], blocks[i + 1 : i + 3]
    words = rest[0] if rest and rest[0].label == "text" and _lies_in(rest[0], figure) else None
    rest = rest[1:] if words is not None else rest
    caption = rest[0] if rest and rest[0].label == "caption" else None
    return words, caption


def _lies_in(block: Block, figure: Block) -> bool:
    """Whether a block's centre lies in the figure's box: the words read inside it."""
    if len(block.bbox) != 4 or len(figure.bbox) != 4:
        return False
    x, y = (block.bbox[0] + block.bbox[2]) / 2, (block.bbox[1] + block.bbox[3]) / 2
    return figure.bbox[0] <= x <= figure.bbox[2] and figure.bbox[1] <= y <= figure.bbox[3]


def _figure_html(
    block: Block, words: Block | None, caption: Block | None, page: int, number: int
) -> str:
    """A figure with its image (when cropped), the words read inside it (a diagram's
    labels) and the caption that follows them."""
    inner = []
    if block.image:
        src = escape(IMAGES_PATH + block.image)
        inner.append(f'<img src="{src}" alt="figure {number}">')
    elif block_text(block):
        inner.append(f"<p>{escape(block_text(block))}</p>")
    if words is not None and block_text(words):
        inner.append(f"<p{_attrs(words, page)}>{escape(block_text(words))}</p>")
    if caption is not None and caption.text.strip():
        inner.append(
            f"<figcaption{_attrs(caption, page)}>{escape(caption.text.strip())}</figcaption>"
        )
    return f"<figure{_attrs(block, page)}>" + "".join(inner) + "</figure>"
