// The producer's HTTP API, as the page uses it: uploads, live status, results.
//
// Every call goes through fetch (never EventSource): EventSource cannot send the
// Authorization header an API key needs, so Server-Sent Events are read from a fetch stream.

const KEY_NAME = "ocrq.apiKey";
export const TERMINAL = new Set(["done", "failed", "cancelled"]);

// sessionStorage, not localStorage: the key leaves with the tab.
export function apiKey() {
  return sessionStorage.getItem(KEY_NAME) || "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_NAME, key);
  else sessionStorage.removeItem(KEY_NAME);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function withKey(headers = {}) {
  const key = apiKey();
  return key ? { ...headers, Authorization: `Bearer ${key}` } : headers;
}

async function call(path, init = {}) {
  const response = await fetch(path, { ...init, headers: withKey(init.headers) });
  if (!response.ok) {
    let body = {};
    try {
      body = await response.json();
    } catch {
      // not an ocrq error body (a proxy's page): the status says enough
    }
    throw new ApiError(response.status, body.code || `http_${response.status}`,
      body.message || response.statusText);
  }
  return response;
}

// A semaphore: a browser opens at most 6 connections to one host over HTTP/1.1, and a live
// stream holds one for as long as the job runs; the rest must stay free for uploads and reads.
class Slots {
  constructor(size) {
    this.free = size;
    this.waiting = [];
  }

  async run(task) {
    if (this.free > 0) this.free -= 1;
    else await new Promise((resolve) => this.waiting.push(resolve));
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free += 1;
    }
  }
}

const uploads = new Slots(2);
const watches = new Slots(3);

export async function config() {
  return (await call("/ui/config")).json();
}

// Job options as query parameters, the way a raw upload takes them; only those set are sent
// (`options`: {pages, keep_headers_footers, searchable_pdf}, as JobOptions names them).
function optionQuery(options = {}) {
  const query = new URLSearchParams();
  if (options.pages) query.set("pages", options.pages);
  if (options.keep_headers_footers) query.set("keep_headers_footers", "true");
  if (options.searchable_pdf) query.set("searchable_pdf", "true");
  return query;
}

// The file as the raw body: its bytes decide its type, so the declared type is left generic.
export function submitJob(file, options) {
  const query = optionQuery(options);
  query.set("filename", file.name);
  return uploads.run(async () => (await call(`/v1/jobs?${query}`, {
    method: "POST", body: file, headers: { "Content-Type": "application/octet-stream" },
  })).json());
}

// A ZIP as one batch: the options apply to every job of it.
export function submitZip(file, options) {
  const query = optionQuery(options);
  const path = String(query) ? `/v1/batches?${query}` : "/v1/batches";
  return uploads.run(async () => (await call(path, {
    method: "POST", body: file, headers: { "Content-Type": "application/zip" },
  })).json());
}

export async function result(jobId) {
  return (await call(`/v1/jobs/${encodeURIComponent(jobId)}/result`)).text();
}

// The paths of a job's outputs: a format of its result, a table as CSV (n counts the table
// blocks from 1 in reading order), a figure's image (its name as the result gives it).
export function resultPath(jobId, format) {
  return `/v1/jobs/${encodeURIComponent(jobId)}/result?format=${encodeURIComponent(format)}`;
}

export function tablePath(jobId, n) {
  return `/v1/jobs/${encodeURIComponent(jobId)}/tables/${n}.csv`;
}

export function imagePath(jobId, name) {
  return `/v1/jobs/${encodeURIComponent(jobId)}/images/${encodeURIComponent(name)}`;
}

// A path's body as a Blob, fetched with the key: a plain link or <img src> could not send it.
export async function blob(path) {
  return (await call(path)).blob();
}

export async function batchJobs(batchId) {
  const jobs = [];
  let offset = 0;
  while (offset !== null && offset !== undefined) {
    const page = await (await call(
      `/v1/batches/${encodeURIComponent(batchId)}?limit=100&offset=${offset}`)).json();
    jobs.push(...page.jobs);
    offset = page.next_offset;
  }
  return jobs;
}

// The events of one SSE response, as {event, data, id}, until the stream ends.
async function* sseEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      const event = { event: "message", data: [], id: "" };
      for (const line of raw.split(/\r?\n/)) {
        if (!line || line.startsWith(":")) continue; // a keep-alive comment
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") event.data.push(text);
        else if (field === "event") event.event = text;
        else if (field === "id") event.id = text;
      }
      if (event.data.length) yield { ...event, data: event.data.join("\n") };
    }
  }
}

// Follow a stream until `done(parsed data)`; resumes with Last-Event-ID when a proxy cuts it.
// Returns false when streaming is not possible here, so the caller falls back to long-polling.
async function follow(path, onEvent, done) {
  let lastId = "";
  for (let attempt = 0; attempt < 5; attempt += 1) {
    let response;
    try {
      const headers = { Accept: "text/event-stream" };
      if (lastId) headers["Last-Event-ID"] = lastId;
      response = await call(path, { headers });
    } catch (error) {
      if (error instanceof ApiError && error.status < 500) throw error; // 401, 404: final
      return false;
    }
    if (!response.body) return false;
    try {
      for await (const event of sseEvents(response)) {
        lastId = event.id || lastId;
        const data = JSON.parse(event.data);
        onEvent(data);
        if (done(data)) return true;
      }
    } catch {
      // the connection dropped: open it again
    }
  }
  return false;
}

// Status and pages of one job, live, until it ends: SSE first, long-polling otherwise.
export function watchJob(jobId, onUpdate) {
  const id = encodeURIComponent(jobId);
  return watches.run(async () => {
    const ended = (summary) => TERMINAL.has(summary.status);
    if (await follow(`/v1/jobs/${id}/events`, onUpdate, ended)) return;
    for (;;) {
      const view = await (await call(`/v1/jobs/${id}?wait=30`)).json();
      onUpdate(view);
      if (ended(view)) return;
    }
  });
}

// A batch's jobs, refreshed on each of its events (at most once a second), until it finishes.
export function watchBatch(batchId, onJobs) {
  const id = encodeURIComponent(batchId);
  let last = 0;
  const refresh = async (event) => {
    const finished = event.status === "finished";
    if (!finished && Date.now() - last < 1000) return;
    last = Date.now();
    onJobs(await batchJobs(batchId));
  };
  return watches.run(async () => {
    let pending = Promise.resolve();
    const onEvent = (event) => {
      pending = pending.then(() => refresh(event));
    };
    const streamed = await follow(`/v1/batches/${id}/events`, onEvent,
      (event) => event.status === "finished");
    await pending;
    if (streamed) return;
    for (;;) {
      const jobs = await batchJobs(batchId);
      onJobs(jobs);
      if (jobs.every((job) => TERMINAL.has(job.status))) return;
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  });
}
