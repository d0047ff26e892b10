// The Fields tab: each value the job's extract schema asked for, with where it was read;
// and a redacted job's masked values, drawn black over the page.
// Hovering a field draws its boxes on its page (clicking one on another page goes there);
// a value found on no page says so. Values are the document's text: set as textContent only.

function text(tag, className, content) {
  const el = document.createElement(tag);
  el.className = className;
  el.textContent = content;
  return el;
}

function shown(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

// The entry of source `f` of `fields` (its path, value, page and confidence).
function fieldItem(source, f) {
  const item = document.createElement("div");
  item.className = source.grounded ? "field" : "field ungrounded";
  item.dataset.f = String(f);
  const where = source.grounded
    ? `page ${source.page} · confidence ${Math.round(source.confidence * 100)} %`
    : "not found on the page";
  item.append(text("span", "tag", source.path), text("p", "value", shown(source.value)),
    text("span", "where", where));
  return item;
}

// The pane's content: an error first when the fields could not all be read, then each field.
export function fieldItems(fields) {
  const items = [];
  if (fields.error) items.push(text("p", "field-error", `${fields.error.code}: ${fields.error.message}`));
  items.push(...fields.sources.map((source, f) => fieldItem(source, f)));
  return items;
}

// The boxes of one source, as percentages of the page (drawn over it, above the blocks').
export function fieldBoxes(source) {
  return (source.boxes || []).map(([x1, y1, x2, y2]) => {
    const box = document.createElement("div");
    box.className = "field-box";
    box.dataset.name = source.path;
    Object.assign(box.style, {
      left: `${x1 * 100}%`, top: `${y1 * 100}%`,
      width: `${(x2 - x1) * 100}%`, height: `${(y2 - y1) * 100}%`,
    });
    return box;
  });
}

// A redacted job's masked values: black boxes where each was (its kind as the title).
export function redactionBoxes(page) {
  return (page.redactions || []).flatMap((redaction) => fieldBoxes({
    path: redaction.kind, boxes: redaction.boxes,
  }).map((box) => {
    box.className = "redaction-box";
    box.title = `redacted: ${redaction.kind}`;
    return box;
  }));
}
