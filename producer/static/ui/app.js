// The page: drop files, follow each job live, open a result in the viewer.
//
// A job the page uploaded keeps its File, so the viewer draws its pages from it; a job opened
// by id (/ui#job=ID) has no file here, and the viewer draws its boxes on a blank page.

import * as api from "./api.js";
import { openSource } from "./pages.js";
import { Viewer } from "./viewer.js";
import { zipMembers } from "./zip.js";

const entries = new Map(); // job id -> entry
const sources = new WeakMap(); // entry -> Promise of its page source (opened once)
const el = (id) => document.getElementById(id);
let viewer;
let wanted = null; // the job id the hash asks to open when it is done
let maxBytes = Infinity; // the producer's document limit, from /ui/config

function notify(message, error = false) {
  el("notice").textContent = message;
  el("notice").classList.toggle("error", error);
}

function askForKey(message) {
  el("key-form").hidden = false;
  el("key-form").classList.add("needed");
  el("api-key").focus();
  notify(message, true);
}

function failed(error) {
  if (error instanceof api.ApiError && error.status === 401) {
    askForKey(`${error.message}: enter an API key.`);
  } else {
    notify(error.message || String(error), true);
  }
}

// The options the form sets for the next upload (JobOptions names), or null when the pages
// field holds no valid range: the producer would refuse it, so it is said here at once.
function chosenOptions() {
  const pages = el("opt-pages");
  if (!pages.checkValidity()) {
    notify("Pages: a list of pages and ranges, such as 1-3,7.", true);
    pages.focus();
    return null;
  }
  return {
    pages: pages.value.trim(),
    keep_headers_footers: el("opt-keep-furniture").checked,
    searchable_pdf: el("opt-searchable-pdf").checked,
  };
}

// The options of a job as its row shows them: only those that differ from the defaults.
function optionsNote(options) {
  if (!options) return "";
  return [options.pages && `pages ${options.pages}`,
    options.keep_headers_footers && "headers kept", options.searchable_pdf && "PDF kept"]
    .filter(Boolean).join(", ");
}

// A row in the job list; `entry` is {id, name, file, options, status, done, total, error}.
function newRow(entry) {
  const li = document.createElement("li");
  li.className = "job";
  const name = document.createElement("span");
  name.className = "name";
  const meta = document.createElement("span");
  meta.className = "meta";
  const status = document.createElement("span");
  const pages = document.createElement("span");
  pages.className = "pages";
  const options = document.createElement("span");
  options.className = "options";
  meta.append(status, pages, options);
  const error = document.createElement("span");
  error.className = "error";
  const open = document.createElement("button");
  open.type = "button";
  open.className = "open";
  open.textContent = "View";
  open.addEventListener("click", () => show(entry));
  li.append(name, open, meta, error);
  el("jobs").prepend(li);
  entry.li = li;
  render(entry);
  return entry;
}

function render(entry) {
  const li = entry.li;
  if (entry.id) li.dataset.id = entry.id;
  li.querySelector(".name").textContent = entry.name || entry.id;
  li.querySelector(".name").title = entry.id ? `${entry.name || ""} (${entry.id})` : entry.name;
  const status = li.querySelector(".meta span");
  status.className = `status ${entry.status}`;
  status.textContent = entry.status;
  li.querySelector(".pages").textContent = entry.total ? `${entry.done}/${entry.total} pages` : "";
  li.querySelector(".options").textContent = optionsNote(entry.options);
  li.querySelector(".error").textContent = entry.error || "";
  li.querySelector(".open").disabled = entry.status !== "done";
}

// A job's state from an event, a long-poll or a batch listing (their shapes differ a little).
function update(entry, state) {
  const progress = state.progress || state;
  entry.status = state.status;
  entry.done = progress.pages_done || 0;
  entry.total = progress.pages_total || 0;
  entry.name = entry.name || state.filename;
  const error = state.error;
  entry.error = error ? (error.message ? `${error.code}: ${error.message}` : String(error)) : "";
  render(entry);
  if (entry.status === "done" && wanted === entry.id) show(entry);
}

function track(entry) {
  entries.set(entry.id, entry);
  api.watchJob(entry.id, (state) => update(entry, state)).catch(failed);
}

async function uploadOne(file, options) {
  const entry = newRow({ id: null, name: file.name, file, options, status: "uploading" });
  if (file.size > maxBytes) {
    // Refused here: a producer answers 413 before the body is sent, which a browser may
    // report as a failed upload rather than as the answer.
    Object.assign(entry, { status: "refused", error: `payload_too_large: over ${maxBytes} bytes` });
    render(entry);
    return;
  }
  try {
    const accepted = await api.submitJob(file, options);
    entry.id = accepted.id;
    update(entry, accepted);
    track(entry);
  } catch (error) {
    entry.status = "refused";
    entry.error = error.message;
    render(entry);
    if (error.status === 401) failed(error);
  }
}

async function uploadZip(file, options) {
  const holder = newRow({ id: null, name: file.name, status: "uploading" });
  try {
    const [batch, inside] = await Promise.all([api.submitZip(file, options),
      zipMembers(file).catch(() => [])]);
    holder.li.remove();
    const members = new Map();
    // Rows go on top of the list: the last file first, so they read in the archive's order.
    const files = [...batch.accepted, ...batch.rejected].sort((a, b) => b.index - a.index);
    for (const item of files) {
      const name = `${file.name}: ${item.filename}`;
      if (!item.id) {
        newRow({ id: null, name, status: "refused", error: `${item.code}: ${item.message}` });
        continue;
      }
      const entry = newRow({
        id: item.id, name, options, status: "queued", member: inside[item.index],
      });
      entries.set(item.id, entry);
      members.set(item.id, entry);
    }
    api.watchBatch(batch.id, (jobs) => {
      for (const job of jobs) if (members.has(job.id)) update(members.get(job.id), job);
    }).catch(failed);
  } catch (error) {
    holder.status = "refused";
    holder.error = error.message;
    render(holder);
    if (error.status === 401) failed(error);
  }
}

async function isZip(file) {
  const head = new Uint8Array(await file.slice(0, 4).arrayBuffer());
  return head[0] === 0x50 && head[1] === 0x4b && head[2] === 0x03 && head[3] === 0x04;
}

async function upload(files) {
  notify("");
  const options = chosenOptions();
  if (!options) return;
  await Promise.all([...files].map(async (file) =>
    ((await isZip(file)) ? uploadZip(file, options) : uploadOne(file, options))));
}

// The file a job came from: the one dropped, or its member of a dropped ZIP, unpacked now.
async function fileOf(entry) {
  if (entry.file || !entry.member) return entry.file || null;
  try {
    return await entry.member.file();
  } catch (error) {
    console.warn("ocrq: cannot unpack", entry.member.name, error);
    return null;
  }
}

function sourceOf(entry) {
  if (!sources.has(entry)) sources.set(entry, fileOf(entry).then(openSource));
  return sources.get(entry);
}

async function show(entry) {
  wanted = null;
  for (const li of document.querySelectorAll(".job.current")) li.classList.remove("current");
  entry.li?.classList.add("current");
  if (location.hash !== `#job=${entry.id}`) history.replaceState(null, "", `#job=${entry.id}`);
  try {
    const [raw, source] = await Promise.all([api.result(entry.id), sourceOf(entry)]);
    await viewer.show(entry, raw, source);
  } catch (error) {
    failed(error);
  }
}

// /ui#job=ID, or the id typed in: follow it, and open it once it is done.
function openById(id) {
  if (!id) return;
  wanted = id;
  const known = entries.get(id);
  if (known) {
    if (known.status === "done") show(known);
    return;
  }
  track(newRow({ id, name: "", status: "…" }));
}

function hashJob() {
  return new URLSearchParams(location.hash.slice(1)).get("job");
}

function wireDrop() {
  const drop = el("drop");
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    upload(event.dataTransfer.files);
  });
  // A file dropped beside the zone would make the browser navigate away to it.
  window.addEventListener("dragover", (event) => event.preventDefault());
  window.addEventListener("drop", (event) => event.preventDefault());
  drop.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") el("file-input").click();
  });
  el("file-input").addEventListener("change", (event) => {
    upload(event.target.files);
    event.target.value = "";
  });
}

function wireForms() {
  el("api-key").value = api.apiKey();
  el("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    api.setApiKey(el("api-key").value.trim());
    el("key-form").classList.remove("needed");
    notify(api.apiKey() ? "Key set for this tab." : "Key cleared.");
  });
  el("open-form").addEventListener("submit", (event) => {
    event.preventDefault();
    openById(el("open-id").value.trim());
    el("open-id").value = "";
  });
  window.addEventListener("hashchange", () => openById(hashJob()));
}

async function start() {
  viewer = new Viewer(notify);
  wireDrop();
  wireForms();
  try {
    const settings = await api.config();
    el("key-form").hidden = !settings.api_keys;
    maxBytes = settings.max_document_bytes;
    if (settings.api_keys && !api.apiKey()) notify("This server requires an API key.");
  } catch (error) {
    failed(error);
  }
  openById(hashJob());
  document.body.dataset.ready = "true";
}

start();
