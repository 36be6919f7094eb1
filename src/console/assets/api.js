// The API client of the console: the key (session storage only, sent as a header; no cookies),
// JSON requests, uploads with progress, and Server-Sent Events read with fetch (EventSource
// cannot send a header).

const KEY = "deid.apiKey";

/** The API key of this tab ("" if none). */
export function apiKey() {
  return sessionStorage.getItem(KEY) || "";
}

/** Remembers the key for this tab (an empty key forgets it). */
export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** An error answer of the API: status, code, message, details (with `field` for 422s). */
export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || "http_" + status;
    this.details = e.details || {};
  }
}

function headers(extra) {
  const h = new Headers(extra || {});
  const key = apiKey();
  if (key) h.set("Authorization", "Bearer " + key);
  return h;
}

async function failure(r) {
  let body = null;
  try {
    body = await r.json();
  } catch (_) {
    body = null;
  }
  return new ApiError(r.status, body);
}

/** A request; resolves to parsed JSON (or the Response with `raw`), rejects with ApiError. */
export async function api(path, opts = {}) {
  const h = headers(opts.headers);
  let body = opts.body;
  if (opts.json !== undefined) {
    h.set("Content-Type", "application/json");
    body = JSON.stringify(opts.json);
  }
  const r = await fetch(path, { method: opts.method || "GET", headers: h, body, cache: "no-store", signal: opts.signal });
  if (!r.ok) throw await failure(r);
  if (opts.raw) return r;
  const type = r.headers.get("Content-Type") || "";
  return type.includes("json") ? r.json() : r.text();
}

/** Uploads `file` as text/csv to `path`, calling `progress(sent, total)`; resolves to the JSON. */
export function upload(path, file, progress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open("POST", path);
    const key = apiKey();
    if (key) x.setRequestHeader("Authorization", "Bearer " + key);
    x.setRequestHeader("Content-Type", "text/csv");
    x.upload.onprogress = (e) => progress(e.loaded, e.lengthComputable ? e.total : file.size);
    x.onload = () => {
      let body = null;
      try {
        body = JSON.parse(x.responseText);
      } catch (_) {
        body = null;
      }
      if (x.status >= 200 && x.status < 300) resolve(body);
      else reject(new ApiError(x.status, body));
    };
    x.onerror = () => reject(new ApiError(0, { error: { message: "the upload failed (network)" } }));
    x.send(file);
  });
}

/**
 * Follows the event stream at `path`: calls `onEvent(name, data)` for each event, reconnects
 * with Last-Event-ID until a terminal event (done, failed, cancelled) or `signal` aborts.
 */
export async function followEvents(path, onEvent, signal) {
  let lastId = null;
  for (;;) {
    const h = headers({ Accept: "text/event-stream" });
    if (lastId !== null) h.set("Last-Event-ID", lastId);
    let ended = false;
    try {
      const r = await fetch(path, { headers: h, cache: "no-store", signal });
      if (!r.ok) throw await failure(r);
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value.replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const ev = parseEvent(block);
          if (!ev) continue;
          if (ev.id !== null) lastId = ev.id;
          if (["done", "failed", "cancelled"].includes(ev.name)) ended = true;
          onEvent(ev.name, ev.data);
        }
      }
    } catch (e) {
      if (signal && signal.aborted) return;
      if (e instanceof ApiError) throw e;
    }
    if (ended || (signal && signal.aborted)) return;
    await new Promise((res) => setTimeout(res, 1000));
  }
}

function parseEvent(block) {
  let name = "message", id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let v = i < 0 ? "" : line.slice(i + 1);
    if (v.startsWith(" ")) v = v.slice(1);
    if (field === "event") name = v;
    else if (field === "data") data.push(v);
    else if (field === "id") id = v;
  }
  if (!data.length) return null;
  let parsed;
  try {
    parsed = JSON.parse(data.join("\n"));
  } catch (_) {
    parsed = data.join("\n");
  }
  return { name, id, data: parsed };
}

/** Downloads `path` (with the key) and saves it as `filename`; resolves to the bytes' text. */
export async function download(path, filename) {
  const r = await api(path, { raw: true });
  const blob = await r.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  return blob.text();
}

/** The first `max` bytes of `path` as text (the rest is not read). */
export async function head(path, max) {
  const r = await api(path, { raw: true });
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (text.length < max) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  reader.cancel().catch(() => {});
  return text;
}
