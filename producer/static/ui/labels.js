// Block labels as the viewer shows them: one colour per label of the result's vocabulary
// (shared/schemas.py BLOCK_LABELS), a readable name, and page furniture drawn dashed.
//
// Results written before the vocabulary carry the vLLM engine's own labels (sub_title, image,
// equation…): they are shown under the label they now map to, and any other label in grey.

export const LABELS = {
  title: { name: "title", colour: "#d62728" },
  heading: { name: "heading", colour: "#ff7f0e" },
  text: { name: "text", colour: "#1f77b4" },
  list_item: { name: "list item", colour: "#17becf" },
  table: { name: "table", colour: "#2ca02c" },
  figure: { name: "figure", colour: "#9467bd" },
  caption: { name: "caption", colour: "#bcbd22" },
  formula: { name: "formula", colour: "#e377c2" },
  page_header: { name: "page header", colour: "#8c564b", furniture: true },
  page_footer: { name: "page footer", colour: "#8c564b", furniture: true },
  page_number: { name: "page number", colour: "#8c564b", furniture: true },
};
const OLD_LABELS = {
  sub_title: "heading", image: "figure", equation: "formula", list: "list_item",
  header: "page_header", footer: "page_footer",
};
const OTHER = { name: "", colour: "#7f7f7f" };

// The vocabulary's label for `label` (an old one mapped), or `label` itself when unknown.
export function canonical(label) {
  const key = (label || "").toLowerCase();
  return OLD_LABELS[key] || key;
}

function labelInfo(label) {
  return LABELS[canonical(label)] || OTHER;
}

export function colourOf(label) {
  return labelInfo(label).colour;
}

export function isFurniture(label) {
  return Boolean(labelInfo(label).furniture);
}

// What a person reads for a label: "list item", "page header", an unknown label as it is.
export function labelName(label) {
  return labelInfo(label).name || label || "unlabelled";
}

// What a person reads for a block: its label's name, and a heading's level ("heading 2").
export function blockName(block) {
  const name = labelName(block.label);
  return canonical(block.label) === "heading" && block.level ? `${name} ${block.level}` : name;
}

// Colour custom properties on an element (outline, light fill, stronger highlight) and
// the furniture class that draws it dashed.
export function paint(element, label) {
  const colour = colourOf(label);
  element.style.setProperty("--c", colour);
  element.style.setProperty("--fill", `${colour}1a`);
  element.style.setProperty("--strong", `${colour}55`);
  element.classList.toggle("furniture", isFurniture(label));
}

// The labels of `blocks` with their counts, the vocabulary's order first, unknown ones after.
export function labelCounts(blocks) {
  const counts = new Map();
  for (const block of blocks) {
    const label = canonical(block.label);
    counts.set(label, (counts.get(label) || 0) + 1);
  }
  const order = Object.keys(LABELS);
  const rank = (label) => (order.includes(label) ? order.indexOf(label) : order.length);
  return [...counts].sort(([a], [b]) => rank(a) - rank(b));
}
