// The result viewer: the page with every grounding block drawn over it, the blocks' text
// beside it, each linked to the other on hover; page navigation, copy and downloads.

import { drawPage } from "./pages.js";

const COLOURS = {
  title: "#d62728", sub_title: "#ff7f0e", text: "#1f77b4", table: "#2ca02c",
  image: "#9467bd", figure: "#9467bd", equation: "#e377c2", list: "#17becf",
  caption: "#bcbd22", header: "#8c564b", footer: "#8c564b",
};
const OTHER = "#7f7f7f";

export function colourOf(label) {
  return COLOURS[(label || "").toLowerCase()] || OTHER;
}

// Colour custom properties on an element: the outline, a light fill, a stronger highlight.
function paint(element, label) {
  const colour = colourOf(label);
  element.style.setProperty("--c", colour);
  element.style.setProperty("--fill", `${colour}1a`);
  element.style.setProperty("--strong", `${colour}55`);
}

function hasBox(block) {
  return Array.isArray(block.bbox) && block.bbox.length === 4;
}

function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// Scroll the text pane (only it: the page must not move under the mouse) to show `item`.
function reveal(item, pane) {
  const outer = pane.getBoundingClientRect();
  const inner = item.getBoundingClientRect();
  if (inner.top < outer.top) pane.scrollTop -= outer.top - inner.top;
  else if (inner.bottom > outer.bottom) pane.scrollTop += inner.bottom - outer.bottom;
}

function baseName(name) {
  return (name || "result").replace(/\.[^./]+$/, "") || "result";
}

export class Viewer {
  constructor(notify) {
    this.notify = notify;
    this.el = Object.fromEntries(["viewer", "doc-name", "prev", "next", "page-label", "copy-md",
      "dl-md", "dl-json", "legend", "page", "page-canvas", "boxes", "page-note", "warnings",
      "text", "markdown", "tab-blocks", "tab-markdown"].map((id) => [id, document.getElementById(id)]));
    this.index = 0;
    this.renders = 0;
    this.el.prev.addEventListener("click", () => this.go(this.index - 1));
    this.el.next.addEventListener("click", () => this.go(this.index + 1));
    this.el["copy-md"].addEventListener("click", () => this.copy());
    this.el["dl-md"].addEventListener("click", () =>
      download(`${baseName(this.entry.name)}.md`, "text/markdown", this.result.markdown));
    this.el["dl-json"].addEventListener("click", () =>
      download(`${baseName(this.entry.name)}.json`, "application/json", this.raw));
    this.el["tab-blocks"].addEventListener("click", () => this.tab(false));
    this.el["tab-markdown"].addEventListener("click", () => this.tab(true));
    this.link(this.el.boxes, ".box", this.el.text, ".block");
    this.link(this.el.text, ".block", this.el.boxes, ".box");
    document.addEventListener("keydown", (event) => {
      if (this.el.viewer.hidden || event.target.closest("input")) return;
      if (event.key === "ArrowLeft") this.go(this.index - 1);
      if (event.key === "ArrowRight") this.go(this.index + 1);
    });
  }

  // Hovering an item of `from` highlights it and its partner in `to` (same data-i).
  link(from, selector, to, partnerSelector) {
    from.addEventListener("pointerover", (event) => {
      const item = event.target.closest(selector);
      this.highlight(item ? item.dataset.i : null);
      const partner = item && to.querySelector(`${partnerSelector}[data-i="${item.dataset.i}"]`);
      if (partner && partner.classList.contains("block")) reveal(partner, to);
    });
    from.addEventListener("pointerleave", () => this.highlight(null));
  }

  highlight(i) {
    for (const el of document.querySelectorAll("#boxes .hl, #text .hl")) el.classList.remove("hl");
    if (i === null) return;
    for (const el of document.querySelectorAll(`#boxes [data-i="${i}"], #text [data-i="${i}"]`)) {
      el.classList.add("hl");
    }
  }

  // Show `entry`'s result (its JSON text); `source` draws its pages, or null (blank pages).
  async show(entry, raw, source) {
    this.entry = entry;
    this.raw = raw;
    this.result = JSON.parse(raw);
    this.source = source;
    this.el.viewer.hidden = false;
    this.el["doc-name"].textContent = entry.name || entry.id;
    this.el["doc-name"].title = entry.id;
    this.legend();
    await this.go(0);
  }

  legend() {
    const counts = new Map();
    for (const page of this.result.pages) {
      for (const block of page.blocks) counts.set(block.label, (counts.get(block.label) || 0) + 1);
    }
    this.el.legend.replaceChildren(...[...counts].map(([label, count]) => {
      const item = document.createElement("li");
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      paint(swatch, label);
      item.append(swatch, `${label} (${count})`);
      return item;
    }));
  }

  async go(index) {
    const pages = this.result.pages;
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
  boxes(page) {
    this.el.boxes.replaceChildren(...page.blocks.flatMap((block, i) => {
      if (!hasBox(block)) return [];
      const [x1, y1, x2, y2] = block.bbox;
      const box = document.createElement("div");
      box.className = "box";
      box.dataset.i = String(i);
      box.dataset.label = block.label;
      box.title = block.label;
      paint(box, block.label);
      Object.assign(box.style, {
        left: `${x1 * 100}%`, top: `${y1 * 100}%`,
        width: `${(x2 - x1) * 100}%`, height: `${(y2 - y1) * 100}%`,
      });
      return [box];
    }));
  }

  texts(page) {
    this.el.warnings.textContent = (page.warnings || []).join(" ");
    this.el.text.replaceChildren(...page.blocks.map((block, i) => {
      const item = document.createElement("div");
      item.className = hasBox(block) ? "block" : "block nobox";
      item.dataset.i = String(i);
      paint(item, block.label);
      const tag = document.createElement("span");
      tag.className = "tag";
      tag.textContent = block.label;
      const text = document.createElement("p");
      text.textContent = block.text;
      item.append(tag, text);
      return item;
    }));
    this.el.markdown.textContent = page.markdown ?? this.segmentOf(page) ?? "";
    if (!page.blocks.length) this.tab(true);
  }

  // Pages read together (batch_size > 1) share one text: the segment spanning them.
  segmentOf(page) {
    const segment = (this.result.segments || []).find(
      (s) => s.first_page <= page.number && page.number <= s.last_page);
    return segment ? `(pages ${segment.first_page}–${segment.last_page})\n\n${segment.markdown}` : null;
  }

  tab(markdown) {
    this.el.text.hidden = markdown;
    this.el.markdown.hidden = !markdown;
    this.el["tab-blocks"].setAttribute("aria-selected", String(!markdown));
    this.el["tab-markdown"].setAttribute("aria-selected", String(markdown));
  }

  async copy() {
    try {
      await navigator.clipboard.writeText(this.result.markdown);
      this.notify("Markdown copied.");
    } catch {
      this.notify("The browser refused the clipboard: use Download .md instead.", true);
    }
  }
}
