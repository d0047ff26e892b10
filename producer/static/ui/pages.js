// Page images from the file the browser already holds: an image as it is, a PDF's pages
// rendered by pdf.js (vendored in /static/pdfjs, loaded only when a PDF is opened).
//
// A result's sizes and boxes refer to the upright page: a page the worker turned by
// `rotation` degrees counter-clockwise is drawn turned the same way, so the boxes fit it.

const PDFJS = "/static/pdfjs/pdf.min.mjs";
const PDFJS_WORKER = "/static/pdfjs/pdf.worker.min.mjs";
const MAX_SIDE = 2400; // canvas pixels on the long side: sharp enough, light on memory

let pdfjsModule = null;

async function pdfjs() {
  if (!pdfjsModule) {
    pdfjsModule = await import(PDFJS);
    pdfjsModule.GlobalWorkerOptions.workerSrc = PDFJS_WORKER;
  }
  return pdfjsModule;
}

async function isPdf(file) {
  const head = new Uint8Array(await file.slice(0, 1024).arrayBuffer());
  const text = String.fromCharCode(...head);
  return text.includes("%PDF-");
}

// A drawable (image or canvas) of page `number` as stored, or null when there is none.
async function imageSource(file) {
  const url = URL.createObjectURL(file);
  const image = new Image();
  image.src = url;
  try {
    await image.decode();
  } catch {
    URL.revokeObjectURL(url); // a TIFF, say: the browser cannot show it
    return null;
  }
  return {
    pages: 1,
    async drawable(number) {
      return number === 1 ? image : null;
    },
    close() {
      URL.revokeObjectURL(url);
    },
  };
}

async function pdfSource(file) {
  const lib = await pdfjs();
  const data = new Uint8Array(await file.arrayBuffer());
  // No eval: the page runs under a CSP without 'unsafe-eval'.
  const doc = await lib.getDocument({ data, isEvalSupported: false }).promise;
  return {
    pages: doc.numPages,
    async drawable(number, width, height) {
      if (number < 1 || number > doc.numPages) return null;
      const page = await doc.getPage(number);
      const base = page.getViewport({ scale: 1 });
      const scale = Math.min(width / base.width, height / base.height);
      const viewport = page.getViewport({ scale });
      const canvas = document.createElement("canvas");
      canvas.width = Math.round(viewport.width);
      canvas.height = Math.round(viewport.height);
      await page.render({ canvasContext: canvas.getContext("2d"), canvas, viewport }).promise;
      page.cleanup();
      return canvas;
    },
    close() {
      doc.destroy();
    },
  };
}

// What can draw the pages of `file` (null when it cannot be shown: then a blank page).
export async function openSource(file) {
  if (!file) return null;
  try {
    return (await isPdf(file)) ? await pdfSource(file) : await imageSource(file);
  } catch (error) {
    console.warn("ocrq: cannot render", file.name, error);
    return null;
  }
}

// The canvas size for a page of `width` x `height` result pixels.
export function canvasSize(width, height) {
  const scale = Math.min(1, MAX_SIDE / Math.max(width, height, 1));
  return [Math.max(1, Math.round(width * scale)), Math.max(1, Math.round(height * scale))];
}

// Draw page `page` (a result page) upright into `canvas`; false when there is nothing to draw.
export async function drawPage(source, page, canvas) {
  if (!source) return false;
  const [width, height] = canvasSize(page.width, page.height);
  const turned = (page.rotation || 0) % 180 !== 0;
  // As stored, a turned page is the upright page on its side.
  const [storedWidth, storedHeight] = turned ? [height, width] : [width, height];
  const drawable = await source.drawable(page.number, storedWidth, storedHeight);
  if (!drawable) return false;
  canvas.width = width;
  canvas.height = height;
  const ctx = canvas.getContext("2d");
  ctx.save();
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, width, height);
  ctx.translate(width / 2, height / 2);
  ctx.rotate((-(page.rotation || 0) * Math.PI) / 180); // canvas angles turn clockwise
  ctx.drawImage(drawable, -storedWidth / 2, -storedHeight / 2, storedWidth, storedHeight);
  ctx.restore();
  return true;
}
