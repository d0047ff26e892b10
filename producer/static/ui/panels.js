// The text side's entry for one block: its label, then its text, its table's grid (with a
// CSV download) or its figure's thumbnail. Everything from the result goes in as text
// (textContent) or as an attribute of an element made here: the result's text is the
// document's, untrusted, and is never parsed as markup.

import * as api from "./api.js";
import { downloadLink, thumbnail } from "./downloads.js";
import { blockName, canonical, paint } from "./labels.js";
import { tableGrid } from "./tables.js";

export function hasBox(block) {
  return Array.isArray(block.bbox) && block.bbox.length === 4;
}

function paragraph(text) {
  const p = document.createElement("p");
  p.textContent = text;
  return p;
}

// A table block: its grid, scrollable when wide, and its CSV (`n`: its number in the result).
function tablePanel(block, n, job) {
  const panel = document.createElement("div");
  panel.className = "table-panel";
  const scroller = document.createElement("div");
  scroller.className = "grid-scroll";
  scroller.append(tableGrid(block.table));
  const name = `${job.base}-table-${n}.csv`;
  const csv = downloadLink(api.tablePath(job.id, n), name, `Table ${n} as CSV`, job.notify);
  csv.className = "csv";
  panel.append(scroller, csv);
  return panel;
}

// A figure block: its crop, fetched from the images route, and a link to save it.
function figurePanel(block, job) {
  const panel = document.createElement("figure");
  panel.className = "figure-panel";
  const caption = document.createElement("figcaption");
  const path = api.imagePath(job.id, block.image);
  caption.append(downloadLink(path, `${job.base}-${block.image}`, block.image, job.notify));
  panel.append(thumbnail(job.images, block.image), caption);
  return panel;
}

// What the block shows under its label: the grid of a table that has cells, the image of a
// figure that has one, otherwise the text (a result from before tables and figures too).
function blockBody(block, job) {
  const label = canonical(block.label);
  if (label === "table" && block.table && job.tableNumbers.has(block)) {
    return tablePanel(block, job.tableNumbers.get(block), job);
  }
  if (label === "figure" && block.image) return figurePanel(block, job);
  return paragraph(block.text);
}

// The entry of block `i`; `job` is {id, base, images, tableNumbers, notify}.
export function blockItem(block, i, job) {
  const item = document.createElement("div");
  item.className = hasBox(block) ? "block" : "block nobox";
  item.dataset.i = String(i);
  item.dataset.label = canonical(block.label);
  paint(item, block.label);
  const tag = document.createElement("span");
  tag.className = "tag";
  tag.textContent = blockName(block);
  item.append(tag, blockBody(block, job));
  return item;
}

// Each table block's number in the result (1, 2, … in reading order): the CSV route's `n`.
export function tableNumbers(result) {
  const numbers = new Map();
  for (const page of result.pages || []) {
    for (const block of page.blocks) {
      if (canonical(block.label) === "table") numbers.set(block, numbers.size + 1);
    }
  }
  return numbers;
}
