// The result viewer: the page with every block drawn over it in its label's colour, the
// blocks beside it (tables as grids, figures as thumbnails), each linked to the other on
// hover and on selection; page navigation, copy and the downloads menu.

import { baseName, DownloadMenu, Images } from "./downloads.js";
import { blockName, canonical, labelCounts, labelName, paint } from "./labels.js";
import { fieldBoxes, fieldItems, redactionBoxes } from "./fields.js";
import { drawPage } from "./pages.js";
import { blockItem, hasBox, tableNumbers } from "./panels.js";

// Scroll the text pane (only it: the page must not move under the mouse) to show `item`.
function reveal(item, pane) {
  const outer = pane.getBoundingClientRect();
  const inner = item.getBoundingClientRect();
  if (inner.top < outer.top) pane.scrollTop -= outer.top - inner.top;
  else if (inner.bottom > outer.bottom) pane.scrollTop += inner.bottom - outer.bottom;
}

export class Viewer {
  constructor(notify) {
    this.notify = notify;
    this.el = Object.fromEntries(["viewer", "doc-name", "prev", "next", "page-label", "copy-md",
      "legend", "selection", "page", "page-canvas", "boxes", "page-note", "warnings",
      "text", "markdown", "fields", "tab-blocks", "tab-markdown", "tab-fields",
    ].map((id) => [id, document.getElementById(id)]));
    this.index = 0;
    this.renders = 0;
    this.selected = null;
    this.images = new Images();
    this.downloads = new DownloadMenu(notify);
    this.el.prev.addEventListener("click", () => this.go(this.index - 1));
    this.el.next.addEventListener("click", () => this.go(this.index + 1));
    this.el["copy-md"].addEventListener("click", () => this.copy());
    this.el["tab-blocks"].addEventListener("click", () => this.tab("blocks"));
    this.el["tab-markdown"].addEventListener("click", () => this.tab("markdown"));
    this.el["tab-fields"].addEventListener("click", () => this.tab("fields"));
    this.el.fields.addEventListener("pointerover", (event) => this.pointField(event.target.closest(".field")));
    this.el.fields.addEventListener("pointerleave", () => this.pointField(null));
    this.el.fields.addEventListener("click", (event) => this.openField(event.target.closest(".field")));
    this.link(this.el.boxes, ".box", this.el.text, ".block");
    this.link(this.el.text, ".block", this.el.boxes, ".box");
    document.addEventListener("keydown", (event) => {
      if (this.el.viewer.hidden || event.target.closest("input")) return;
      if (event.key === "ArrowLeft") this.go(this.index - 1);
      if (event.key === "ArrowRight") this.go(this.index + 1);
      if (event.key === "Escape") this.select(null);
    });
  }

  // Hovering an item of `from` highlights it and its partner in `to` (same data-i); a click
  // selects the pair until another click (or Escape) changes it.
  link(from, selector, to, partnerSelector) {
    from.addEventListener("pointerover", (event) => {
      const item = event.target.closest(selector);
      this.highlight(item ? item.dataset.i : null);
      const partner = item && to.querySelector(`${partnerSelector}[data-i="${item.dataset.i}"]`);
      if (partner && partner.classList.contains("block")) reveal(partner, to);
    });
    from.addEventListener("pointerleave", () => this.highlight(null));
    from.addEventListener("click", (event) => {
      if (event.target.closest("a")) return; // a download link: not a selection
      const item = event.target.closest(selector);
      if (item) this.select(item.dataset.i === this.selected ? null : item.dataset.i);
    });
  }

  highlight(i) {
    this.mark("hl", i);
  }

  // The selected block: marked on the page and beside it, named (label, level) in the bar.
  select(i) {
    this.selected = i;
    this.mark("selected", i);
    const page = this.result && this.result.pages[this.index];
    const block = i === null || !page ? null : page.blocks[Number(i)];
    this.el.selection.textContent = block
      ? `Selected: ${blockName(block)} (block ${Number(i) + 1} of page ${page.number})` : "";
    const item = i === null ? null : this.el.text.querySelector(`.block[data-i="${i}"]`);
    if (item) reveal(item, this.el.text);
  }

  mark(name, i) {
    for (const el of document.querySelectorAll(`#boxes .${name}, #text .${name}`)) {
      el.classList.remove(name);
    }
    if (i === null) return;
    for (const el of document.querySelectorAll(`#boxes [data-i="${i}"], #text [data-i="${i}"]`)) {
      el.classList.add(name);
    }
  }

  // Show `entry`'s result (its JSON text); `source` draws its pages, or null (blank pages).
  async show(entry, raw, source) {
    this.entry = entry;
    this.raw = raw;
    this.result = JSON.parse(raw);
    this.source = source;
    this.images.forJob(entry.id);
    this.job = {
      id: entry.id, base: baseName(entry.name), images: this.images,
      tableNumbers: tableNumbers(this.result), notify: this.notify,
    };
    this.downloads.show(entry, this.result);
    this.fieldsShown();
    this.el.viewer.hidden = false;
    this.el["doc-name"].textContent = entry.name || entry.id;
    this.el["doc-name"].title = entry.id;
    this.legend();
    await this.go(0);
  }

  // One entry per label the result holds, with its count, in the vocabulary's order.
  legend() {
    const blocks = this.result.pages.flatMap((page) => page.blocks);
    this.el.legend.replaceChildren(...labelCounts(blocks).map(([label, count]) => {
      const item = document.createElement("li");
      item.dataset.label = label;
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      paint(swatch, label);
      item.append(swatch, `${labelName(label)} (${count})`);
      return item;
    }));
  }

  async go(index) {
    const pages = this.result.pages;
    this.select(null);
    if (!pages.length) {
      this.el["page-label"].textContent = "no pages";
      this.el.text.replaceChildren();
      return;
    }
    this.index = Math.max(0, Math.min(index, pages.length - 1));
    const page = pages[this.index];
    this.el["page-label"].textContent = `Page ${page.number} of ${this.result.page_count}`;
    this.el.prev.disabled = this.index === 0;
    this.el.next.disabled = this.index === pages.length - 1;
    this.texts(page);
    await this.drawn(page);
  }

  // The page image (or a blank page of the same proportions), then its boxes over it.
  async drawn(page) {
    const render = ++this.renders;
    const frame = this.el.page;
    delete frame.dataset.rendered;
    frame.style.aspectRatio = `${page.width} / ${page.height}`;
    // A tall page fits the window's height rather than the pane's width.
    frame.style.maxWidth = `calc(85vh * ${page.width / page.height})`;
    this.boxes(page);
    let drawn = false;
    try {
      drawn = await drawPage(this.source, page, this.el["page-canvas"]);
    } catch (error) {
      console.warn("ocrq: page not drawn", error);
    }
    if (render !== this.renders) return; // the user moved on meanwhile
    frame.classList.toggle("blank", !drawn);
    this.el["page-note"].textContent = drawn ? "" : (this.source
      ? "This page could not be drawn from your file: the boxes are shown on a blank page."
      : "The file is not in this browser tab: the boxes are shown on a blank page of its size.");
    frame.dataset.page = String(page.number);
    frame.dataset.rendered = drawn ? "image" : "blank";
  }

  // Boxes as percentages of the page: they stay on their text at any displayed size.
  // data-label is the block's label as the result has it; data-name what the box shows.
  boxes(page) {
    this.el.boxes.replaceChildren(...page.blocks.flatMap((block, i) => {
      if (!hasBox(block)) return [];
      const [x1, y1, x2, y2] = block.bbox;
      const box = document.createElement("div");
      box.className = "box";
      box.dataset.i = String(i);
      box.dataset.label = block.label;
      box.dataset.kind = canonical(block.label);
      box.dataset.name = blockName(block);
      box.title = blockName(block);
      paint(box, block.label);
      Object.assign(box.style, {
        left: `${x1 * 100}%`, top: `${y1 * 100}%`,
        width: `${(x2 - x1) * 100}%`, height: `${(y2 - y1) * 100}%`,
      });
      return [box];
    }), ...redactionBoxes(page));
  }

  texts(page) {
    this.el.warnings.textContent = (page.warnings || []).join(" ");
    this.el.text.replaceChildren(...page.blocks.map((block, i) => blockItem(block, i, this.job)));
    this.el.markdown.textContent = page.markdown ?? this.segmentOf(page) ?? "";
    if (!page.blocks.length && this.el.fields.hidden) this.tab("markdown");
  }

  // The Fields tab, offered only for a job submitted with an extract schema.
  fieldsShown() {
    const fields = this.result.fields;
    this.el["tab-fields"].hidden = !fields;
    this.el.fields.replaceChildren(...(fields ? fieldItems(fields) : []));
    if (!fields && !this.el.fields.hidden) this.tab("blocks");
  }

  // Draw the boxes of the field under the pointer, when it was read on the page shown.
  pointField(item) {
    for (const el of this.el.boxes.querySelectorAll(".field-box")) el.remove();
    for (const el of this.el.fields.querySelectorAll(".field.hl")) el.classList.remove("hl");
    const source = item && this.result.fields.sources[Number(item.dataset.f)];
    if (!source || !source.grounded) return;
    item.classList.add("hl");
    const page = this.result.pages[this.index];
    if (page && page.number === source.page) this.el.boxes.append(...fieldBoxes(source));
  }

  // A click on a field read on another page turns to that page and draws it there.
  async openField(item) {
    const source = item && this.result.fields.sources[Number(item.dataset.f)];
    if (!source || !source.grounded) return;
    const index = this.result.pages.findIndex((p) => p.number === source.page);
    if (index >= 0 && index !== this.index) await this.go(index);
    this.pointField(this.el.fields.querySelector(`.field[data-f="${item.dataset.f}"]`));
  }

  // Pages read together (batch_size > 1) share one text: the segment spanning them.
  segmentOf(page) {
    const segment = (this.result.segments || []).find(
      (s) => s.first_page <= page.number && page.number <= s.last_page);
    return segment ? `(pages ${segment.first_page}–${segment.last_page})\n\n${segment.markdown}` : null;
  }

  // Show one of the text side's panes: "blocks", "markdown" or "fields".
  tab(name) {
    const panes = { blocks: "text", markdown: "markdown", fields: "fields" };
    for (const [tab, pane] of Object.entries(panes)) {
      this.el[pane].hidden = tab !== name;
      this.el[`tab-${tab}`].setAttribute("aria-selected", String(tab === name));
    }
  }

  async copy() {
    try {
      await navigator.clipboard.writeText(this.result.markdown);
      this.notify("Markdown copied.");
    } catch {
      this.notify("The browser refused the clipboard: use Download, Markdown instead.", true);
    }
  }
}
