// DOM helpers: elements are built with text nodes only (never innerHTML), so values from the
// data cannot inject markup.

/** Creates an element: h("a", {href: "#/x", class: "y"}, "text", child, ...). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A table: headers (strings; "#" prefix = numeric column) and rows of cells. */
export function table(heads, rows, attrs) {
  const num = heads.map((x) => x.startsWith("#"));
  return h("table", attrs,
    h("thead", null, h("tr", null, heads.map((x, i) => h("th", { scope: "col", class: num[i] ? "num" : null }, num[i] ? x.slice(1) : x)))),
    h("tbody", null, rows.map((r) => h("tr", null, r.map((c, i) => h("td", { class: num[i] ? "num" : null }, c))))));
}

/** Formats a number with up to `d` fraction digits ("—" for none). */
export function num(x, d = 4) {
  if (x === undefined || x === null || Number.isNaN(x)) return "—";
  return Number(x).toLocaleString("en-US", { maximumFractionDigits: d });
}

/** Formats a share as a percentage. */
export function pct(x, d = 1) {
  return x === undefined || x === null ? "—" : (100 * x).toFixed(d) + " %";
}

/** Formats milliseconds. */
export function ms(x) {
  if (x === undefined || x === null) return "—";
  if (x < 1000) return Math.round(x) + " ms";
  if (x < 120000) return (x / 1000).toFixed(1) + " s";
  return (x / 60000).toFixed(1) + " min";
}

/** A status badge. */
export function status(s) {
  return h("span", { class: "status status-" + s }, s);
}

/** Bytes in KB/MB. */
export function bytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1 << 20) return (n / 1024).toFixed(1) + " KB";
  return (n / (1 << 20)).toFixed(1) + " MB";
}

/** An error notice (role=alert). */
export function notice(err) {
  const text = err && err.message ? err.message : String(err);
  const code = err && err.code ? ` (${err.code})` : "";
  return h("div", { class: "notice", role: "alert" }, text + code);
}

/**
 * Pages through a list answer ({items, next_cursor}): Previous/Next buttons and the page number.
 * `load(cursor)` shows one page and resolves to its answer; the pager remembers the cursor of
 * every page seen, so Previous goes back without a cursor of its own.
 */
export class Pager {
  constructor(id, load) {
    this.cursors = [null];
    this.index = 0;
    this.load = load;
    this.prev = h("button", { type: "button", class: "secondary", id: id + "-prev" }, "Previous page");
    this.next = h("button", { type: "button", class: "secondary", id: id + "-next" }, "Next page");
    this.info = h("span", { id: id + "-page", class: "muted" });
    this.el = h("nav", { class: "row pager", id, "aria-label": "pages" }, this.prev, this.info, this.next);
    this.prev.addEventListener("click", () => this.go(this.index - 1));
    this.next.addEventListener("click", () => this.go(this.index + 1));
  }

  /** The cursor of the page shown (null: the first). */
  get cursor() {
    return this.cursors[this.index];
  }

  async go(index) {
    if (index < 0 || index >= this.cursors.length) return;
    this.index = index;
    await this.refresh();
  }

  /** Loads the current page again (e.g. every few seconds). */
  async refresh() {
    const page = await this.load(this.cursor);
    this.cursors.length = this.index + 1;
    if (page.next_cursor) this.cursors.push(page.next_cursor);
    this.prev.disabled = this.index === 0;
    this.next.disabled = !page.next_cursor;
    this.el.hidden = this.index === 0 && !page.next_cursor;
    fill(this.info, `Page ${this.index + 1}`);
    return page;
  }
}

/** The page size of a list view: `?limit=` of the hash (1 to 100), else 100. */
export function pageSize() {
  const m = location.hash.match(/[?&]limit=(\d+)/);
  const n = m ? Number(m[1]) : 100;
  return Math.min(100, Math.max(1, n || 100));
}

/** A list path with limit and cursor. */
export function listPath(base, cursor) {
  const q = new URLSearchParams({ limit: String(pageSize()) });
  if (cursor) q.set("cursor", cursor);
  return `${base}?${q}`;
}
