// A job's downloads and figure images, all fetched with the API key.
//
// A plain link or <img src> cannot send the Authorization header an API key needs, so every
// file is fetched, held as a Blob, and handed to the browser through an object URL (blob:,
// which the page's CSP allows for images). A link keeps its real href all the same: without a
// key it still works as a link (open in a tab, copy its address).

import * as api from "./api.js";

// Save `blob` under `name`, as a click on a download link would.
export function saveBlob(name, blob) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function baseName(name) {
  return (name || "result").replace(/\.[^./]+$/, "") || "result";
}

// Fetch `path` with the key and save it as `name`; `notify` tells the user how it went.
export async function fetchAndSave(path, name, notify) {
  try {
    saveBlob(name, await api.blob(path));
  } catch (error) {
    notify(`${name}: ${error.message || error}`, true);
  }
}

// A link to `path` that downloads it as `name` through fetch (see the module's comment).
export function downloadLink(path, name, text, notify) {
  const link = document.createElement("a");
  link.href = path;
  link.download = name;
  link.textContent = text;
  link.addEventListener("click", (event) => {
    event.preventDefault();
    fetchAndSave(path, name, notify);
  });
  return link;
}

// Object URLs of one job's figure images, fetched once each; revoked when the job changes.
export class Images {
  constructor() {
    this.jobId = null;
    this.urls = new Map(); // name -> Promise of an object URL
  }

  forJob(jobId) {
    if (jobId === this.jobId) return;
    for (const url of this.urls.values()) url.then((u) => URL.revokeObjectURL(u), () => {});
    this.urls.clear();
    this.jobId = jobId;
  }

  url(name) {
    if (!this.urls.has(name)) {
      const path = api.imagePath(this.jobId, name);
      this.urls.set(name, api.blob(path).then((b) => URL.createObjectURL(b)));
    }
    return this.urls.get(name);
  }
}

// A thumbnail of figure `name`: an <img> whose source arrives once its image is fetched.
export function thumbnail(images, name) {
  const image = document.createElement("img");
  image.className = "thumb";
  image.alt = `figure ${name}`;
  image.decoding = "async";
  images.url(name).then((url) => {
    image.src = url;
  }, (error) => {
    image.alt = `figure ${name}: ${error.message || error}`;
    image.classList.add("missing");
  });
  return image;
}

// The toolbar's menu: the result in each format, the searchable PDF when one is kept, and
// each figure image. Its buttons carry data-format (a result format) or data-image (a name).
export class DownloadMenu {
  constructor(notify) {
    this.notify = notify;
    this.menu = document.getElementById("downloads");
    this.figures = document.getElementById("dl-figures");
    this.entry = null;
    this.menu.addEventListener("click", (event) => this.clicked(event));
    document.addEventListener("click", (event) => {
      if (this.menu.open && !this.menu.contains(event.target)) this.menu.open = false;
    });
    this.menu.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.menu.open = false;
    });
  }

  // Offer `entry`'s downloads: `result` says whether a PDF is kept and which figures exist.
  show(entry, result) {
    this.entry = entry;
    this.menu.open = false;
    document.getElementById("dl-pdf").hidden = !result.searchable_pdf;
    document.getElementById("dl-fields").hidden = !result.fields;
    const images = result.images || [];
    this.figures.hidden = images.length === 0;
    this.figures.querySelector(".menu-items").replaceChildren(...images.map((name) => {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.image = name;
      button.textContent = name;
      return button;
    }));
  }

  clicked(event) {
    const button = event.target.closest("button");
    if (!button || !this.entry) return;
    const base = baseName(this.entry.name);
    const { format, ext, image } = button.dataset;
    if (format) fetchAndSave(api.resultPath(this.entry.id, format), `${base}.${ext}`, this.notify);
    else if (image) fetchAndSave(api.imagePath(this.entry.id, image), `${base}-${image}`, this.notify);
    else return;
    this.menu.open = false;
  }
}
