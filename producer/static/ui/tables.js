// A table block's grid as an HTML table, built from its cells with DOM methods.
//
// The result's own `table.html` is never used: its text comes from the document, untrusted,
// and parsing it as markup would let a document put elements (and handlers) on the page.

function clampSpan(value, room) {
  const span = Number.isInteger(value) && value > 0 ? value : 1;
  return Math.max(1, Math.min(span, room));
}

// The cells by grid position; a cell outside the grid, or on one already taken, is dropped.
function cellsByPosition(table) {
  const at = new Map();
  for (const cell of table.cells || []) {
    const { row, col } = cell;
    if (!(row >= 0 && row < table.rows && col >= 0 && col < table.cols)) continue;
    const key = `${row},${col}`;
    if (!at.has(key)) at.set(key, cell);
  }
  return at;
}

// `room` is how far the cell may reach: rows below, and free columns to its right (a span
// must not reach over a cell that a row span from above already holds).
function cellElement(cell, room) {
  const element = document.createElement(cell && cell.header ? "th" : "td");
  if (!cell) return element;
  element.textContent = cell.text || "";
  element.rowSpan = clampSpan(cell.row_span, room.rows);
  element.colSpan = clampSpan(cell.col_span, room.cols);
  return element;
}

function freeColumns(covered, row, col, cols) {
  let end = col;
  while (end < cols && !covered.has(`${row},${end}`)) end += 1;
  return end - col;
}

// A <table> of `table` ({rows, cols, cells}): spans as rowSpan/colSpan, header cells as <th>,
// a position no cell covers as an empty cell, so every row has the grid's width.
export function tableGrid(table) {
  const rows = Math.max(0, table.rows | 0);
  const cols = Math.max(0, table.cols | 0);
  const at = cellsByPosition({ ...table, rows, cols });
  const covered = new Set();
  const grid = document.createElement("table");
  grid.className = "grid";
  const body = document.createElement("tbody");
  for (let r = 0; r < rows; r += 1) {
    const tr = document.createElement("tr");
    for (let c = 0; c < cols; c += 1) {
      if (covered.has(`${r},${c}`)) continue;
      const cell = at.get(`${r},${c}`);
      const room = { rows: rows - r, cols: freeColumns(covered, r, c, cols) };
      const element = cellElement(cell, room);
      for (let dr = 0; dr < element.rowSpan; dr += 1) {
        for (let dc = 0; dc < element.colSpan; dc += 1) covered.add(`${r + dr},${c + dc}`);
      }
      tr.append(element);
    }
    body.append(tr);
  }
  grid.append(body);
  return grid;
}
